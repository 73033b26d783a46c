//! sessionlog: sessions stored on the segmented log.
//!
//! A [`Store`] keeps many sessions in one log directory. Each session is one stream of the
//! log: record 0 holds the session header, record `k + 1` holds event `k` (the event's
//! envelope exactly as written, so payload bytes round-trip). Every record's kind tag says
//! which event type it holds and whether it is a surface event, so readers can skip
//! structural records without parsing them. spec: format-spec/events.md
//!
//! Physical recovery happens when the store opens (the log cuts a torn tail); semantic repair
//! (closing a final turn left open by a crash) happens in [`Store::open_session`], written as
//! new events.

#![forbid(unsafe_code)]

pub mod cache;
mod error;
pub mod projection;
mod raw;
mod session_store;
mod store;
mod verify;
mod view;
pub mod workload;

pub use error::{Error, Result};
pub use projection::{
    MessageEstimate, Projected, Projection, ProjectionError, StoreProjected, StoreProjection,
    StoredEvent, Tally,
};
pub use raw::{LogReader, RawStream, KIND_RAW_RECORD, RAW_STREAM_PREFIX};
#[doc(inline)]
pub use sessionlog_log::{
    Access, Compression, Durability, LogOptions, ReclaimReport, RecoveryMode,
};
/// The session layer (events, validation, surface, repair, tokens, compaction, DSH import
/// and export), re-exported whole.
pub use sessionlog_session as session;
#[doc(inline)]
pub use sessionlog_session::build;
#[doc(inline)]
pub use sessionlog_session::{
    BuildEvent, Error as SessionError, Event, EventInput, Position, Rule, RuleSet, Seq,
    SessionHeader, SurfaceOp,
};
#[doc(inline)]
pub use sessionlog_session::{ErrorClass, NewEvent, SessionStore, StoreError, StoreResult};
pub use store::{
    parse_dsh, CacheCheck, CacheUse, ImportSummary, ProjectionCheck, Retention, RetentionReport,
    SessionHandle, SessionInfo, SessionView, Store, StoreOptions, KIND_SESSION_HEADER,
};
pub use verify::{SessionDamage, SessionsCheck};
pub use view::{RequestView, SurfaceView};

/// The README's example, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
