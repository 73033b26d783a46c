//! The log's error type.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use sessionlog_format::{ErrorClass, FormatError};

use crate::ids::{SegmentId, Seq, StreamId};

/// Everything that can go wrong in the log. Each variant says what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What the log was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Bytes on disk fail verification somewhere the recovery mode does not allow cutting.
    #[error("corruption in segment {segment} at offset {offset}: {detail}; run `sessionlog verify` for a report of every damaged place")]
    Corrupted {
        /// The damaged segment.
        segment: SegmentId,
        /// Byte offset of the damage in the segment.
        offset: u64,
        /// What is wrong.
        detail: String,
        /// The codec's finding, when a decoder failed.
        #[source]
        format: Option<FormatError>,
    },
    /// Another process (or another `Log` in this one) has the store open.
    #[error("store {} is already open for writing, by another process or another open store in this one; close it there first", dir.display())]
    Locked {
        /// The store directory.
        dir: PathBuf,
    },
    /// An earlier write or sync failed, so what is on disk is uncertain; every later call
    /// fails until the store is reopened (which recovers from what is durable).
    #[error("the log is poisoned by an earlier failure ({cause}); reopen the store to recover")]
    Poisoned {
        /// The first failure.
        cause: Arc<str>,
    },
    /// The directory holds no store (no segment file); nothing was created in it.
    #[error("not a store directory: {} ({why})", dir.display())]
    NotAStore {
        /// The directory.
        dir: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// A write was asked of a log opened read-only.
    #[error("store {} is open read-only; open it for writing to change it", dir.display())]
    ReadOnly {
        /// The store directory.
        dir: PathBuf,
    },
    /// The log was closed.
    #[error("the log is closed")]
    Closed,
    /// A payload is larger than `max_record_bytes`.
    #[error("record of {len} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// The payload's size.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// No live stream has this id or name.
    #[error("no stream {0}")]
    UnknownStream(String),
    /// A stream name is already bound.
    #[error("a stream named {0:?} already exists")]
    StreamExists(String),
    /// A writer expected a different next seq: another writer appended first.
    #[error("stream {stream}: expected next seq {expected}, but it is {actual}")]
    SeqMismatch {
        /// The stream.
        stream: StreamId,
        /// What the writer expected.
        expected: Seq,
        /// What the next seq is.
        actual: Seq,
    },
    /// The stream has no record with this seq (it is at or past the end).
    #[error("stream {stream} has no record {seq}")]
    NoSuchRecord {
        /// The stream.
        stream: StreamId,
        /// The seq asked for.
        seq: Seq,
    },
    /// Options that cannot work.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// A record, stream name or batch breaks a rule of the log.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl Error {
    /// The class of this error ([`ErrorClass`]), the same for the same cause on every path
    /// (the command-line tool derives its exit code from it).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::RecordTooLarge { .. }
            | Error::StreamExists(_)
            | Error::SeqMismatch { .. }
            | Error::InvalidInput(_) => ErrorClass::Refused,
            Error::UnknownStream(_) | Error::NoSuchRecord { .. } | Error::NotAStore { .. } => {
                ErrorClass::NotFound
            }
            Error::Locked { .. } => ErrorClass::Busy,
            Error::Corrupted {
                format: Some(format),
                ..
            } => format.class(),
            Error::Corrupted { .. } => ErrorClass::Damaged,
            Error::Io { .. }
            | Error::Poisoned { .. }
            | Error::Closed
            | Error::ReadOnly { .. }
            | Error::InvalidOptions(_) => ErrorClass::Environment,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { op, path, source }
}

pub(crate) fn corrupted(
    segment: SegmentId,
    offset: u64,
    detail: impl Into<String>,
    format: Option<FormatError>,
) -> Error {
    Error::Corrupted {
        segment,
        offset,
        detail: detail.into(),
        format,
    }
}
