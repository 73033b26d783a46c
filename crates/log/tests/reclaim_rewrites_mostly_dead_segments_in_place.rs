//! Reclaim rewrites a sealed segment whose live share is below the threshold: the records of
//! live streams (and the catalog records) are copied into a smaller file that replaces it,
//! with their seqs, kinds, flags and payloads unchanged; the records of deleted streams are
//! left behind. Reads find the copies at once and after a reopen, `verify` finds the store
//! intact, and a record read from the old file before the rewrite keeps its bytes.

use std::path::Path;

use sessionlog_log::verify::verify_store;
use sessionlog_log::{Append, Durability, Log, LogOptions, RealStorage, Seq, StreamId};

const SEGMENT_BYTES: u64 = 64 << 10;
const STREAMS: usize = 20;
const RECORDS: u32 = 40;

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES)
}

fn payload(stream: usize, i: u32) -> Vec<u8> {
    let mut p = format!("stream {stream} record {i};").into_bytes();
    p.resize(
        700 + (i as usize * 37 + stream * 11) % 400,
        b'a' + (i % 26) as u8,
    );
    p
}

fn read_all(log: &Log, id: StreamId) -> Vec<(u8, u8, Vec<u8>)> {
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| {
            let r = r.expect("record");
            (r.kind, r.flags, r.payload.to_vec())
        })
        .collect()
}

fn expected(stream: usize) -> Vec<(u8, u8, Vec<u8>)> {
    (0..RECORDS)
        .map(|i| ((i % 7) as u8, (stream % 3) as u8, payload(stream, i)))
        .collect()
}

fn segment_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

/// Twenty streams written interleaved, so every segment holds records of most of them.
fn fill(log: &Log) -> Vec<StreamId> {
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    for i in 0..RECORDS {
        for (s, id) in ids.iter().enumerate() {
            let p = payload(s, i);
            let mut a = Append::new(*id, (i % 7) as u8, &p);
            a.flags = (s % 3) as u8;
            log.commit(&[a], Durability::Buffered).expect("commit");
        }
    }
    ids
}

#[test]
fn mostly_dead_segments_are_rewritten_and_every_live_record_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let ids = fill(&log);
    let kept = [3usize, 11];
    // A record of a kept stream read from a sealed segment before it is rewritten.
    let early = log.read(ids[3], Seq(0)).expect("read before reclaim");
    for (s, id) in ids.iter().enumerate() {
        if !kept.contains(&s) {
            log.delete_stream(*id, Durability::Buffered)
                .expect("delete");
        }
    }
    log.flush().expect("flush");
    let before = segment_bytes(dir.path());

    let report = log.reclaim().expect("reclaim");
    assert!(
        report.segments_rewritten.len() >= 3,
        "the interleaved segments are mostly dead: {report:?}"
    );
    assert!(report.live_bytes_copied > 0);
    let after = segment_bytes(dir.path());
    assert!(
        after * 3 < before,
        "a tenth of the streams is live: {after} of {before} bytes left"
    );
    assert_eq!(
        before - after,
        report.bytes_freed_by_rewrites + report.bytes_removed,
        "the report accounts for every byte given back"
    );
    assert_eq!(
        &early.payload[..],
        &payload(3, 0)[..],
        "the old mapping lives on"
    );
    for s in kept {
        assert_eq!(
            read_all(&log, ids[s]),
            expected(s),
            "stream {s} after the rewrite"
        );
    }
    for s in 0..STREAMS {
        assert_eq!(
            log.stream_id(&format!("s{s}")).is_some(),
            kept.contains(&s),
            "stream {s}"
        );
    }
    // The store goes on working and a second reclaim finds nothing more to rewrite.
    let more = b"after the rewrite";
    log.commit(&[Append::new(ids[3], 1, more)], Durability::Sync)
        .expect("commit after");
    let again = log.reclaim().expect("reclaim again");
    assert!(again.segments_rewritten.is_empty(), "{again:?}");
    log.close().expect("close");

    let verified = verify_store(std::sync::Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(
        verified.is_intact(),
        "verify reports {:?}",
        verified.damages
    );
    assert_eq!(verified.live_streams, kept.len() as u64);

    let log = Log::open(dir.path(), options()).expect("reopen");
    let mut with_more = expected(3);
    with_more.push((1, 0, more.to_vec()));
    assert_eq!(read_all(&log, ids[3]), with_more);
    assert_eq!(read_all(&log, ids[11]), expected(11));
    for s in kept {
        for seq in [0u64, 17, u64::from(RECORDS) - 1] {
            let r = log.read(ids[s], Seq(seq)).expect("point read");
            assert_eq!(&r.payload[..], &payload(s, seq as u32)[..]);
        }
    }
    let fresh = log.create_stream("s0").expect("a deleted name is free");
    assert!(fresh.0 > ids[STREAMS - 1].0, "ids are not reused");
    log.close().expect("close");
}

