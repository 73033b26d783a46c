//! A crash at any point of a compaction (through the simulated storage: a power cut after
//! any number of I/O operations, then a crash that keeps a random subset of unsynced writes)
//! leaves a session that reopens cleanly and derives exactly the messages of before the
//! compaction or of after it, never a mixture.

use std::path::Path;
use std::sync::Arc;

use sessionlog::session::compaction::{
    CompactionOutcome, CompactionPolicy, DeterministicSummarizer, KeepRecent,
};
use sessionlog::session::tokens::HeuristicCounter;
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{Store, StoreOptions};
use sessionlog_testkit::{Fault, SimStorage};

fn opts() -> StoreOptions {
    StoreOptions::default().with_log(
        sessionlog::LogOptions::default()
            .with_preallocate(false)
            .with_segment_size_bytes(64 << 10),
    )
}

/// Builds a durable session on `sim`; returns the derived messages.
fn build(sim: &SimStorage) -> String {
    let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts()).expect("store");
    let mut h = store
        .create_session("c", SessionHeader::new("c", 1, None))
        .expect("create");
    let mut w = Workload::new(
        11,
        WorkloadConfig::default()
            .with_compact_every_turns(None)
            .with_tool_result_bytes((64, 900)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..6 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn");
        }
    }
    h.commit().expect("commit");
    messages_json(&h)
}

fn compact(h: &mut sessionlog::SessionHandle) -> sessionlog::Result<CompactionOutcome> {
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Fraction(0.3));
    h.compact(
        &policy,
        &mut DeterministicSummarizer::new(),
        Arc::new(HeuristicCounter),
        3,
    )
}

#[test]
fn a_crash_anywhere_in_a_compaction_gives_before_or_after() {
    // The reference: the same compaction without faults.
    let reference = SimStorage::new(1);
    let before = build(&reference);
    let store = Store::open_with(reference.as_storage(), Path::new("/s"), opts()).expect("store");
    let (mut h, _) = store.open_session("c").expect("open");
    assert!(matches!(
        compact(&mut h).expect("compacts"),
        CompactionOutcome::Compacted(_)
    ));
    drop(h);
    let after = store
        .view("c")
        .expect("view")
        .surface
        .derive_messages_json();
    assert_ne!(
        before, after,
        "the compaction must change what the model sees"
    );
    drop(store);

    let (mut saw_before, mut saw_after) = (0, 0);
    for seed in 0..120u64 {
        let sim = SimStorage::new(seed);
        assert_eq!(build(&sim), before);
        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts()).expect("store");
        let (mut h, _) = store.open_session("c").expect("open");
        // The compaction does a handful of I/O operations (reads of the session, one write,
        // one fdatasync); cut the power after each possible number of them.
        sim.inject(Fault::power_cut_after(seed % 4));
        let _ = compact(&mut h);
        drop(h);
        drop(store);
        sim.clear_faults();
        sim.crash(seed);
        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts())
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let (h, _) = store
            .open_session("c")
            .unwrap_or_else(|e| panic!("seed {seed}: open session: {e}"));
        let messages = messages_json(&h);
        drop(h);
        assert_eq!(
            store
                .view("c")
                .expect("view")
                .surface
                .derive_messages_json(),
            messages,
            "seed {seed}: view and fold agree"
        );
        if messages == before {
            saw_before += 1;
        } else if messages == after {
            saw_after += 1;
        } else {
            panic!(
                "seed {seed}: the messages are neither those before nor those after the compaction"
            );
        }
    }
    assert!(
        saw_before > 0 && saw_after > 0,
        "both outcomes must occur: before {saw_before}, after {saw_after}"
    );
}

/// The handle's derived messages as one JSON array.
fn messages_json(h: &sessionlog::SessionHandle) -> String {
    format!("[{}]", h.derive_messages().expect("derive").join(","))
}
