//! A background reclaim (`Log::start_background_reclaim`) runs once at start and again when
//! nudged, rewriting mostly dead segments while other threads keep committing; stopping it
//! returns what it did, every live record reads back, and the store reopens at once.

use std::time::{Duration, Instant};

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq, StreamId};

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(64 << 10)
}

fn payload(stream: usize, i: u32) -> Vec<u8> {
    let mut p = format!("s{stream} {i};").into_bytes();
    p.resize(800, b'a' + (i % 26) as u8);
    p
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waited too long for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ten streams of 40 records each, interleaved, then all but the first deleted: every sealed
/// segment is mostly dead, so reclaim rewrites them all.
fn fill_and_delete_most(log: &Log) -> Vec<StreamId> {
    let ids: Vec<StreamId> = (0..10)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    for i in 0..40 {
        for (s, id) in ids.iter().enumerate() {
            log.commit(&[Append::new(*id, 1, &payload(s, i))], Durability::Buffered)
                .expect("commit");
        }
    }
    for id in &ids[1..] {
        log.delete_stream(*id, Durability::Buffered)
            .expect("delete");
    }
    ids
}

/// The first stream's records, as [`fill_and_delete_most`] wrote them, read back whole.
fn assert_first_stream_kept(log: &Log, ids: &[StreamId]) {
    let kept: Vec<Vec<u8>> = log
        .iter(ids[0], Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect();
    assert_eq!(kept, (0..40).map(|i| payload(0, i)).collect::<Vec<_>>());
}

#[test]
fn background_reclaim_rewrites_while_commits_go_on_and_stops_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let ids = fill_and_delete_most(&log);

    let reclaim = log
        .start_background_reclaim(Duration::from_secs(3600))
        .expect("start");
    // Commits go on while it runs.
    let writer = log.create_stream("writer").expect("create");
    let mut written = 0u32;
    while reclaim.report().runs < 1 {
        log.commit(
            &[Append::new(writer, 1, &payload(99, written))],
            Durability::Sync,
        )
        .expect("commit during reclaim");
        written += 1;
    }
    let first = reclaim.report();
    assert!(first.segments_rewritten > 0, "{first:?}");
    assert!(
        first.bytes_freed > 0 && first.live_bytes_copied > 0,
        "{first:?}"
    );
    // A nudge runs it again before the hour is up; there is nothing left to rewrite.
    reclaim.nudge();
    wait_for("a second run", || reclaim.report().runs >= 2);
    let report = reclaim.stop();
    assert!(report.error.is_none(), "{report:?}");
    assert_eq!(
        report.segments_rewritten, first.segments_rewritten,
        "{report:?}"
    );

    assert_first_stream_kept(&log, &ids);
    log.close().expect("close");
    let log = Log::open(dir.path(), options()).expect("reopens at once: the thread is gone");
    assert_eq!(
        log.stream_info(writer).expect("writer").next_seq,
        Seq(u64::from(written))
    );
    log.close().expect("close");
}

#[test]
fn a_background_reclaim_ends_by_itself_when_the_log_is_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let reclaim = log
        .start_background_reclaim(Duration::from_millis(10))
        .expect("start");
    wait_for("a first run", || reclaim.report().runs >= 1);
    log.clone().close().expect("close");
    // The next run finds the log closed and ends the thread without an error.
    let report = reclaim.stop();
    assert!(report.error.is_none(), "{report:?}");
    let read_only = Log::open_read_only(dir.path(), options()).expect("open read-only");
    assert!(read_only
        .start_background_reclaim(Duration::from_secs(1))
        .is_err());
}

/// A nudge that comes while a run is finishing (after its report, before the thread waits
/// again) is answered by another run, not lost until the interval is up.
#[test]
fn every_nudge_is_answered_by_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    let reclaim = log
        .start_background_reclaim(Duration::from_secs(3600))
        .expect("start");
    for want in 1..=200u64 {
        // Polled without sleeping, so the nudge often lands just as a run ends.
        let start = Instant::now();
        while reclaim.report().runs < want {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "run {want} never came: a nudge was lost"
            );
            std::thread::yield_now();
        }
        reclaim.nudge();
    }
    let report = reclaim.stop();
    assert!(report.error.is_none(), "{report:?}");
    assert!(report.runs >= 200, "{report:?}");
    log.close().expect("close");
}

/// A paced reclaim rests between its steps; a stop during a rest ends it without waiting the
/// rest out, after the run's remaining steps, whose work is reported. A work share outside
/// (0, 1] is refused.
#[test]
fn a_stop_ends_a_paced_reclaims_rest_and_shares_outside_0_to_1_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options()).expect("open");
    for bad in [0.0, -0.5, 1.5, f64::NAN] {
        assert!(
            log.start_background_reclaim_paced(Duration::from_secs(1), bad)
                .is_err(),
            "work share {bad}"
        );
    }
    let ids = fill_and_delete_most(&log);
    // A millionth of the time: after its first step it would rest for hours.
    let before = log.stats().bytes;
    let reclaim = log
        .start_background_reclaim_paced(Duration::from_secs(3600), 1e-6)
        .expect("start");
    // The first step (the group of rewrites) is done once the store got smaller.
    wait_for("the first step", || log.stats().bytes < before);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(reclaim.report().runs, 0, "the run is resting, not done");
    let asked = Instant::now();
    let report = reclaim.stop();
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "the stop waited out the rest: {:?}",
        asked.elapsed()
    );
    assert!(report.error.is_none(), "{report:?}");
    assert_eq!(report.runs, 1, "{report:?}");
    assert!(report.segments_rewritten > 0, "{report:?}");
    assert_first_stream_kept(&log, &ids);
    log.close().expect("close");
}
