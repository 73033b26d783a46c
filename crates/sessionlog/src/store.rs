//! The store: sessions on the log.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use sessionlog_log::{Append, Durability, Log, LogOptions, Seq as LogSeq, StreamId};
use sessionlog_session::{
    decode_event, decode_header, encode_event, encode_header, export_jsonl, import_jsonl, kind_tag,
    Event, EventInput, FormatVersion, ImportOptions, Session, SessionHeader,
};

use crate::error::{Error, Result};

/// Kind tag of the session header record (record 0 of a session's stream).
/// spec: events.md#session-header-record
pub const KIND_SESSION_HEADER: u8 = 0xE0;

/// Records per log batch when a whole session is written at once (import).
const IMPORT_BATCH_RECORDS: usize = 512;

/// Options for [`Store::open`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The log underneath.
    pub log: LogOptions,
    /// Vocabulary and surface rules for sessions created, appended and loaded.
    pub version: FormatVersion,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log: LogOptions::default(),
            version: FormatVersion::current(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    log: Log,
    options: StoreOptions,
    writers: Mutex<HashSet<StreamId>>,
}

/// Many sessions in one log directory. Cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// What [`Store::import_dsh`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session's name in the store.
    pub session: String,
    /// Events stored.
    pub events: u64,
    /// Whether the file had a torn tail that was not imported.
    pub tail_discarded: bool,
    /// Closers that opening the session will append (its final turn is open).
    pub closers: u64,
}

