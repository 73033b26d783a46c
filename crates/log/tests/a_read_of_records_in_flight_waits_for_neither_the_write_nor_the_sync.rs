//! A read of records that a commit's write has taken from the buffer but not yet finished
//! (or finished but not yet synced) is served from a copy of the bytes in flight: it returns
//! them whole without waiting for the write or the sync, whether the leader runs its write
//! and sync back to back (one sync at a time) or apart (overlapping syncs).

mod common;

use std::io;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use common::{Hooked, Hooks};
use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

/// Which storage call the gate holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Write,
    Sync,
}

/// Holds the first matching call after it is armed until it is released.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    armed: Option<Hold>,
    held: bool,
    released: bool,
}

impl Gate {
    fn pass(&self, call: Hold) {
        let mut st = self.state.lock().expect("gate");
        if st.armed != Some(call) || st.held {
            return;
        }
        st.held = true;
        self.changed.notify_all();
        while !st.released {
            st = self.changed.wait(st).expect("gate");
        }
    }

    fn arm(&self, call: Hold) {
        self.state.lock().expect("gate").armed = Some(call);
    }

    fn wait_held(&self) {
        let mut st = self.state.lock().expect("gate");
        while !st.held {
            let (next, timeout) = self
                .changed
                .wait_timeout(st, Duration::from_secs(30))
                .expect("gate");
            assert!(!timeout.timed_out(), "no commit reached the gate");
            st = next;
        }
    }

    fn release(&self) {
        self.state.lock().expect("gate").released = true;
        self.changed.notify_all();
    }
}

impl Hooks for Gate {
    fn write_all_at(&self, _offset: u64) -> io::Result<()> {
        // Held before the bytes reach the file: only the copy in flight holds them.
        self.pass(Hold::Write);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.pass(Hold::Sync);
        Ok(())
    }
}

fn payload(i: u64) -> Vec<u8> {
    // Sizes vary, so records end at uneven offsets in the bytes in flight.
    let len = 20 + (i as usize * 37) % 300;
    (0..len).map(|j| (i as usize * 7 + j) as u8).collect()
}

/// Commits `before` records durably and `buffered` more into the buffer, holds the next
/// commit's write or sync at the gate, commits `after` more records into the buffer, then
/// reads every record from another thread while the gate holds: the reads must all return,
/// whole, before the gate opens.
fn reads_while_held(hold: Hold, max_concurrent_syncs: u32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Hooked::new(Gate::default());
    let gate = storage.hooks.clone();
    let options = LogOptions::default()
        .with_segment_size_bytes(4 << 20)
        .with_max_concurrent_syncs(max_concurrent_syncs);
    let log = Log::open_with(storage, dir.path(), options).expect("open");
    let s = log.create_stream("s").expect("stream");
    let (before, buffered, after) = (10u64, 25u64, 6u64);
    let commit = |from: u64, n: u64, durability: Durability| {
        for i in from..from + n {
            let p = payload(i);
            log.commit(&[Append::new(s, 1, &p)], durability)
                .expect("commit");
        }
    };
    commit(0, before, Durability::Sync);
    commit(before, buffered, Durability::Buffered);

    gate.arm(hold);
    let leader = {
        let log = log.clone();
        std::thread::spawn(move || {
            let p = payload(before + buffered);
            log.commit(&[Append::new(s, 1, &p)], Durability::Sync)
        })
    };
    gate.wait_held();
    commit(before + buffered + 1, after, Durability::Buffered);
    let total = before + buffered + 1 + after;

    // Reads from another thread, so that a read that waits for the held call shows as a
    // timeout here instead of hanging the test.
    let (tx, rx) = mpsc::channel();
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            let singles: Vec<_> = (0..total)
                .map(|i| log.read(s, Seq(i)).map(|r| r.payload))
                .collect();
            let all: Vec<_> = log.iter(s, Seq(0), Seq(total)).collect();
            let _ = tx.send((singles, all));
        })
    };
    let received = rx.recv_timeout(Duration::from_secs(20));
    gate.release();
    let (singles, all) = received.unwrap_or_else(|_| {
        panic!("reads waited for the held {hold:?} (max_concurrent_syncs {max_concurrent_syncs})")
    });
    reader.join().expect("reader");
    for (i, got) in singles.into_iter().enumerate() {
        let got = got.unwrap_or_else(|e| panic!("read of record {i}: {e}"));
        assert_eq!(&got[..], &payload(i as u64)[..], "record {i}");
    }
    assert_eq!(all.len() as u64, total, "iteration length");
    for (i, got) in all.into_iter().enumerate() {
        let got = got.unwrap_or_else(|e| panic!("iteration at record {i}: {e}"));
        assert_eq!(got.seq, Seq(i as u64));
        assert_eq!(&got.payload[..], &payload(i as u64)[..], "record {i}");
    }

    leader.join().expect("leader").expect("held commit");
    log.flush().expect("flush");
    log.close().expect("close");
    let log = Log::open(dir.path(), LogOptions::default()).expect("reopen");
    for i in 0..total {
        assert_eq!(
            &log.read(s, Seq(i)).expect("read after reopen").payload[..],
            &payload(i)[..]
        );
    }
    log.close().expect("close");
}

#[test]
fn reads_pass_a_held_write_when_write_and_sync_run_back_to_back() {
    reads_while_held(Hold::Write, 1);
}

#[test]
fn reads_pass_a_held_sync_when_write_and_sync_run_back_to_back() {
    reads_while_held(Hold::Sync, 1);
}

#[test]
fn reads_pass_a_held_write_when_syncs_may_overlap() {
    reads_while_held(Hold::Write, 2);
}

#[test]
fn reads_pass_a_held_sync_when_syncs_may_overlap() {
    reads_while_held(Hold::Sync, 2);
}
