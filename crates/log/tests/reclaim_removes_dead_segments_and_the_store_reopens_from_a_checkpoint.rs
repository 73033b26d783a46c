//! Reclaim removes the sealed segments that hold only catalog records and records of deleted
//! streams, lowest first, and only up to a segment that starts with a catalog checkpoint; the
//! store then reopens from that checkpoint with every live record, every name and no reused
//! id. A record read from a removed segment before the removal stays readable.

use sessionlog_log::verify::verify_store;
use sessionlog_log::{Append, Durability, Log, LogOptions, RealStorage, Seq, StreamId};

const SEGMENT_BYTES: u64 = 64 << 10;

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES)
}

fn payload(stream: &str, i: u32) -> Vec<u8> {
    let mut p = format!("{stream} {i};").into_bytes();
    p.resize(3000, b'x');
    p
}

fn append(log: &Log, stream: StreamId, name: &str, count: u32) {
    for i in 0..count {
        log.commit(
            &[Append::new(stream, 1, &payload(name, i))],
            Durability::Buffered,
        )
        .expect("commit");
    }
}

fn read_all(log: &Log, name: &str) -> Vec<Vec<u8>> {
    let id = log.stream_id(name).expect("stream");
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    names
}

#[test]
fn dead_segments_are_removed_and_the_store_reopens_from_a_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let kept = log.create_stream("kept").expect("create");
    // Two short-lived streams fill the first segments; "kept" only starts after them.
    let doomed: Vec<StreamId> = ["doomed-1", "doomed-2"]
        .iter()
        .map(|n| log.create_stream(n).expect("create"))
        .collect();
    append(&log, doomed[0], "doomed-1", 30);
    append(&log, doomed[1], "doomed-2", 30);
    let early = log.read(doomed[0], Seq(0)).expect("read before reclaim");
    for s in &doomed {
        log.delete_stream(*s, Durability::Sync).expect("delete");
    }
    append(&log, kept, "kept", 30);
    log.flush().expect("flush");
    let before = segment_files(dir.path());
    assert!(before.len() >= 3, "the workload rolled: {before:?}");

    let report = log.reclaim().expect("reclaim");
    assert!(
        !report.segments_removed.is_empty(),
        "nothing reclaimed: {report:?}"
    );
    assert_eq!(report.segments_removed[0].0, 1, "lowest first");
    assert!(report.bytes_removed > 0);
    let (stopped, why) = report.stopped_at.expect("stopped at a live segment");
    assert!(why.contains("live stream"), "{why}");
    let after = segment_files(dir.path());
    assert_eq!(after.len(), before.len() - report.segments_removed.len());
    assert_eq!(
        after[0],
        format!("{:020}.seg", stopped.0),
        "the first file left is where reclaim stopped"
    );
    // A record read from a removed segment keeps its bytes.
    assert_eq!(&early.payload[..], &payload("doomed-1", 0)[..]);

    let expected: Vec<Vec<u8>> = (0..30).map(|i| payload("kept", i)).collect();
    assert_eq!(read_all(&log, "kept"), expected);
    log.close().expect("close");

    let log = Log::open(dir.path(), options()).expect("reopen from a checkpoint");
    assert_eq!(read_all(&log, "kept"), expected);
    assert_eq!(log.stream_id("doomed-1"), None, "deleted stays deleted");
    let again = log.create_stream("doomed-1").expect("the name is free");
    assert!(again.0 > doomed[1].0, "ids are not reused: {again}");
    log.commit(&[Append::new(kept, 1, b"more")], Durability::Sync)
        .expect("usable");
    log.close().expect("close");

    let verified = verify_store(std::sync::Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(
        verified.damages.is_empty(),
        "verify reports {:?}",
        verified.damages
    );
    // Nothing more to reclaim: the next open's reclaim removes nothing and keeps everything.
    let log = Log::open(dir.path(), options()).expect("reopen");
    let second = log.reclaim().expect("reclaim again");
    assert!(second.segments_removed.is_empty(), "{second:?}");
    assert_eq!(read_all(&log, "kept").len(), 31);
}

#[test]
fn a_segment_holding_a_live_record_is_never_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let kept = log.create_stream("kept").expect("create");
    let doomed = log.create_stream("doomed").expect("create");
    log.commit(&[Append::new(kept, 1, b"first")], Durability::Sync)
        .expect("commit");
    append(&log, doomed, "doomed", 60);
    log.delete_stream(doomed, Durability::Sync).expect("delete");
    log.flush().expect("flush");
    let before = segment_files(dir.path());
    let report = log.reclaim().expect("reclaim");
    assert!(report.segments_removed.is_empty(), "{report:?}");
    assert_eq!(segment_files(dir.path()), before);
    assert_eq!(read_all(&log, "kept"), vec![b"first".to_vec()]);
}
