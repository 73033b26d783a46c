//! The segmented multi-stream log of sessionlog.
//!
//! One log per store directory holds many streams (sessions), each a gap-free sequence of
//! records. Records are framed into checksummed, atomic batches in segment files of bounded
//! size; commits from many threads share writes and `fdatasync`s (group commit); sealed
//! segments carry a footer with a sparse index so opening reads footers, not data; recovery
//! cuts only a torn, never-acknowledged tail and reports anything else as corruption. All file
//! I/O goes through [`Storage`], so tests can simulate power loss. The byte layout is
//! specified in `format-spec/`.

mod background;
mod block_cursor;
mod clean;
mod compress;
mod error;
mod ids;
mod index;
mod log;
mod mmap;
mod open;
mod options;
pub mod read;
mod reclaim;
pub mod recovery;
mod rewrite;
mod segment;
mod snapshot;
mod state;
pub mod storage;
pub mod verify;
mod wake;
mod writer;

pub use background::{BackgroundReclaim, BackgroundReport, DEFAULT_WORK_SHARE};
pub use compress::logical_image;
pub use error::{Error, Result};
pub use ids::{Lsn, SegmentId, Seq, StreamId};
pub use log::{Append, Log, Receipt, Record, RecoveryReport, Stats, StreamInfo};
pub use open::{classify_dir, StoreDir, LOCK_FILE};
pub use options::{Access, Compression, Durability, LogOptions, RecoveryMode};
pub use read::RecordIter;
pub use reclaim::{ReclaimReport, RECLAIM_STAGING_THREADS};
pub use segment::TailCut;
pub use sessionlog_format::{encoded_batch_len, ErrorClass};
pub use storage::{DirLock, OpenMode, RealStorage, Storage, StorageFile};
pub use verify::{verify_store, Damage, SegmentCheck, VerifyReport};
