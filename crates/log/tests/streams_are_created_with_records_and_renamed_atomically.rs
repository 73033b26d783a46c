//! A stream created together with its first records, and a stream renamed, read back the same
//! before and after reopening, whether the catalog records are in the active segment (scanned,
//! or described by a clean close) or in a sealed one (read from its footer); and the catalog
//! refuses a create or rename onto a name a live stream holds.

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq, StreamId};

fn small_segments() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_preallocate(false)
}

fn payloads(stream: &str, from: u64, n: u64) -> Vec<Vec<u8>> {
    (from..from + n)
        .map(|i| format!("{stream}/{i}/{}", "x".repeat((i % 300) as usize)).into_bytes())
        .collect()
}

fn read_all(log: &Log, name: &str) -> Vec<Vec<u8>> {
    let id = log.stream_id(name).expect("stream by name");
    let next = log.stream_info(id).expect("live").next_seq;
    log.iter(id, Seq(0), next)
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

/// Creates `staged` with three records, appends more, then renames it to `published`;
/// `roll` fills segments afterwards so the catalog records end up in a sealed segment.
fn write(log: &Log, roll: bool) -> Vec<Vec<u8>> {
    let first = payloads("a", 0, 3);
    let records: Vec<(u8, &[u8])> = first.iter().map(|p| (7, &p[..])).collect();
    let (id, receipt) = log
        .create_stream_with("staged", &records, Durability::Buffered)
        .expect("create with records");
    assert_eq!(receipt.seqs, vec![Seq(0), Seq(1), Seq(2)]);
    let more = payloads("a", 3, 20);
    for p in &more {
        log.commit(&[Append::new(id, 8, p)], Durability::Buffered)
            .expect("append");
    }
    log.rename_stream(id, "published", Durability::Sync)
        .expect("rename");
    assert_eq!(log.stream_id("staged"), None, "the old name is free");
    assert_eq!(log.stream_id("published"), Some(id));
    if roll {
        let filler = log.create_stream("filler").expect("filler");
        let big = vec![0x5A; 4000];
        while log.stats().segments < 3 {
            log.commit(&[Append::new(filler, 1, &big)], Durability::Buffered)
                .expect("filler");
        }
        log.flush().expect("flush");
    }
    first.into_iter().chain(more).collect()
}

fn check_reopened(dir: &std::path::Path, want: &[Vec<u8>]) {
    let log = Log::open(dir, small_segments()).expect("reopen");
    assert_eq!(log.stream_id("staged"), None);
    assert_eq!(read_all(&log, "published"), want);
    // The freed name can be bound again; the renamed stream's name cannot.
    log.create_stream("staged").expect("old name is free again");
    assert!(matches!(
        log.create_stream_with("published", &[], Durability::Buffered),
        Err(Error::StreamExists(_))
    ));
}

#[test]
fn catalog_records_in_the_active_segment_survive_a_reopen_after_a_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let want = {
        let log = Log::open(dir.path(), small_segments()).expect("open");
        write(&log, false)
    };
    check_reopened(dir.path(), &want);
}

#[test]
fn catalog_records_in_the_active_segment_survive_a_clean_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), small_segments()).expect("open");
    let want = write(&log, false);
    log.close().expect("close");
    check_reopened(dir.path(), &want);
}

#[test]
fn catalog_records_in_a_sealed_footer_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), small_segments()).expect("open");
    let want = write(&log, true);
    log.close().expect("close");
    check_reopened(dir.path(), &want);
}

#[test]
fn create_and_rename_refuse_a_name_a_live_stream_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Records of at most 16 KiB: the largest batch is the 64 KiB segment.
    let options = small_segments().with_max_record_bytes(16 << 10);
    let log = Log::open(dir.path(), options).expect("open");
    let a = log.create_stream("a").expect("a");
    let b = log.create_stream("b").expect("b");
    let p = b"payload".to_vec();
    assert!(matches!(
        log.create_stream_with("a", &[(1, &p[..])], Durability::Sync),
        Err(Error::StreamExists(_))
    ));
    assert_eq!(
        log.stream_info(a).expect("a").next_seq,
        Seq(0),
        "a refused create writes nothing"
    );
    assert!(matches!(
        log.rename_stream(b, "a", Durability::Sync),
        Err(Error::StreamExists(_))
    ));
    assert!(matches!(
        log.rename_stream(a, "a", Durability::Sync),
        Err(Error::StreamExists(_))
    ));
    assert!(matches!(
        log.rename_stream(StreamId(99), "c", Durability::Sync),
        Err(Error::UnknownStream(_))
    ));
    assert_eq!(
        log.stream_id("b"),
        Some(b),
        "a refused rename changes nothing"
    );
    // A batch too large for one commit is refused before anything is written.
    let big = vec![0u8; 15 << 10];
    let records: Vec<(u8, &[u8])> = (0..8).map(|_| (1, &big[..])).collect();
    assert!(matches!(
        log.create_stream_with("c", &records, Durability::Sync),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(log.stream_id("c"), None);
}
