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

use crate::event::{EventInput, SurfaceOp};
use crate::json::ObjectWriter;
use crate::session::Session;

/// The `error` text of an end written for an interrupted compaction.
pub const INTERRUPTED_COMPACTION: &str =
    "compaction interrupted before its replacement was written; the surface is unchanged";

struct Open {
    id: String,
    turn: String,
    replaced: bool,
}

/// The `compaction/end` events that close every orphaned lock, in lock order, with seqs
/// from the session's next seq on and the last event's time. Call at a cold load (after
/// [`Session::repair`](crate::Session::repair)), never while a compaction may be running.
pub fn recover_compaction(session: &Session) -> Vec<EventInput> {
    let mut open: Vec<Open> = Vec::new();
    for event in session.events() {
        let data = event.data();
        match event.event_type() {
            "compaction/start" => {
                if let Some(id) = data.get("compactionId").and_then(|c| c.as_str()) {
                    open.push(Open {
                        id: id.into_owned(),
                        turn: data.get("turn").map_or("null", |t| t.raw()).to_owned(),
                        replaced: false,
                    });
                }
            }
            "compaction/end" => {
                if let Some(id) = data.get("compactionId").and_then(|c| c.as_str()) {
                    open.retain(|o| o.id != id);
                }
            }
            "user/message"
                if matches!(event.surface_op(), Some(SurfaceOp::Replace { .. }))
                    && super::is_summary_message(data) =>
            {
                if let Some(id) = super::summary_compaction_id(data) {
                    open.iter_mut()
                        .filter(|o| o.id == id)
                        .for_each(|o| o.replaced = true);
                }
            }
            _ => {}
        }
    }
    let time = session.events().last().map_or(0, |e| e.time());
    let mut seq = session.next_seq().get();
    open.into_iter()
        .map(|o| {
            let mut writer = ObjectWriter::new()
                .string("compactionId", &o.id)
                .raw("turn", &o.turn);
            if !o.replaced {
                writer = writer.string("error", INTERRUPTED_COMPACTION);
            }
            let mut event = EventInput::new("compaction/end", time, writer.finish());
            event.seq = Some(seq);
            seq += 1;
            event
        })
        .collect()
}
