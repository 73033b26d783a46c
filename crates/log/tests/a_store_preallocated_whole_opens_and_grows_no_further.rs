//! A store whose active segment was reserved whole up front (what every build did before
//! preallocation grew with the data) opens with the default options, reads back, keeps
//! appending into the reservation it has, and seals and rolls as before.

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

const SEGMENT_BYTES: u64 = 256 << 10;

fn read_all(log: &Log, name: &str) -> Vec<Vec<u8>> {
    let id = log.stream_id(name).expect("stream");
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

#[test]
fn a_wholly_preallocated_segment_opens_and_keeps_appending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = LogOptions::default()
        .with_segment_size_bytes(SEGMENT_BYTES)
        .with_first_preallocation_bytes(SEGMENT_BYTES);
    let mut written = Vec::new();
    {
        let log = Log::open(dir.path(), whole).expect("open");
        let s = log.create_stream("s").expect("create");
        for i in 0..10u32 {
            let p = format!("before {i}").into_bytes();
            log.commit(&[Append::new(s, 1, &p)], Durability::Sync)
                .expect("commit");
            written.push(p);
        }
        // No close: the next open finds the active segment as a crash leaves it.
    }
    let segment = dir.path().join("00000000000000000001.seg");
    assert_eq!(
        std::fs::metadata(&segment).expect("segment").len(),
        SEGMENT_BYTES,
        "the segment was reserved whole"
    );
    let options = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    let log = Log::open(dir.path(), options.clone()).expect("reopen");
    assert_eq!(read_all(&log, "s"), written);
    let s = log.stream_id("s").expect("stream");
    let payload = vec![9u8; 4000];
    // Enough to fill the first segment and roll into a second.
    for _ in 0..100 {
        log.commit(&[Append::new(s, 1, &payload)], Durability::Sync)
            .expect("commit");
        written.push(payload.clone());
    }
    assert!(log.stats().segments >= 2, "the log rolled");
    log.close().expect("close");
    let log = Log::open(dir.path(), options).expect("reopen after close");
    assert_eq!(read_all(&log, "s"), written);
    log.close().expect("close");
}