#[test]
fn a_segment_at_or_above_the_threshold_is_left_as_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_rewrite_below_live_percent(0)).expect("open");
    let ids = fill(&log);
    for id in &ids[1..] {
        log.delete_stream(*id, Durability::Buffered)
            .expect("delete");
    }
    log.flush().expect("flush");
    let before = segment_bytes(dir.path());
    let report = log.reclaim().expect("reclaim");
    assert!(
        report.segments_rewritten.is_empty(),
        "rewriting is off: {report:?}"
    );
    assert_eq!(segment_bytes(dir.path()), before);
    log.close().expect("close");

    // With every stream but one deleted, 5% is below 10% but not below 1%.
    let log = Log::open(dir.path(), options().with_rewrite_below_live_percent(1)).expect("open");
    let report = log.reclaim().expect("reclaim");
    assert!(report.segments_rewritten.is_empty(), "{report:?}");
    log.close().expect("close");
    let log = Log::open(dir.path(), options().with_rewrite_below_live_percent(10)).expect("open");
    let report = log.reclaim().expect("reclaim");
    assert!(!report.segments_rewritten.is_empty(), "{report:?}");
    assert_eq!(read_all(&log, ids[0]), expected(0));
    log.close().expect("close");
}

#[test]
fn a_rewrite_left_unrenamed_by_a_crash_is_removed_by_the_next_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let ids = fill(&log);
    log.close().expect("close");
    // What a crash before the rename leaves: a partial rewrite beside its intact segment.
    let stale = dir.path().join(format!("{:020}.rewrite", 2));
    std::fs::write(&stale, b"half a segment").expect("write");
    let log = Log::open(dir.path(), options()).expect("reopen");
    assert!(!stale.exists(), "the stale rewrite is removed");
    assert_eq!(read_all(&log, ids[5]), expected(5));
    log.close().expect("close");
}

#[test]
fn a_live_stream_missing_records_is_refused_as_damage_by_open_and_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let ids = fill(&log);
    log.close().expect("close");
    // The same store before any delete, kept aside.
    let twin = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(dir.path()).expect("dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), twin.path().join(e.file_name())).expect("copy");
    }
    let log = Log::open(dir.path(), options()).expect("open");
    for id in &ids[1..] {
        log.delete_stream(*id, Durability::Sync).expect("delete");
    }
    let report = log.reclaim().expect("reclaim");
    let rewritten = *report.segments_rewritten.first().expect("a rewrite");
    log.close().expect("close");
    // Put the rewrite into the twin, where the streams it dropped are still live.
    let name = format!("{:020}.seg", rewritten.0);
    std::fs::copy(dir.path().join(&name), twin.path().join(&name)).expect("copy");

    let err = Log::open(twin.path(), options()).expect_err("a live stream lost records");
    assert!(
        err.to_string().contains("is missing seqs"),
        "the error names the missing records: {err}"
    );
    let verified = verify_store(std::sync::Arc::new(RealStorage), twin.path()).expect("verify");
    assert!(
        verified
            .damages
            .iter()
            .any(|d| d.what.contains("is missing seqs")),
        "verify reports the missing records: {:?}",
        verified.damages
    );
}