impl Store {
    /// Opens (creating if needed) the store in `dir`. Physical recovery of the log happens here.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let log = Log::open(dir, options.log.clone())?;
        Ok(Store {
            inner: Arc::new(Inner {
                log,
                options,
                writers: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// The log underneath.
    pub fn log(&self) -> &Log {
        &self.inner.log
    }

    /// Names of all sessions, sorted.
    pub fn session_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .log
            .streams()
            .into_iter()
            .map(|s| s.name)
            .collect();
        names.sort();
        names
    }

    fn stream(&self, name: &str) -> Result<StreamId> {
        self.inner
            .log
            .stream_id(name)
            .ok_or_else(|| Error::NoSuchSession(name.to_owned()))
    }

    /// Creates an empty session named `name` with `header`; the header record is durable when
    /// this returns.
    pub fn create_session(&self, name: &str, header: SessionHeader) -> Result<SessionHandle> {
        if self.inner.log.stream_id(name).is_some() {
            return Err(Error::SessionExists(name.to_owned()));
        }
        let stream = self.inner.log.create_stream(name)?;
        self.inner.log.commit(
            &[Append::new(
                stream,
                KIND_SESSION_HEADER,
                &encode_header(&header),
            )],
            Durability::Sync,
        )?;
        let session = Session::new(header, self.inner.options.version.clone());
        self.handle(name, stream, session)
    }

    fn handle(&self, name: &str, stream: StreamId, session: Session) -> Result<SessionHandle> {
        if !self.inner.writers.lock().insert(stream) {
            return Err(Error::WriterBusy(name.to_owned()));
        }
        Ok(SessionHandle {
            store: self.clone(),
            name: name.to_owned(),
            stream,
            session,
            broken: None,
        })
    }

    /// Reads a session's header and events from the log and folds them, without repair.
    pub fn load_session(&self, name: &str) -> Result<Session> {
        let stream = self.stream(name)?;
        let info = self
            .inner
            .log
            .stream_info(stream)
            .ok_or_else(|| Error::NoSuchSession(name.to_owned()))?;
        let bad = |seq: u64, detail: String| Error::BadRecord {
            session: name.to_owned(),
            seq,
            detail,
        };
        let mut records = self.inner.log.iter(stream, LogSeq(0), info.next_seq);
        let first = records
            .next()
            .ok_or_else(|| bad(0, "no header record".into()))??;
        if first.kind != KIND_SESSION_HEADER {
            return Err(bad(
                0,
                format!("record 0 has kind {:#x}, not a session header", first.kind),
            ));
        }
        let header = decode_header(&first.payload).map_err(|e| bad(0, e.to_string()))?;
        let mut events: Vec<Event> = Vec::with_capacity(info.next_seq.0.saturating_sub(1) as usize);
        for r in records {
            let r = r?;
            events.push(decode_event(&r.payload).map_err(|e| bad(r.seq.0, e.to_string()))?);
        }
        Ok(Session::from_events(
            header,
            self.inner.options.version.clone(),
            events,
        )?)
    }

    /// Opens a session for writing: loads it and, when its final turn was left open by a
    /// crash, appends the closers (durably) as new events. Returns the handle and the closers.
    pub fn open_session(&self, name: &str) -> Result<(SessionHandle, Vec<Event>)> {
        let stream = self.stream(name)?;
        let session = self.load_session(name)?;
        let mut handle = self.handle(name, stream, session)?;
        let closers = handle.session.repair_closers()?;
        let mut appended = Vec::with_capacity(closers.len());
        for closer in closers {
            appended.push(handle.append_event(closer)?.clone());
        }
        if !appended.is_empty() {
            handle.commit()?;
        }
        Ok((handle, appended))
    }

    /// Imports a DeepSeek Harness `session.jsonl` as session `name` (default: the header's id).
    /// The file is validated completely before anything is written, so a refused log leaves
    /// the store unchanged. Events are stored as they are in the file; restart repair is left
    /// to [`Store::open_session`], so exporting reproduces the file.
    pub fn import_dsh(&self, file: &[u8], name: Option<&str>) -> Result<ImportSummary> {
        let options = ImportOptions {
            repair: false,
            ..ImportOptions::default()
        };
        let imported = import_jsonl(file, &options)?;
        let session = imported.session;
        let name = name.unwrap_or(session.header().id()).to_owned();
        if self.inner.log.stream_id(&name).is_some() {
            return Err(Error::SessionExists(name));
        }
        let closers = session.repair_closers()?.len() as u64;
        let stream = self.inner.log.create_stream(&name)?;
        let header = encode_header(session.header());
        let encoded: Vec<(u8, Vec<u8>)> = session
            .events()
            .iter()
            .map(|e| (kind_tag(e), encode_event(e)))
            .collect();
        let mut batch: Vec<Append<'_>> = vec![Append::new(stream, KIND_SESSION_HEADER, &header)];
        for (kind, payload) in &encoded {
            batch.push(Append::new(stream, *kind, payload));
            if batch.len() == IMPORT_BATCH_RECORDS {
                self.inner.log.commit(&batch, Durability::Buffered)?;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            self.inner.log.commit(&batch, Durability::Buffered)?;
        }
        self.inner.log.flush()?;
        Ok(ImportSummary {
            session: name,
            events: session.events().len() as u64,
            tail_discarded: imported.tail.is_some(),
            closers,
        })
    }

    /// The session as DeepSeek Harness JSONL: header line, then the events (chunk runs packed).
    pub fn export_dsh(&self, name: &str) -> Result<Vec<u8>> {
        Ok(export_jsonl(&self.load_session(name)?))
    }

    /// The stored envelopes of a session's events from `from` on, without folding the session.
    pub fn raw_events(&self, name: &str, from: u64) -> Result<Vec<Event>> {
        let stream = self.stream(name)?;
        let info = self
            .inner
            .log
            .stream_info(stream)
            .ok_or_else(|| Error::NoSuchSession(name.to_owned()))?;
        let mut out = Vec::new();
        for r in self
            .inner
            .log
            .iter(stream, LogSeq(from.saturating_add(1)), info.next_seq)
        {
            let r = r?;
            out.push(decode_event(&r.payload).map_err(|e| Error::BadRecord {
                session: name.to_owned(),
                seq: r.seq.0,
                detail: e.to_string(),
            })?);
        }
        Ok(out)
    }

    /// Deletes a session (durably). Its records stay in their segments until reclaimed.
    pub fn delete_session(&self, name: &str) -> Result<()> {
        let stream = self.stream(name)?;
        if self.inner.writers.lock().contains(&stream) {
            return Err(Error::WriterBusy(name.to_owned()));
        }
        Ok(self.inner.log.delete_stream(stream, Durability::Sync)?)
    }

    /// Makes everything committed so far durable, then closes the log.
    pub fn close(self) -> Result<()> {
        self.inner.log.flush()?;
        Ok(())
    }
}

/// The one writer of a session. Appends are validated and folded in memory, written to the
/// log's buffer, and made durable by [`SessionHandle::commit`] (group-committed with every
/// other session of the store).
#[derive(Debug)]
pub struct SessionHandle {
    store: Store,
    name: String,
    stream: StreamId,
    session: Session,
    broken: Option<String>,
}

impl SessionHandle {
    /// The session's name in the store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The folded session: surface, derived messages, events.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Validates `input`, appends it to the session and to the log buffer. A refused event
    /// changes nothing.
    pub fn append(&mut self, input: EventInput) -> Result<&Event> {
        let seq = self.session.next_seq().get();
        let event = input.into_event(seq)?;
        self.append_event(event)
    }

    fn append_event(&mut self, event: Event) -> Result<&Event> {
        if let Some(cause) = &self.broken {
            return Err(Error::HandleBroken(cause.clone()));
        }
        let payload = encode_event(&event);
        let max = self.store.inner.options.log.max_record_bytes;
        if payload.len() > max {
            return Err(sessionlog_log::Error::RecordTooLarge {
                len: payload.len(),
                max,
            }
            .into());
        }
        let kind = kind_tag(&event);
        let seq = event.seq().get();
        // The session checks before it changes anything, so a refused event leaves it as it
        // was and nothing reaches the log. Once accepted, the record goes to the log; if
        // that fails the log is poisoned, and so is this handle.
        self.session.append_event(event)?;
        let mut record = Append::new(self.stream, kind, &payload);
        record.expected_seq = Some(LogSeq(seq + 1));
        if let Err(e) = self.store.inner.log.commit(&[record], Durability::Buffered) {
            self.broken = Some(e.to_string());
            return Err(e.into());
        }
        Ok(self.session.events().last().expect("just appended"))
    }

    /// Makes every event appended so far durable.
    pub fn commit(&self) -> Result<()> {
        Ok(self.store.inner.log.flush()?)
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.store.inner.writers.lock().remove(&self.stream);
    }
}
