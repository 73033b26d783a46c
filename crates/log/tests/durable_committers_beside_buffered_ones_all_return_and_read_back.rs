//! Committers that wait for durability hand the lead of each group commit to one another: the
//! one that ends a sync wakes a waiter of the next group to start its cycle. This drives that
//! hand-over hard, with buffered committers whose full buffers start write-only cycles between
//! the syncs, flushes, and segment rolls, at one and at two syncs in flight. The writers go in
//! rounds, each ending at a barrier, so every round ends with committers that nobody comes after:
//! a waiter left with nobody to wake it hangs its round, which the watchdog reports. A committer
//! that fails reports at once (the others then wait at the barrier forever, so waiting for the
//! watchdog would only hide the failure for minutes). Every commit that returned must then read
//! back, in order, after a reopen.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq, StreamId};

const SYNC_WRITERS: usize = 24;
const BUFFERED_WRITERS: usize = 8;
const FLUSHERS: usize = 2;
const COMMITS: usize = 100;
/// Buffered writers commit this many times more, so write-only cycles keep running.
const BUFFERED_FACTOR: usize = 8;
const PAYLOAD_BYTES: usize = 700;
/// Far more than the run takes on a loaded machine; only a lost wakeup gets near it.
const WATCHDOG: Duration = Duration::from_secs(300);

fn payload(writer: usize, i: usize) -> Vec<u8> {
    let mut p = format!("writer {writer} commit {i} ").into_bytes();
    p.resize(PAYLOAD_BYTES, b'a' + (writer % 26) as u8);
    p
}

/// Sends a failure report when the thread that holds it unwinds: a failed committer leaves the
/// others at the round's barrier, so the run would otherwise end only at the watchdog.
struct ReportFailure {
    who: String,
    to: mpsc::Sender<Result<(), String>>,
}

impl Drop for ReportFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.to.send(Err(format!(
                "{} failed (its panic is printed above)",
                self.who
            )));
        }
    }
}

fn run(max_concurrent_syncs: u32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = LogOptions::default()
        .with_segment_size_bytes(256 << 10)
        .with_write_buffer_bytes(4 << 10)
        .with_max_concurrent_syncs(max_concurrent_syncs);
    let log = Arc::new(Log::open(dir.path(), options.clone()).expect("open"));
    let writers = SYNC_WRITERS + BUFFERED_WRITERS;
    let streams: Vec<StreamId> = (0..writers)
        .map(|w| log.create_stream(&format!("w{w}")).expect("create"))
        .collect();

    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    let workers = {
        let log = Arc::clone(&log);
        let streams = streams.clone();
        std::thread::spawn(move || {
            std::thread::scope(|scope| {
                let round_end = Arc::new(Barrier::new(streams.len()));
                for (w, &stream) in streams.iter().enumerate() {
                    let log = Arc::clone(&log);
                    let round_end = Arc::clone(&round_end);
                    let report = ReportFailure {
                        who: format!("writer {w}"),
                        to: done_tx.clone(),
                    };
                    let (durability, per_round) = if w < SYNC_WRITERS {
                        (Durability::Sync, 1)
                    } else {
                        (Durability::Buffered, BUFFERED_FACTOR)
                    };
                    scope.spawn(move || {
                        let _report = report;
                        for i in 0..COMMITS * per_round {
                            let receipt = log
                                .commit(&[Append::new(stream, 1, &payload(w, i))], durability)
                                .expect("commit");
                            assert_eq!(receipt.seqs, vec![Seq(i as u64)], "writer {w}");
                            if (i + 1) % per_round == 0 {
                                round_end.wait();
                            }
                        }
                    });
                }
                for f in 0..FLUSHERS {
                    let log = Arc::clone(&log);
                    let report = ReportFailure {
                        who: format!("flusher {f}"),
                        to: done_tx.clone(),
                    };
                    scope.spawn(move || {
                        let _report = report;
                        for _ in 0..COMMITS {
                            log.flush().expect("flush");
                        }
                    });
                }
            });
            done_tx.send(Ok(())).expect("report the end");
        })
    };
    match done_rx.recv_timeout(WATCHDOG) {
        Ok(Ok(())) => {}
        Ok(Err(failure)) => panic!("{failure}"),
        Err(_) => panic!(
            "committers still waiting after {WATCHDOG:?} with {max_concurrent_syncs} sync(s) in \
             flight: a wakeup was lost"
        ),
    }
    workers.join().expect("no committer failed");
    log.flush().expect("flush the buffered writers");
    assert!(log.stats().segments > 1, "the run rolled no segment");
    drop(log);

    let log = Log::open(dir.path(), options).expect("reopen");
    for (w, &stream) in streams.iter().enumerate() {
        let commits = if w < SYNC_WRITERS {
            COMMITS
        } else {
            COMMITS * BUFFERED_FACTOR
        };
        let records: Vec<_> = log
            .iter(stream, Seq(0), Seq(commits as u64 + 1))
            .collect::<Result<_, _>>()
            .expect("read back");
        assert_eq!(records.len(), commits, "writer {w} lost commits");
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.seq, Seq(i as u64), "writer {w}");
            assert_eq!(r.payload[..], payload(w, i)[..], "writer {w} commit {i}");
        }
    }
}

#[test]
fn with_one_sync_in_flight() {
    run(1);
}

#[test]
fn with_two_syncs_in_flight() {
    run(2);
}
