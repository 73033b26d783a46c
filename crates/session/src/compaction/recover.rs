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

use crate::error::Error;
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
        let data = event.data();
        match event.event_type() {
            "compaction/start" => {
                if let Some(id) = data.get("compactionId").and_then(|c| c.as_str()) {
                    self.open.push(Open {
                        id: id.into_owned(),
                        turn: data.get("turn").map_or("null", |t| t.raw()).to_owned(),
                        replaced: false,
                    });
                }
            }
            "compaction/end" => {
                if let Some(id) = data.get("compactionId").and_then(|c| c.as_str()) {
                    self.open.retain(|o| o.id != id);
                }
            }
            "user/message"
                if matches!(event.surface_op(), Some(SurfaceOp::Replace { .. }))
                    && super::is_summary_message(data) =>
            {
                if let Some(id) = super::summary_compaction_id(data) {
                    self.open
                        .iter_mut()
                        .filter(|o| o.id == id)
                        .for_each(|o| o.replaced = true);
                }
            }
            _ => {}
        }
    }

    /// Appends the encoding of the open locks to `out` (a store keeps it beside the state's
    /// checkpoint): 8 bytes lock count, then per lock its `compactionId` and `turn` (JSON
    /// text) as 8-byte-length-prefixed UTF-8, and 1 byte, 1 when its replacement is written.
    /// spec: cache.md#compaction-locks
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.open.len() as u64).to_le_bytes());
        for lock in &self.open {
            for text in [&lock.id, &lock.turn] {
                out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            out.push(u8::from(lock.replaced));
        }
    }

    /// Decodes what [`CompactionLocks::encode`] wrote; refuses any other bytes (never
    /// panics).
    pub fn decode(bytes: &[u8]) -> Result<CompactionLocks, Error> {
        let mut r = LockReader(bytes);
        let count = r.u64()?;
        let mut open: Vec<Open> = Vec::new();
        for _ in 0..count {
            let id = r.text()?;
            let turn = r.text()?;
            let replaced = match r.take(1)? {
                [0] => false,
                [1] => true,
                _ => return Err(LockReader::bad("a flag other than 0 or 1")),
            };
            if open.iter().any(|o| o.id == id) {
                return Err(LockReader::bad("a lock listed twice"));
            }
            open.push(Open { id, turn, replaced });
        }
        if !r.0.is_empty() {
            return Err(LockReader::bad("bytes after the locks"));
        }
        Ok(CompactionLocks { open })
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
    let mut locks = CompactionLocks::new();
    for event in session.events() {
        locks.observe(event);
    }
    let time = session.events().last().map_or(0, |e| e.time());
    locks.closers(session.next_seq().get(), time)
}

/// A bounds-checked reader of [`CompactionLocks::encode`]'s bytes.
struct LockReader<'a>(&'a [u8]);

impl<'a> LockReader<'a> {
    fn bad(detail: &str) -> Error {
        Error::Decode {
            what: "compaction locks",
            detail: detail.to_owned(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.0.len() < n {
            return Err(Self::bad("the bytes end early"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn text(&mut self) -> Result<String, Error> {
        let len = usize::try_from(self.u64()?).map_err(|_| Self::bad("a length overflows"))?;
        std::str::from_utf8(self.take(len)?)
            .map(str::to_owned)
            .map_err(|_| Self::bad("a text is not UTF-8"))
    }
}
