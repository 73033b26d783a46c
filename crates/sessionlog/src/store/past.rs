//! Reading a session's earlier events back from the log, for the rules that look back and
//! for compaction, so that writers and views keep a session's state without its events.

use std::borrow::Cow;
use std::collections::VecDeque;

use parking_lot::Mutex;
use sessionlog_log::{Log, Seq as LogSeq, StreamId};
use sessionlog_session::{
    decode_stored_event, upgrade_event, Error as SessionError, Event, LookBack, Seq,
};

/// Events read back most recently, kept for the next look-back: a rule usually looks at a
/// node it or the previous event just read.
const RECENT_EVENTS: usize = 8;

/// Reads event `seq` of one session from its log record `seq + 1` (through the sparse index
/// and the mapped segments), upgraded as loading upgrades it, with a small cache of the
/// events read last. Holds no event otherwise.
#[derive(Debug)]
pub(crate) struct LogPast {
    log: Log,
    stream: StreamId,
    session_id: String,
    recent: Mutex<VecDeque<Event>>,
}

impl LogPast {
    pub(crate) fn new(log: Log, stream: StreamId, session_id: &str) -> LogPast {
        LogPast {
            log,
            stream,
            session_id: session_id.to_owned(),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_EVENTS)),
        }
    }

    fn read(&self, seq: Seq) -> Result<Option<Event>, SessionError> {
        let log_seq = seq.get().saturating_add(1);
        let next = self
            .log
            .stream_info(self.stream)
            .map_or(0, |i| i.next_seq.0);
        if log_seq >= next {
            return Ok(None);
        }
        let record =
            self.log
                .read(self.stream, LogSeq(log_seq))
                .map_err(|e| SessionError::LookBack {
                    seq,
                    detail: e.to_string(),
                    class: e.class(),
                })?;
        let mut event = decode_stored_event(&record.payload)?;
        if event.seq() != seq {
            return Err(SessionError::LookBack {
                seq,
                detail: format!(
                    "its record holds event {}; run `sessionlog verify` on the store",
                    event.seq().get()
                ),
                class: sessionlog_session::ErrorClass::Damaged,
            });
        }
        upgrade_event(&mut event, self, &self.session_id)?;
        Ok(Some(event))
    }
}

impl LookBack for LogPast {
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, SessionError> {
        if let Some(hit) = self.recent.lock().iter().find(|e| e.seq() == seq) {
            return Ok(Some(Cow::Owned(hit.clone())));
        }
        let Some(event) = self.read(seq)? else {
            return Ok(None);
        };
        let mut recent = self.recent.lock();
        if recent.len() == RECENT_EVENTS {
            recent.pop_front();
        }
        recent.push_back(event.clone());
        Ok(Some(Cow::Owned(event)))
    }
}
