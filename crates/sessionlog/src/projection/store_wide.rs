//! Store-wide projections: one view over every session of a store. spec:
//! format-spec/cache.md#store-wide-projections
//!
//! A store-wide projection is a [`Projection`] (a fold of one session's events into that
//! session's *part*) together with [`StoreProjection::total`], which combines the parts of
//! every live session into the view handed out. The store keeps every session's part in one
//! checkpoint file with each part's own watermark, so a read folds only the events appended
//! after those watermarks (in each session's seq order), drops the parts of sessions that
//! were deleted, and folds whole the sessions the checkpoint does not know.
//!
//! Why parts and a total rather than one fold over the log in its physical order: reclaim
//! rewrites sealed segments with their live records clustered by session, so the physical
//! order of records is not their commit order once a segment was rewritten, and a deleted
//! session must leave the view without a refold of everything. A total of per-session parts
//! is the same whatever order sessions were folded in (and across sessions, commit order is
//! only an order of batches), and removing a session is dropping its part.

use super::Projection;
use crate::CacheUse;

/// A [`Projection`] whose parts, one per session, make a view of the whole store. Register
/// with [`StoreOptions::with_store_projection`](crate::StoreOptions::with_store_projection)
/// and read with [`Store::store_projection`](crate::Store::store_projection).
///
/// `total` must depend only on the parts (not on their order): it is computed again on
/// every read from the parts checkpointed plus the events folded since.
pub trait StoreProjection: Projection {
    /// The view of the whole store.
    type Total;

    /// Combines the parts of every live session (by session name) into the view.
    fn total(&self, parts: &[(&str, &Self::State)]) -> Self::Total;
}

/// A store-wide projection as [`Store::store_projection`](crate::Store::store_projection)
/// hands it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreProjected<T> {
    /// The view.
    pub total: T,
    /// Sessions folded into it.
    pub sessions: u64,
    /// Events folded into it, all sessions together.
    pub events: u64,
    /// From the checkpoint plus this many events (all sessions together), or from the
    /// whole log.
    pub cache: CacheUse,
}
