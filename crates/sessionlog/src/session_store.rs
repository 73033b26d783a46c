//! [`SessionStore`] for the engine: sessions on the log, written with the layout
//! [`Store`] uses (record 0 the header, record `k + 1` event `k`, kind tag per event).
//!
//! Appends go to the log's buffer as one atomic batch whose records carry the log seq they
//! must get, so a writer racing through [`Store`]'s own handles is refused by the log itself;
//! [`SessionStore::commit`] is the log's group-committed flush, so concurrent sessions share
//! `fdatasync`s.
//!
//! Validation needs the session's [`SessionState`] (never its events: a rule that looks
//! back reads the earlier event from the log); the [`Store`] keeps it per session (dropped
//! with the store) and it proves itself against the log before every use (same stream, same
//! record count), otherwise it is folded again.

use sessionlog_log::{Append, Durability, Seq as LogSeq, StreamId};
use sessionlog_session::store_trait::{append_validated_to_state, check_name};
use sessionlog_session::{
    decode_event, decode_header, encode_event, kind_tag, Event, NewEvent, SessionHeader,
    SessionState, SessionStore, StoreError, StoreResult,
};

use crate::error::Error;
use crate::store::{LogPast, Store, KIND_SESSION_HEADER};

/// Idle sessions kept folded per store.
pub(crate) const CACHE_SESSIONS: usize = 4096;

/// A session's state for validating appends, the stream it was folded from, and the
/// reader of its earlier events.
#[derive(Debug)]
pub(crate) struct Open {
    stream: StreamId,
    state: SessionState,
    past: LogPast,
}

/// Maps the facade's errors onto the trait's.
fn store_error(name: &str, e: Error) -> StoreError {
    match e {
        Error::NoSuchSession(_) => StoreError::NoSuchSession(name.to_owned()),
        Error::SessionExists(_) => StoreError::Exists(name.to_owned()),
        Error::Session(e) => StoreError::Corrupt {
            session: name.to_owned(),
            detail: e.to_string(),
        },
        Error::BadRecord { .. } => StoreError::Corrupt {
            session: name.to_owned(),
            detail: e.to_string(),
        },
        Error::Log(e) => log_error(name, e),
        Error::BadName { name, reason } => StoreError::BadName { name, reason },
        e => StoreError::classified(e.class(), e),
    }
}

fn log_error(name: &str, e: sessionlog_log::Error) -> StoreError {
    match e {
        sessionlog_log::Error::UnknownStream(_) => StoreError::NoSuchSession(name.to_owned()),
        sessionlog_log::Error::StreamExists(_) => StoreError::Exists(name.to_owned()),
        sessionlog_log::Error::SeqMismatch {
            expected, actual, ..
        } => StoreError::StaleWriter {
            session: name.to_owned(),
            expected: expected.0.saturating_sub(1),
            actual: actual.0.saturating_sub(1),
        },
        e => StoreError::classified(e.class(), e),
    }
}

/// Stream and record count (header included) of a live session.
fn stream_of(store: &Store, name: &str) -> StoreResult<(StreamId, u64)> {
    let log = store.log();
    log.stream_id(name)
        .and_then(|id| log.stream_info(id))
        .map(|info| (info.id, info.next_seq.0))
        .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))
}

fn load(store: &Store, name: &str) -> StoreResult<Open> {
    let (stream, _) = stream_of(store, name)?;
    let state = store
        .session_state(name)
        .map_err(|e| store_error(name, e))?;
    let past = LogPast::new(store.log().clone(), stream, state.header().id());
    Ok(Open {
        stream,
        state,
        past,
    })
}

/// Writes `events` to the log buffer as one atomic batch.
fn write_batch(store: &Store, name: &str, stream: StreamId, events: &[Event]) -> StoreResult<()> {
    let encoded: Vec<(u8, u64, Vec<u8>)> = events
        .iter()
        .map(|e| (kind_tag(e), e.seq().get() + 1, encode_event(e)))
        .collect();
    let batch: Vec<Append<'_>> = encoded
        .iter()
        .map(|(kind, log_seq, payload)| {
            let mut record = Append::new(stream, *kind, payload);
            record.expected_seq = Some(LogSeq(*log_seq));
            record
        })
        .collect();
    store
        .log()
        .commit(&batch, Durability::Buffered)
        .map(drop)
        .map_err(|e| log_error(name, e))
}

