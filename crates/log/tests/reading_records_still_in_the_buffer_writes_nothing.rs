//! Reading a record that is still in the log's write buffer serves it from the buffer: the
//! read runs no write of its own (a failed write there would poison the log for a read).

mod common;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Hooked, Hooks};
use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

/// Counts writes to files.
#[derive(Debug, Default)]
struct CountWrites {
    writes: AtomicU64,
}

impl Hooks for CountWrites {
    fn write_all_at(&self, _offset: u64) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn reading_records_still_in_the_buffer_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Hooked::new(CountWrites::default());
    let writes = &storage.hooks.writes;
    let options = LogOptions::default()
        .with_segment_size_bytes(1 << 20)
        .with_preallocate(false);
    let log = Log::open_with(storage.clone(), dir.path(), options).expect("open");
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
