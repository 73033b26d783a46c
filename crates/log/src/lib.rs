//! The segmented multi-stream log of sessionlog.

mod mmap;
pub mod storage;

pub use storage::{DirLock, OpenMode, RealStorage, Storage, StorageFile};
