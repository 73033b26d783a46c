//! Compaction: reducing what the model sees while the log keeps everything.
//!
//! - **Summary compaction** ([`compact`], or step by step through [`plan_compaction`] and
//!   [`CompactionPlan`]) produces DSH's transaction: `compaction/start` (the lock),
//!   `compaction/summary` (provenance: shadowed range and seqs, shadowed token count,
//!   model, usage), the replacement `user/message` citing the start, the summary and every
//!   shadowed node, and `compaction/end`. The surface changes only through the
//!   replacement event, so a crash before it leaves the model history as it was.
//! - **Recovery** ([`recover_compaction`]) closes a lock left open by a crash with a new
//!   `compaction/end`, never by editing the log.
//! - **Pruning** ([`prune_tool_results`]) shortens oversized tool results with single-node
//!   tool-result replacements that change only the content.
//! - **Policy** ([`CompactionPolicy`]) decides when to compact and which range: after any
//!   leading system messages, before the kept recent tail, never splitting a tool call
//!   from its result, never shadowing the active turn's newest tool result.
//! - **Views**: [`Session::derive_messages`](crate::Session::derive_messages) is what the
//!   model sees, [`Session::events`](crate::Session::events) keeps every event, and
//!   [`history_view`] gives the human transcript with compacted spans marked.
//!
//! The summary text comes from a caller-supplied [`Summarizer`]; nothing here calls a
//! network. [`DeterministicSummarizer`] serves tests and demos.

mod history;
mod policy;
mod prune;
mod recover;
mod summarizer;
mod transaction;

pub use history::{history_view, EntryKind, HistoryEntry, HistoryMark};
pub use policy::{CompactionPolicy, KeepRecent, SkipReason};
pub use prune::{prune_tool_results, PruneOptions};
pub use recover::{recover_compaction, CompactionLocks, INTERRUPTED_COMPACTION};
pub use summarizer::{
    DeterministicSummarizer, Summarizer, SummarizerError, Summary, SummaryRequest,
};
pub(crate) use transaction::summary_message_data;
pub use transaction::{
    compact, plan_compaction, CompactionContext, CompactionOutcome, CompactionPlan,
    CompactionReport, SUMMARY_PREAMBLE,
};

use std::borrow::Cow;

use crate::error::Error;
use crate::event::{Event, Seq};
use crate::json::JsonRef;
use crate::session::Session;
use crate::state::{LookBack, SessionState};

/// What compaction and pruning read of a session: its state, and its earlier events by seq
/// (only the surface nodes they consider). A [`Session`] is one; a store that keeps no
/// events passes its state with a reader of its log ([`StateAndPast`]).
pub trait SessionSource {
    /// The session's state.
    fn state(&self) -> &SessionState;
    /// The event with `seq`, `None` when the session has none.
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error>;
}

impl SessionSource for Session {
    fn state(&self) -> &SessionState {
        Session::state(self)
    }

    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        Ok(self.event(seq).map(Cow::Borrowed))
    }
}

/// A session's state with the reader of its earlier events.
pub struct StateAndPast<'a> {
    /// The state.
    pub state: &'a SessionState,
    /// Reads earlier events by seq.
    pub past: &'a dyn LookBack,
}

impl std::fmt::Debug for StateAndPast<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateAndPast")
            .field("state", self.state)
            .finish_non_exhaustive()
    }
}

impl SessionSource for StateAndPast<'_> {
    fn state(&self) -> &SessionState {
        self.state
    }

    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        self.past.event_at(seq)
    }
}

/// Whether a message is a compaction summary written by the `compact` plugin.
pub(crate) fn is_summary_message(message: JsonRef<'_>) -> bool {
    let source = message.get("source");
    source
        .and_then(|s| s.get("kind"))
        .and_then(|k| k.as_str())
        .as_deref()
        == Some("plugin")
        && source
            .and_then(|s| s.get("plugin"))
            .and_then(|p| p.as_str())
            .as_deref()
            == Some("compact")
}

/// The `compactionId` a summary message names.
pub(crate) fn summary_compaction_id(message: JsonRef<'_>) -> Option<String> {
    message
        .get("source")
        .and_then(|s| s.get("compactionId"))
        .and_then(|c| c.as_str())
        .map(|c| c.into_owned())
}

/// The largest index `<= at` that falls on a char boundary of `text`.
pub(crate) fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest index `>= at` that falls on a char boundary of `text`.
pub(crate) fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
