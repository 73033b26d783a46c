//! Reading a record that is still in the log's write buffer serves it from the buffer: the
//! read runs no write of its own (a failed write there would poison the log for a read).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sessionlog_log::{
    Append, DirLock, Durability, Log, LogOptions, OpenMode, RealStorage, Seq, Storage, StorageFile,
};

/// The real file system, counting writes to files.
#[derive(Debug, Default)]
struct CountingStorage {
    writes: Arc<AtomicU64>,
}

#[derive(Debug)]
struct CountingFile {
    inner: Arc<dyn StorageFile>,
    writes: Arc<AtomicU64>,
}

impl StorageFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn map_readonly(&self) -> io::Result<Bytes> {
        self.inner.map_readonly()
    }
}

impl Storage for CountingStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(CountingFile {
            inner: RealStorage.open_file(path, mode)?,
            writes: self.writes.clone(),
        }))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealStorage.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealStorage.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealStorage.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealStorage.try_lock(path)
    }
}

#[test]
fn reading_records_still_in_the_buffer_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Arc::new(CountingStorage::default());
    let writes = storage.writes.clone();
    let options = LogOptions::default()
        .with_segment_size_bytes(1 << 20)
        .with_preallocate(false);
    let log = Log::open_with(storage, dir.path(), options).expect("open");
    let s = log.create_stream("s").expect("stream");
    log.commit(&[Append::new(s, 1, b"durable")], Durability::Sync)
        .expect("sync commit");
    for i in 0..20u32 {
        let payload = format!("buffered {i}");
        log.commit(
            &[Append::new(s, 1, payload.as_bytes())],
            Durability::Buffered,
        )
        .expect("buffered commit");
    }
    let before = writes.load(Ordering::SeqCst);
    // The last record, one in the middle, and a range across file and buffer.
    assert_eq!(
        &log.read(s, Seq(20)).expect("read").payload[..],
        b"buffered 19"
    );
    assert_eq!(
        &log.read(s, Seq(7)).expect("read").payload[..],
        b"buffered 6"
    );
    let all: Vec<_> = log
        .iter(s, Seq(0), Seq(21))
        .map(|r| r.expect("iter").payload)
        .collect();
    assert_eq!(all.len(), 21);
    assert_eq!(&all[0][..], b"durable");
    assert_eq!(&all[12][..], b"buffered 11");
    assert_eq!(
        writes.load(Ordering::SeqCst),
        before,
        "a read wrote to the store"
    );
    log.flush().expect("flush");
    assert!(
        writes.load(Ordering::SeqCst) > before,
        "flush writes the buffer"
    );
    assert_eq!(
        &log.read(s, Seq(20)).expect("read").payload[..],
        b"buffered 19"
    );
    log.close().expect("close");
}
