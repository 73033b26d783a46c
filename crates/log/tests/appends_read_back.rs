//! Records committed to a log read back identically, before and after reopening, across
//! segment rolls, through point reads and range iteration.

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq};

fn small_segments() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_preallocate(false)
}

fn payload(stream: u64, seq: u64) -> Vec<u8> {
    let len = ((stream * 131 + seq * 17) % 700) as usize;
    (0..len)
        .map(|i| (i as u64 ^ seq ^ stream) as u8)
        .chain(format!("s{stream}q{seq}").into_bytes())
        .collect()
}

#[test]
fn records_read_back_across_rolls_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut counts = vec![0u64; 5];
    {
        let log = Log::open(dir.path(), small_segments()).expect("open");
        let ids: Vec<_> = (0..5)
            .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
            .collect();
        for round in 0..400u64 {
            let k = (round % 5) as usize;
            let p1 = payload(k as u64, counts[k]);
            let p2 = payload(k as u64, counts[k] + 1);
            let d = if round % 7 == 0 {
                Durability::Sync
            } else {
                Durability::Buffered
            };
            let r = log
                .commit(
                    &[Append::new(ids[k], 1, &p1), Append::new(ids[k], 2, &p2)],
                    d,
                )
                .expect("commit");
            assert_eq!(r.seqs, vec![Seq(counts[k]), Seq(counts[k] + 1)]);
            counts[k] += 2;
        }
        assert!(
            log.stats().segments > 3,
            "the test must roll segments: {:?}",
            log.stats()
        );
        check(&log, &counts);
        log.close().expect("close");
    }
    let log = Log::open(dir.path(), small_segments()).expect("reopen");
    assert!(log.recovery_report().tail_cut.is_none());
    check(&log, &counts);
}

fn check(log: &Log, counts: &[u64]) {
    for (k, &n) in counts.iter().enumerate() {
        let id = log.stream_id(&format!("s{k}")).expect("stream");
        assert_eq!(log.stream_info(id).expect("info").next_seq, Seq(n));
        for seq in 0..n {
            let r = log.read(id, Seq(seq)).expect("read");
            assert_eq!(
                &r.payload[..],
                &payload(k as u64, seq)[..],
                "stream {k} seq {seq}"
            );
            assert_eq!(r.kind, if seq % 2 == 0 { 1 } else { 2 });
        }
        let all: Vec<_> = log
            .iter(id, Seq(0), Seq(n))
            .map(|r| r.expect("iter").seq.0)
            .collect();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        let mid: Vec<_> = log
            .iter(id, Seq(n / 3), Seq(n / 2))
            .map(|r| r.expect("iter").seq.0)
            .collect();
        assert_eq!(mid, (n / 3..n / 2).collect::<Vec<_>>());
        assert!(matches!(
            log.read(id, Seq(n)),
            Err(Error::NoSuchRecord { .. })
        ));
    }
}

#[test]
fn a_second_open_of_the_same_store_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _log = Log::open(dir.path(), LogOptions::default()).expect("open");
    assert!(matches!(
        Log::open(dir.path(), LogOptions::default()),
        Err(Error::Locked { .. })
    ));
}

#[test]
fn a_stale_writer_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), LogOptions::default()).expect("open");
    let s = log.create_stream("a").expect("create");
    let mut a = Append::new(s, 1, b"x");
    a.expected_seq = Some(Seq(0));
    log.commit(&[a], Durability::Sync).expect("first");
    let err = log.commit(&[a], Durability::Sync).expect_err("stale");
    assert!(
        matches!(
            err,
            Error::SeqMismatch {
                expected: Seq(0),
                actual: Seq(1),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(log.stream_info(s).expect("info").next_seq, Seq(1));
}

#[test]
fn oversized_records_are_refused_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = LogOptions::default().with_max_record_bytes(1000);
    let log = Log::open(dir.path(), opts).expect("open");
    let s = log.create_stream("a").expect("create");
    let big = vec![7u8; 1001];
    assert!(matches!(
        log.commit(&[Append::new(s, 1, &big)], Durability::Sync),
        Err(Error::RecordTooLarge {
            len: 1001,
            max: 1000
        })
    ));
    assert_eq!(log.stream_info(s).expect("info").next_seq, Seq(0));
}

#[test]
fn large_records_span_beyond_the_segment_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), small_segments()).expect("open");
    let s = log.create_stream("big").expect("create");
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    log.commit(&[Append::new(s, 1, b"small")], Durability::Sync)
        .expect("small");
    log.commit(&[Append::new(s, 1, &big)], Durability::Sync)
        .expect("big");
    log.commit(&[Append::new(s, 1, b"after")], Durability::Sync)
        .expect("after");
    assert_eq!(&log.read(s, Seq(1)).expect("read").payload[..], &big[..]);
    drop(log);
    let log = Log::open(dir.path(), small_segments()).expect("reopen");
    assert_eq!(&log.read(s, Seq(1)).expect("read").payload[..], &big[..]);
    assert_eq!(&log.read(s, Seq(2)).expect("read").payload[..], b"after");
}

#[test]
fn deleted_streams_stay_deleted_and_free_their_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log = Log::open(dir.path(), small_segments()).expect("open");
        let s = log.create_stream("a").expect("create");
        log.commit(&[Append::new(s, 1, b"x")], Durability::Sync)
            .expect("commit");
        log.delete_stream(s, Durability::Sync).expect("delete");
        assert!(log.stream_id("a").is_none());
        let again = log.create_stream("a").expect("recreate");
        assert_ne!(again, s);
        log.close().expect("close");
    }
    let log = Log::open(dir.path(), small_segments()).expect("reopen");
    let s = log.stream_id("a").expect("a");
    assert_eq!(log.stream_info(s).expect("info").next_seq, Seq(0));
    assert_eq!(log.streams().len(), 1);
}

#[test]
fn a_clean_close_lets_the_next_open_skip_the_scan_and_only_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_segments();
    {
        let log = Log::open(dir.path(), opts.clone()).expect("open");
        let s = log.create_stream("a").expect("create");
        for i in 0..50u64 {
            log.commit(&[Append::new(s, 1, &payload(1, i))], Durability::Buffered)
                .expect("commit");
        }
        log.close().expect("close");
    }
    let log = Log::open(dir.path(), opts.clone()).expect("reopen");
    assert!(
        log.recovery_report().clean_close,
        "the clean-close file is used"
    );
    let s = log.stream_id("a").expect("a");
    assert_eq!(log.stream_info(s).expect("info").next_seq, Seq(50));
    for i in 0..50 {
        assert_eq!(
            &log.read(s, Seq(i)).expect("read").payload[..],
            &payload(1, i)[..]
        );
    }
    // The file is gone once the log is open: appends after it must not be hidden by it.
    assert!(!std::fs::read_dir(dir.path()).expect("dir").any(|e| e
        .expect("e")
        .file_name()
        .to_string_lossy()
        .ends_with(".clean")));
    log.commit(
        &[Append::new(s, 1, b"after the clean open")],
        Durability::Sync,
    )
    .expect("commit");
    // A crash now: copy the store as it is on disk while the log is still open.
    let crashed = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(dir.path()).expect("dir") {
        let e = e.expect("entry");
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), crashed.path().join(e.file_name())).expect("copy");
        }
    }
    drop(log);
    let log = Log::open(crashed.path(), opts).expect("reopen after a crash");
    assert!(
        !log.recovery_report().clean_close,
        "a crash leaves no clean-close file: the segment is scanned"
    );
    assert_eq!(
        &log.read(s, Seq(50)).expect("read").payload[..],
        b"after the clean open"
    );
}
