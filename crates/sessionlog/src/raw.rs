//! Raw streams: opaque payloads in a namespace of their own, beside the sessions.
//!
//! A raw stream is a log stream whose catalog name is [`RAW_STREAM_PREFIX`] followed by the
//! name its user gave it. The prefix starts with NUL, which makes it a name reserved for the
//! store: no session can take it and no listing of sessions shows it, so no raw write can
//! reach a session. Raw records take the kind tag [`KIND_RAW_RECORD`].
//! spec: events.md#raw-streams
//!
//! The log underneath is handed out only as a [`LogReader`]: reading any stream is
//! harmless, writing one is not, so every write goes through a session handle or the raw
//! methods here.

use std::path::Path;

use sessionlog_log::{
    Append, Durability, Lsn, Receipt, Record, RecordIter, RecoveryReport, Seq as LogSeq, Stats,
    StreamId, StreamInfo,
};

use crate::error::{Error, Result};
use crate::store::{Store, KIND_SESSION_HEADER};

/// The catalog-name prefix of raw streams. It starts with a NUL character, which makes it a
/// reserved store name (spec: events.md#creating-and-importing-a-session) and which no name
/// typed on a command line can hold, so stores written before raw streams had a namespace
/// keep every session they hold.
/// spec: events.md#raw-streams
pub const RAW_STREAM_PREFIX: &str = "\u{0}raw/";

/// Kind tag of a raw stream's records. spec: events.md#raw-streams
pub const KIND_RAW_RECORD: u8 = 0xE1;

/// The catalog name of the raw stream `name`.
fn catalog_name(name: &str) -> String {
    format!("{RAW_STREAM_PREFIX}{name}")
}

/// Read-only access to the log under a [`Store`]: every stream can be read, none written.
#[derive(Debug, Clone, Copy)]
pub struct LogReader<'a> {
    store: &'a Store,
}

impl LogReader<'_> {
    /// Whether the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.store.log().is_read_only()
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Stats {
        self.store.log().stats()
    }

    /// What opening the store found and did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.store.log().recovery_report()
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        self.store.log().dir()
    }

    /// The store's identity.
    pub fn store_id(&self) -> [u8; 16] {
        self.store.log().store_id()
    }

    /// Log position up to which everything is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.store.log().durable_lsn()
    }

    /// Every live stream (sessions and raw streams) by id, with catalog names.
    pub fn streams(&self) -> Vec<StreamInfo> {
        self.store.log().streams()
    }

    /// The stream whose catalog name is `name`.
    pub fn stream_id(&self, name: &str) -> Option<StreamId> {
        self.store.log().stream_id(name)
    }

    /// The record `seq` of `stream`, verified against its checksum (in a compressed segment,
    /// with its block: spec: segment.md#reading-a-compressed-block).
    pub fn read(&self, stream: StreamId, seq: LogSeq) -> Result<Record> {
        Ok(self.store.log().read(stream, seq)?)
    }

    /// The records of `stream` with seqs in `from..to`, in order.
    pub fn iter(&self, stream: StreamId, from: LogSeq, to: LogSeq) -> RecordIter {
        self.store.log().iter(stream, from, to)
    }
}

impl Store {
    /// Read-only access to the log underneath. Writes go through session handles or the
    /// raw-stream methods, which cannot reach a session.
    pub fn log_reader(&self) -> LogReader<'_> {
        LogReader { store: self }
    }

    /// Whether a live session (or a stream written before raw streams had a namespace) is
    /// named `name`.
    fn plain_stream(&self, name: &str) -> Option<StreamId> {
        self.log().stream_id(name)
    }

    /// The raw stream `name` in the raw namespace, when there is one.
    fn namespaced_stream(&self, name: &str) -> Option<StreamId> {
        self.log().stream_id(&catalog_name(name))
    }

    /// The raw stream `name` for appending, created (durably, with the next append) if
    /// missing. Refused when `name` is a session's name, so a raw write is never mistaken
    /// for one to the session.
    pub fn raw_stream(&self, name: &str) -> Result<RawStream> {
        if self.plain_stream(name).is_some() {
            return Err(Error::RawNameIsSession(name.to_owned()));
        }
        let stream = match self.namespaced_stream(name) {
            Some(id) => id,
            None => self.log().create_stream(&catalog_name(name))?,
        };
        Ok(RawStream {
            store: self.clone(),
            stream,
        })
    }

    /// The records of the raw stream `name` with seqs in `from..to`. A stream written under
    /// the plain name `name` before raw streams had a namespace is read too, unless it is a
    /// session (its record 0 is a session header), which is refused.
    pub fn raw_read(&self, name: &str, from: u64, to: u64) -> Result<RecordIter> {
        let log = self.log();
        if let Some(id) = self.namespaced_stream(name) {
            return Ok(log.iter(id, LogSeq(from), LogSeq(to)));
        }
        match self.plain_stream(name) {
            Some(id) => {
                let first = log.read(id, LogSeq(0));
                if first.is_ok_and(|r| r.kind == KIND_SESSION_HEADER) {
                    return Err(Error::RawNameIsSession(name.to_owned()));
                }
                Ok(log.iter(id, LogSeq(from), LogSeq(to)))
            }
            None => Err(Error::NoSuchRawStream(name.to_owned())),
        }
    }

    /// Deletes the raw stream `name` durably: its name is free at once (a later append
    /// starts a new stream at seq 0), and [`Store::reclaim`] gives its records' space back.
    /// Returns whether there was such a stream. Only the raw namespace is touched: a stream
    /// under the plain name `name` (a session, or a raw stream written before the namespace
    /// existed) stays.
    pub fn delete_raw_stream(&self, name: &str) -> Result<bool> {
        let Some(id) = self.namespaced_stream(name) else {
            return Ok(false);
        };
        self.log().delete_stream(id, Durability::Sync)?;
        Ok(true)
    }

    /// Names of the raw streams (without the namespace prefix), sorted.
    pub fn raw_stream_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .log()
            .streams()
            .into_iter()
            .filter_map(|s| s.name.strip_prefix(RAW_STREAM_PREFIX).map(str::to_owned))
            .collect();
        names.sort();
        names
    }
}

/// A raw stream open for appending (see [`Store::raw_stream`]).
#[derive(Debug, Clone)]
pub struct RawStream {
    store: Store,
    stream: StreamId,
}

impl RawStream {
    /// Appends `payloads` as one atomic batch; the receipt holds each payload's seq.
    pub fn append(&self, payloads: &[&[u8]], durability: Durability) -> Result<Receipt> {
        let batch: Vec<Append<'_>> = payloads
            .iter()
            .map(|p| Append::new(self.stream, KIND_RAW_RECORD, p))
            .collect();
        Ok(self.store.log().commit(&batch, durability)?)
    }
}
