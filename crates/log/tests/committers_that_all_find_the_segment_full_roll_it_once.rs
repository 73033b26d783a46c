//! Many committers that find the active segment full at the same moment each wait for the I/O
//! in flight before the roll. The first to get the lock rolls; the others must then see the
//! room the new segment has and append into it, not seal it again with nothing in it but its
//! catalog checkpoint.

use std::sync::Arc;

use sessionlog_log::{Append, Durability, Log, LogOptions};

const SEGMENT_BYTES: u64 = 64 << 10;
const WRITERS: usize = 16;
const COMMITS: usize = 120;
const PAYLOAD_BYTES: usize = 1024;

#[test]
fn concurrent_committers_at_a_full_segment_roll_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    let log = Arc::new(Log::open(dir.path(), options).expect("open"));
    let streams: Vec<_> = (0..WRITERS)
        .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
        .collect();
    std::thread::scope(|scope| {
        for &stream in &streams {
            let log = Arc::clone(&log);
            scope.spawn(move || {
                let payload = vec![b'x'; PAYLOAD_BYTES];
                for _ in 0..COMMITS {
                    log.commit(&[Append::new(stream, 1, &payload)], Durability::Sync)
                        .expect("commit");
                }
            });
        }
    });
    let stats = log.stats();
    // A commit takes its 1 KiB payload, a 32-byte record header and a 40-byte batch frame. A
    // segment sealed because the next batch did not fit has at most 8 KiB of it unused (its
    // header, a checkpoint of 16 short names, the footer, the batch that did not fit); one
    // sealed with nothing but its checkpoint would push the count past this bound.
    let commit_bytes = (PAYLOAD_BYTES + 32 + 40) as u64;
    let commits = (WRITERS * COMMITS) as u64;
    let most = commits * commit_bytes / (SEGMENT_BYTES - (8 << 10)) + 2;
    assert_eq!(stats.records, commits);
    assert!(
        (stats.segments as u64) <= most,
        "{} segments for {commits} commits of {commit_bytes} bytes in {SEGMENT_BYTES}-byte \
         segments (at most {most} expected): segments were sealed with room left",
        stats.segments
    );
}
