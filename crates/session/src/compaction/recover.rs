//! Crash recognition for compaction transactions.
//!
//! A crash can stop the transaction after any of its events. On a cold load every
//! `compaction/start` without a `compaction/end` is an orphaned lock (no compaction can be
//! live in a process that just started), and each gets an end appended:
//!
//! - replacement not written (crash after the start or after the summary): the end
//!   carries an `error`. A summary without its replacement changes nothing, because the
//!   surface only moves through the replacement event.
//! - replacement written (crash before the end only): the compaction took effect, so the
//!   end is a plain one, as the transaction would have written it.

use crate::event::{Event, EventInput, Seq, SurfaceOp};
use crate::json::ObjectWriter;
use crate::session::Session;

/// The `error` text of an end written for an interrupted compaction.
pub const INTERRUPTED_COMPACTION: &str =
    "compaction interrupted before its replacement was written; the surface is unchanged";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Open {
    id: String,
    turn: String,
    replaced: bool,
}

/// The compaction locks a session holds open, folded event by event, so a store that does
/// not keep a session's events can still recover its compactions: feed it every event in seq
/// order ([`CompactionLocks::observe`]), then ask for the ends ([`CompactionLocks::closers`]).
/// Holds one entry per open lock, none once every lock is closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionLocks {
    open: Vec<Open>,
}

impl CompactionLocks {
    /// No lock open.
    pub fn new() -> CompactionLocks {
        CompactionLocks::default()
    }

    /// Folds in the next event of the session.
    pub fn observe(&mut self, event: &Event) {
        // Only compaction events and summaries are looked into.
        let data = || event.data();
        match event.event_type() {
            "compaction/start" => {
                if let Some(id) = data().get("compactionId").and_then(|c| c.as_str()) {
                    self.open.push(Open {
                        id: id.into_owned(),
                        turn: data().get("turn").map_or("null", |t| t.raw()).to_owned(),
                        replaced: false,
                    });
                }
            }
            "compaction/end" => {
                if let Some(id) = data().get("compactionId").and_then(|c| c.as_str()) {
                    self.open.retain(|o| o.id != id);
                }
            }
            "user/message"
                if matches!(event.surface_op(), Some(SurfaceOp::Replace { .. }))
                    && super::is_summary_message(data()) =>
            {
                if let Some(id) = super::summary_compaction_id(data()) {
                    self.open
                        .iter_mut()
                        .filter(|o| o.id == id)
                        .for_each(|o| o.replaced = true);
                }
            }
            _ => {}
        }
    }

    /// The open locks, in the order they were taken: each one's `compactionId`, its `turn`
    /// (JSON text) and whether its replacement is written. The session state's checkpoint
    /// stores them this way. spec: cache.md#session-state
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, &str, bool)> + '_ {
        self.open
            .iter()
            .map(|o| (o.id.as_str(), o.turn.as_str(), o.replaced))
    }

    /// Takes one more lock, as read back from a checkpoint; `false` (and nothing taken)
    /// when a lock with that id is open already, which no fold produces.
    pub(crate) fn restore(&mut self, id: &str, turn: &str, replaced: bool) -> bool {
        if self.open.iter().any(|o| o.id == id) {
            return false;
        }
        self.open.push(Open {
            id: id.to_owned(),
            turn: turn.to_owned(),
            replaced,
        });
        true
    }

    /// Whether any lock is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The `compaction/end` events that close every open lock, in lock order, with seqs
    /// from `next_seq` on and the given `time` (the last event's). Call at a cold load,
    /// never while a compaction may be running.
    pub fn closers(&self, next_seq: u64, time: i64) -> Vec<EventInput> {
        let mut seq = next_seq;
        self.open
            .iter()
            .map(|o| {
                let mut writer = ObjectWriter::new()
                    .string("compactionId", &o.id)
                    .raw("turn", &o.turn);
                if !o.replaced {
                    writer = writer.string("error", INTERRUPTED_COMPACTION);
                }
                let mut event = EventInput::new("compaction/end", time, writer.finish());
                event.seq = Some(Seq(seq));
                seq += 1;
                event
            })
            .collect()
    }
}

/// The `compaction/end` events that close every orphaned lock, in lock order, with seqs
/// from the session's next seq on and the last event's time. Call at a cold load (after
/// [`Session::repair`](crate::Session::repair)), never while a compaction may be running.
pub fn recover_compaction(session: &Session) -> Vec<EventInput> {
    let state = session.state();
    let time = state.last_event_time().unwrap_or(0);
    state
        .compaction_locks()
        .closers(state.next_seq().get(), time)
}