impl SessionStore for Store {
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()> {
        check_name(name)?;
        self.trait_sessions().with_slot(name, |entry| {
            let handle = self
                .create_session(name, header.clone())
                .map_err(|e| store_error(name, e))?;
            let state = handle.state().clone();
            drop(handle);
            let (stream, _) = stream_of(self, name)?;
            let past = LogPast::new(self.log().clone(), stream, state.header().id());
            **entry = Some(Open {
                stream,
                state,
                past,
            });
            Ok(())
        })
    }

    fn append(&self, name: &str, events: &[NewEvent<'_>], expected: u64) -> StoreResult<u64> {
        self.trait_sessions().with(
            name,
            || load(self, name),
            |entry| {
                let (stream, records) = stream_of(self, name)?;
                // The cache must match the log: another writer (a `SessionHandle`, a delete
                // and re-create) may have changed the session behind it.
                let fresh = entry.as_ref().is_some_and(|open| {
                    open.stream == stream && open.state.next_seq().get() + 1 == records
                });
                if !fresh {
                    **entry = Some(load(self, name)?);
                }
                let Some(open) = entry.as_mut() else {
                    return Err(StoreError::NoSuchSession(name.to_owned()));
                };
                let appended =
                    append_validated_to_state(name, &mut open.state, &open.past, events, expected)?;
                if appended.is_empty() {
                    return Ok(open.state.next_seq().get());
                }
                if let Err(e) = write_batch(self, name, open.stream, &appended) {
                    // The state ran ahead of the log: forget it.
                    **entry = None;
                    return Err(e);
                }
                Ok(open.state.next_seq().get())
            },
        )
    }

    fn commit(&self, name: &str) -> StoreResult<()> {
        stream_of(self, name)?;
        self.log().flush().map_err(|e| log_error(name, e))
    }

    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        let (stream, records) = stream_of(self, name)?;
        let first = from.saturating_add(1);
        let end = first
            .saturating_add(u64::try_from(limit).unwrap_or(u64::MAX))
            .min(records);
        let mut out = Vec::with_capacity(end.saturating_sub(first) as usize);
        if first >= end {
            return Ok(out);
        }
        for record in self.log().iter(stream, LogSeq(first), LogSeq(end)) {
            let record = record.map_err(|e| log_error(name, e))?;
            out.push(
                decode_event(&record.payload).map_err(|e| StoreError::Corrupt {
                    session: name.to_owned(),
                    detail: format!("record {}: {e}", record.seq.0),
                })?,
            );
        }
        Ok(out)
    }

    fn load_header(&self, name: &str) -> StoreResult<SessionHeader> {
        let (stream, _) = stream_of(self, name)?;
        let record = self
            .log()
            .read(stream, LogSeq(0))
            .map_err(|e| log_error(name, e))?;
        let corrupt = |detail: String| StoreError::Corrupt {
            session: name.to_owned(),
            detail,
        };
        if record.kind != KIND_SESSION_HEADER {
            return Err(corrupt(format!(
                "record 0 has kind {:#x}, not a session header",
                record.kind
            )));
        }
        decode_header(&record.payload).map_err(|e| corrupt(e.to_string()))
    }

    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        let (_, records) = stream_of(self, name)?;
        Ok(records.saturating_sub(1))
    }

    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        Ok(self
            .list_sessions(after, None, limit)
            .into_iter()
            .map(|s| s.name)
            .collect())
    }

    fn delete(&self, name: &str) -> StoreResult<()> {
        self.trait_sessions().with_slot(name, |entry| {
            **entry = None;
            self.delete_session(name).map_err(|e| store_error(name, e))
        })
    }
}
