//! Making sessions: creation and DSH import, each one atomic unit in the log.
//!
//! A session exists once its stream holds its header record. Creation writes the catalog
//! create and the header in one batch. Import writes the whole session in one batch when it
//! fits; otherwise it writes the stream under a staging name nobody looks up and publishes it
//! with one catalog rename, its last record. Either way a crash leaves the session whole or
//! absent, and its name free when absent. spec: events.md#creating-and-importing-a-session

use std::sync::atomic::{AtomicU64, Ordering};

use sessionlog_log::{Append, Durability, Log, StreamId};
use sessionlog_session::{
    encode_event, encode_header, import_jsonl, kind_tag, DshImport, ImportOptions, SessionHeader,
    SessionState,
};

use super::{ImportSummary, SessionHandle, Store, KIND_SESSION_HEADER};
use crate::error::{Error, Result};

/// Names starting with this byte are the store's own (staging names); no session has one.
const RESERVED_NAME_START: char = '\0';

/// Prefix of the names imports write under until they are complete.
const STAGING_PREFIX: &str = "\0staging/";

/// A catalog create's payload is the stream id (these bytes) and the name.
/// spec: segment.md#streams-and-the-catalog
const CATALOG_ID_BYTES: usize = 8;

/// Whether `name` is a store-internal name that no session may take.
/// Parses and validates a DeepSeek Harness `session.jsonl` the way [`Store::import_dsh`]
/// does (no restart repair: that is left to opening the session), without any store.
pub fn parse_dsh(file: &[u8]) -> Result<DshImport> {
    Ok(import_jsonl(
        file,
        &ImportOptions::default().with_repair(false),
    )?)
}

pub(crate) fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_NAME_START)
}

fn refuse_reserved(name: &str) -> Result<()> {
    if is_reserved(name) {
        return Err(Error::BadName {
            name: name.escape_debug().take(80).collect(),
            reason: "names starting with a NUL byte are reserved for the store".into(),
        });
    }
    Ok(())
}

