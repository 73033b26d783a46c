//! After a clean close a read-only open trusts the clean-close file as an open for writing
//! does, and reads the last segment in place instead of copying and scanning it. What it
//! reads must be exactly what was written; a writer that opens, appends, rolls and closes
//! beside it must neither change what it reads nor make it fail; and bytes changed behind
//! the log's back are reported as damage, never returned.

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq};

fn payload(stream: u64, i: u64) -> Vec<u8> {
    format!(
        "stream {stream} record {i:05} {}",
        "x".repeat((i % 97) as usize)
    )
    .into_bytes()
}

/// A store of one stream `s` of 200 records (`payload(0, i)`), committed with
/// `durability` and closed cleanly.
fn closed_store(durability: Durability) -> (tempfile::TempDir, LogOptions) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = LogOptions::default().with_segment_size_bytes(1 << 20);
    let log = Log::open(dir.path(), options.clone()).expect("open");
    let s = log.create_stream("s").expect("stream");
    for i in 0..200 {
        log.commit(&[Append::new(s, 1, &payload(0, i))], durability)
            .expect("commit");
    }
    log.close().expect("close");
    (dir, options)
}

/// Flips `bits` in byte `at` of the record payload `needle` in the store's only segment
/// file; the file's path.
fn flip_in_payload(
    dir: &std::path::Path,
    needle: &[u8],
    at: usize,
    bits: u8,
) -> std::path::PathBuf {
    let segment = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read segment");
    let found = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the record's payload is in the segment");
    bytes[found + at] ^= bits;
    std::fs::write(&segment, &bytes).expect("write segment");
    segment
}

#[test]
fn a_read_only_open_after_a_clean_close_reads_the_segment_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small segments, preallocated: the records written later roll over several of them.
    let options = LogOptions::default().with_segment_size_bytes(256 << 10);
    const WRITTEN: u64 = 600;

    let log = Log::open(dir.path(), options.clone()).expect("open");
    let streams = [
        log.create_stream("a").expect("a"),
        log.create_stream("b").expect("b"),
    ];
    for i in 0..WRITTEN {
        for (n, &s) in streams.iter().enumerate() {
            log.commit(
                &[Append::new(s, 1, &payload(n as u64, i))],
                Durability::Buffered,
            )
            .expect("commit");
        }
    }
    log.close().expect("close");

    let reader = Log::open_read_only(dir.path(), options.clone()).expect("read-only");
    let report = reader.recovery_report();
    assert!(
        report.clean_close,
        "the clean-close file stood in for a scan"
    );
    assert!(report.actions().is_empty(), "{:?}", report.actions());
    let ids: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| reader.stream_id(n).expect("stream"))
        .collect();
    let check = |reader: &Log| {
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(reader.stream_info(id).expect("info").next_seq, Seq(WRITTEN));
            let read: Vec<Vec<u8>> = reader
                .iter(id, Seq(0), Seq(WRITTEN))
                .map(|r| r.expect("read").payload.to_vec())
                .collect();
            let expected: Vec<Vec<u8>> = (0..WRITTEN).map(|i| payload(n as u64, i)).collect();
            assert_eq!(read, expected, "stream {n}");
            for i in (0..WRITTEN).step_by(37) {
                let r = reader.read(id, Seq(i)).expect("point read");
                assert_eq!(&r.payload[..], &payload(n as u64, i)[..]);
            }
        }
    };
    check(&reader);

    // A writer opens (removing the clean-close file), appends enough to seal the segment
    // the reader reads in place and roll over others, and closes again.
    let writer = Log::open(dir.path(), options.clone()).expect("writer");
    for i in WRITTEN..WRITTEN * 4 {
        for (n, &s) in streams.iter().enumerate() {
            writer
                .commit(
                    &[Append::new(s, 1, &payload(n as u64, i))],
                    Durability::Buffered,
                )
                .expect("commit");
        }
    }
    writer.close().expect("close writer");
    let segments = std::fs::read_dir(dir.path())
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg"))
        })
        .count();
    assert!(segments > 2, "the writer rolled: {segments} segments");
    // The reader's view is its snapshot, read exactly as before.
    check(&reader);
    reader.close().expect("close reader");

    // A fresh reader sees everything, in place again (the writer closed cleanly).
    let reader = Log::open_read_only(dir.path(), options.clone()).expect("read-only");
    assert!(reader.recovery_report().clean_close);
    for (n, name) in ["a", "b"].iter().enumerate() {
        let id = reader.stream_id(name).expect("stream");
        let read: Vec<Vec<u8>> = reader
            .iter(id, Seq(0), Seq(WRITTEN * 4))
            .map(|r| r.expect("read").payload.to_vec())
            .collect();
        let expected: Vec<Vec<u8>> = (0..WRITTEN * 4).map(|i| payload(n as u64, i)).collect();
        assert_eq!(read, expected, "stream {name}");
    }
    drop(reader);
}

#[test]
fn a_record_changed_behind_a_reader_reading_in_place_is_damage() {
    let (dir, options) = closed_store(Durability::Buffered);

    let reader = Log::open_read_only(dir.path(), options).expect("read-only");
    assert!(reader.recovery_report().clean_close);
    let id = reader.stream_id("s").expect("stream");

    // One byte of record 150's payload, changed in the segment file after the open.
    flip_in_payload(dir.path(), &payload(0, 150), 3, 0x20);

    match reader.read(id, Seq(150)) {
        Err(Error::Corrupted { .. }) => {}
        other => panic!("a changed record must be damage, got {other:?}"),
    }
    // An iteration returns every record before the damage as written, then the damage
    // (a window is verified before it is handed out, so it may stop a little early).
    let iterated: Vec<_> = reader.iter(id, Seq(0), Seq(200)).collect();
    let good = iterated.iter().take_while(|r| r.is_ok()).count();
    assert!(good <= 150, "record 150 was returned: {good} records read");
    for (i, r) in iterated.iter().take(good).enumerate() {
        let r = r.as_ref().expect("read");
        assert_eq!(&r.payload[..], &payload(0, i as u64)[..]);
    }
    assert!(
        matches!(iterated.get(good), Some(Err(Error::Corrupted { .. }))),
        "the iteration ends with the damage: {:?}",
        iterated.get(good).map(|r| r.as_ref().err())
    );
    for i in [0u64, 1, 149, 151, 199] {
        let r = reader.read(id, Seq(i)).expect("an unchanged record reads");
        assert_eq!(&r.payload[..], &payload(0, i)[..]);
    }
}

#[test]
fn damage_under_a_clean_close_is_refused_at_open_as_a_scan_refuses_it() {
    let (dir, options) = closed_store(Durability::Sync);
    let segment = flip_in_payload(dir.path(), &payload(0, 120), 5, 0x01);
    let before = std::fs::read(&segment).expect("read segment");

    // Later batches vouch for the damaged one: damage to acknowledged data, not a tail.
    match Log::open_read_only(dir.path(), options) {
        Err(Error::Corrupted { .. }) => {}
        Ok(_) => panic!("a read-only open accepted damaged acknowledged data"),
        Err(e) => panic!("expected corruption, got {e}"),
    }
    assert_eq!(
        std::fs::read(&segment).expect("read"),
        before,
        "nothing written"
    );
}
