//! A handle's commit makes every event it appended durable, whatever other sessions append
//! around it. Checked through the simulated storage: the committing session appends one
//! event at a time, another session a turn after each (and sometimes commits and appends
//! more), the first commits, the power is cut at once and the crash keeps a random subset of
//! the unsynced writes. Every event of the committing session that a commit acknowledged is
//! there after the reopen, exactly as appended; of the other session, whatever survived is
//! a gap-free prefix of what it appended.

use std::path::Path;

use sessionlog::session::EventInput;
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{SessionHandle, Store, StoreOptions};
use sessionlog_testkit::{Fault, SimStorage};

fn opts() -> StoreOptions {
    StoreOptions::default().with_log(
        sessionlog::LogOptions::default()
            .with_preallocate(false)
            .with_segment_size_bytes(64 << 10),
    )
}

/// The session's events, envelopes as stored.
fn events(store: &Store, name: &str) -> Vec<String> {
    store
        .raw_events(name, sessionlog::Seq(0))
        .unwrap_or_else(|e| panic!("events of {name}: {e}"))
        .into_iter()
        .map(|e| e.raw().to_owned())
        .collect()
}

/// Appends `inputs` to `h`, recording each envelope as appended.
fn append_all(h: &mut SessionHandle, inputs: Vec<EventInput>, appended: &mut Vec<String>) {
    for e in inputs {
        appended.push(h.append(e).expect("append").raw().to_owned());
    }
}

#[test]
fn a_commit_makes_its_own_appends_durable_whatever_others_append() {
    let config = WorkloadConfig::default()
        .with_compact_every_turns(None)
        .with_tool_result_bytes((32, 400));
    let (mut kept_beyond, mut lost_beyond) = (0, 0);
    for seed in 0..48u64 {
        let sim = SimStorage::new(seed);
        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts()).expect("store");
        let mut a = store
            .create_session("a", SessionHeader::new("a", 1, None))
            .expect("create a");
        let mut b = store
            .create_session("b", SessionHeader::new("b", 1, None))
            .expect("create b");
        // A commit with no append of the handle's own makes what the creates wrote durable.
        a.commit().expect("commit the headers");
        let (mut wa, mut wb) = (
            Workload::new(seed, config.clone()),
            Workload::new(seed + 1000, config.clone()),
        );
        let (mut appended_a, mut appended_b) = (vec![], vec![]);
        append_all(&mut a, wa.session_start(1), &mut appended_a);
        append_all(&mut b, wb.session_start(1), &mut appended_b);
        a.commit().expect("commit a's start");
        // Then the committing session appends one event at a time and the other a turn
        // after each: a commit whose session appended one event since the last sync.
        let next = a.next_seq().get();
        let mut turn = wa.turn(next, 2, None).into_iter();
        let mut acknowledged = appended_a.len();
        for (i, e) in turn.by_ref().enumerate().take(1 + seed as usize % 5) {
            append_all(&mut a, vec![e], &mut appended_a);
            let next = b.next_seq().get();
            append_all(&mut b, wb.turn(next, 2, None), &mut appended_b);
            if (i + seed as usize) % 3 == 0 {
                b.commit().expect("commit b");
                let next = b.next_seq().get();
                append_all(&mut b, wb.turn(next, 3, None), &mut appended_b);
            }
            a.commit().expect("commit a");
            acknowledged = appended_a.len();
        }
        // More of both, which no commit acknowledges: the rest of a's turn, another of b's.
        append_all(&mut a, turn.collect(), &mut appended_a);
        let next = b.next_seq().get();
        append_all(&mut b, wb.turn(next, 4, None), &mut appended_b);
        // The power goes at once: nothing after the last commit reaches the disk.
        sim.inject(Fault::power_cut_after(0));
        drop(a);
        drop(b);
        drop(store);
        sim.clear_faults();
        sim.crash(seed);

        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts())
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let survived_a = events(&store, "a");
        assert_eq!(
            survived_a.get(..acknowledged),
            appended_a.get(..acknowledged),
            "seed {seed}: every acknowledged event of the committing session, as appended"
        );
        assert!(
            appended_a.starts_with(&survived_a),
            "seed {seed}: a holds what it appended"
        );
        let survived_b = events(&store, "b");
        assert!(
            appended_b.starts_with(&survived_b),
            "seed {seed}: the other session holds a prefix of what it appended ({} of {})",
            survived_b.len(),
            appended_b.len()
        );
        if survived_b.len() == appended_b.len() {
            kept_beyond += 1;
        } else {
            lost_beyond += 1;
        }
    }
    // The crashes were real: some runs lost the other session's uncommitted tail.
    assert!(
        lost_beyond > 0,
        "no run lost anything uncommitted (kept {kept_beyond}): the power cut did not bite"
    );
}