/// A staging name no other import of this process or of an earlier run uses: a leftover of
/// an earlier run is deleted when the store opens for writing, before any import starts.
fn staging_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{STAGING_PREFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The log's "name taken" as the store's.
fn exists_as_session(e: sessionlog_log::Error) -> Error {
    match e {
        sessionlog_log::Error::StreamExists(name) => Error::SessionExists(name),
        e => Error::Log(e),
    }
}

impl Store {
    /// Creates an empty session named `name` with `header`. The catalog entry and the header
    /// record are one batch, durable when this returns: after a crash the session exists with
    /// its header, or its name is free.
    pub fn create_session(&self, name: &str, header: SessionHeader) -> Result<SessionHandle> {
        refuse_reserved(name)?;
        self.free_headerless_name(name)?;
        let header_record = encode_header(&header);
        let (stream, _) = self
            .inner
            .log
            .create_stream_with(
                name,
                &[(KIND_SESSION_HEADER, &header_record[..])],
                Durability::Sync,
            )
            .map_err(exists_as_session)?;
        let state = SessionState::with_tokens(
            header,
            self.inner.options.version.clone(),
            self.inner.options.token_counter.clone(),
        );
        self.handle(name, stream, state, super::CacheUse::Disabled)
    }

    /// Imports a DeepSeek Harness `session.jsonl` as session `name` (default: the header's id).
    /// The file is validated completely before anything is written, so a refused log leaves
    /// the store unchanged; the session then lands as one atomic unit (durable when this
    /// returns), so a crash leaves it whole or absent. Events are stored as they are in the
    /// file; restart repair is left to [`Store::open_session`], so exporting reproduces the
    /// file.
    pub fn import_dsh(&self, file: &[u8], name: Option<&str>) -> Result<ImportSummary> {
        self.import_parsed(parse_dsh(file)?, name)
    }

    /// Stores a file already validated by [`parse_dsh`] as session `name` (default: the
    /// header's id), as [`Store::import_dsh`] does; lets a caller refuse a bad file before it
    /// opens (or creates) a store, without parsing it twice.
    pub fn import_parsed(&self, imported: DshImport, name: Option<&str>) -> Result<ImportSummary> {
        let session = imported.session;
        let name = name.unwrap_or(session.header().id()).to_owned();
        refuse_reserved(&name)?;
        self.free_headerless_name(&name)?;
        if self.inner.log.stream_id(&name).is_some() {
            return Err(Error::SessionExists(name));
        }
        let closers = session.repair_closers()?.len() as u64;
        let header = encode_header(session.header());
        let encoded: Vec<(u8, Vec<u8>)> = session
            .events()
            .iter()
            .map(|e| (kind_tag(e), encode_event(e)))
            .collect();
        let records: Vec<(u8, &[u8])> = std::iter::once((KIND_SESSION_HEADER, &header[..]))
            .chain(encoded.iter().map(|(kind, payload)| (*kind, &payload[..])))
            .collect();
        let limit = self.inner.log.max_batch_bytes();
        let create_bytes = CATALOG_ID_BYTES + name.len();
        if batch_fits(create_bytes, &records, limit) == records.len() {
            self.inner
                .log
                .create_stream_with(&name, &records, Durability::Sync)
                .map_err(exists_as_session)?;
        } else {
            self.import_staged(&name, &records, limit)?;
        }
        Ok(ImportSummary {
            session: name,
            events: session.events().len() as u64,
            tail_discarded: imported.tail.is_some(),
            closers,
        })
    }

    /// Writes `records` (header first) under a staging name in as many batches as they need,
    /// then renames the stream to `name`: the rename is the only record that makes the session
    /// visible, and it follows every batch of it in the log.
    fn import_staged(&self, name: &str, records: &[(u8, &[u8])], limit: usize) -> Result<()> {
        let log = &self.inner.log;
        let staging = staging_name();
        let first = batch_fits(CATALOG_ID_BYTES + staging.len(), records, limit).max(1);
        let (stream, _) =
            log.create_stream_with(&staging, &records[..first], Durability::Buffered)?;
        let written = self.write_rest(stream, &records[first..], limit);
        let published = written.and_then(|()| {
            log.rename_stream(stream, name, Durability::Sync)
                .map_err(exists_as_session)
        });
        if published.is_err() {
            // Best effort: a log that failed is poisoned and refuses this too; the next open
            // for writing deletes the leftover instead.
            let _ = log.delete_stream(stream, Durability::Buffered);
        }
        published
    }

    fn write_rest(&self, stream: StreamId, mut rest: &[(u8, &[u8])], limit: usize) -> Result<()> {
        while !rest.is_empty() {
            let n = batch_fits(0, rest, limit).max(1);
            let batch: Vec<Append<'_>> = rest[..n]
                .iter()
                .map(|(kind, payload)| Append::new(stream, *kind, payload))
                .collect();
            self.inner.log.commit(&batch, Durability::Buffered)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// A name bound to a stream without records is not a session: a create cut short by a
    /// crash in a build that wrote the catalog entry and the header as two batches. Creating
    /// a session of that name deletes the stream first, so no name stays stuck.
    fn free_headerless_name(&self, name: &str) -> Result<()> {
        let log = &self.inner.log;
        if let Some(stream) = log.stream_id(name) {
            if log.stream_info(stream).is_some_and(|i| i.next_seq.0 == 0) {
                log.delete_stream(stream, Durability::Sync)?;
            }
        }
        Ok(())
    }
}

/// Deletes the streams that imports cut short by a crash left under staging names; called by
/// an open for writing. Returns how many there were.
pub(crate) fn discard_staged_imports(log: &Log) -> Result<usize> {
    // Staging names sort together after their prefix (which itself names no stream), so
    // the walk starts there and stops at the first other name: it lists neither raw streams
    // nor sessions.
    let mut staged: Vec<StreamId> = Vec::new();
    let mut cursor = STAGING_PREFIX.to_owned();
    'pages: loop {
        let page = log.streams_page(Some(&cursor), 64);
        let Some(last) = page.last() else { break };
        cursor = last.name.clone();
        for s in page {
            if !s.name.starts_with(STAGING_PREFIX) {
                break 'pages;
            }
            staged.push(s.id);
        }
    }
    for &stream in &staged {
        log.delete_stream(stream, Durability::Buffered)?;
    }
    if !staged.is_empty() {
        log.flush()?;
    }
    Ok(staged.len())
}

/// How many of `records`, from the first, fit in one batch of at most `limit` encoded bytes
/// together with a catalog create of `create_bytes` payload bytes (0: no create).
fn batch_fits(create_bytes: usize, records: &[(u8, &[u8])], limit: usize) -> usize {
    let empty = sessionlog_log::encoded_batch_len([]);
    let mut used = if create_bytes > 0 {
        sessionlog_log::encoded_batch_len([create_bytes])
    } else {
        empty
    };
    let per_record = |len: usize| sessionlog_log::encoded_batch_len([len]) - empty;
    let mut n = 0;
    for (_, payload) in records {
        used += per_record(payload.len());
        if used > limit {
            break;
        }
        n += 1;
    }
    n
}
