//! What the projection tests share: stores filled from the fixture corpus or the workload
//! generator, and the crash schedules of a checkpoint write.

#![allow(dead_code)]

use std::path::Path;

use rand::SeedableRng;
use sessionlog::projection::Stats;
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{CacheUse, SessionHandle, Store, StoreOptions};
use sessionlog_testkit::{CrashPolicy, Fault, OpKind, SimStorage, Survival};

/// Imports every fixture log under `root/logs` the store accepts, as `f0`, `f1`, …; returns
/// their names (files the store refuses are the refusal tests' business).
pub fn import_every_fixture(store: &Store, root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![root.join("logs")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("fixtures") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let name = format!("f{}", names.len());
                if store
                    .import_dsh(&std::fs::read(&p).expect("read"), Some(&name))
                    .is_ok()
                {
                    names.push(name);
                }
            }
        }
    }
    assert!(names.len() > 50, "only {} fixtures imported", names.len());
    names
}

/// Appends one generated turn (and the compaction the generator asks for after it).
pub fn append_turn(h: &mut SessionHandle, w: &mut Workload) {
    append_turn_then(h, w, &mut |_| {});
}

/// [`append_turn`], calling `then` after each append (an atomic compaction counting as
/// one).
pub fn append_turn_then(
    h: &mut SessionHandle,
    w: &mut Workload,
    then: &mut dyn FnMut(&mut SessionHandle),
) {
    let next = h.next_seq().get();
    for e in w.turn(next, 2, None) {
        h.append(e).expect("turn");
        then(h);
    }
    if w.wants_compaction() {
        let surface = h.state().surface();
        if let Some(events) = w.compaction(&surface, h.next_seq(), 2) {
            h.append_atomic(events).expect("compaction");
            then(h);
        }
    }
}

/// A new generated session `name` of `store`, started (its `session_start` events
/// appended, not committed): its handle and the generator for its turns.
pub fn start_generated(store: &Store, name: &str, seed: u64) -> (SessionHandle, Workload) {
    let mut h = create(store, name);
    let mut w = Workload::new(
        seed,
        WorkloadConfig::default().with_compact_every_turns(Some(3)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    (h, w)
}

/// A new session `name` of `store` (its header made at time 1, no working directory).
pub fn create(store: &Store, name: &str) -> SessionHandle {
    store
        .create_session(name, SessionHeader::new(name, 1, None))
        .expect("create")
}

/// A generated session written by one handle, committed every turn, in a store that
/// registers `stats`; returns its event count.
pub fn write_generated(store: &Store, name: &str, seed: u64, turns: usize) -> u64 {
    let (mut h, mut w) = start_generated(store, name, seed);
    for _ in 0..turns {
        append_turn(&mut h, &mut w);
        h.commit().expect("commit");
    }
    // What the writer maintained is what the log folds to.
    let kept = h
        .projection::<Stats>(Stats::NAME)
        .expect("kept stats")
        .clone();
    assert_eq!(kept.events, h.next_seq().get());
    h.next_seq().get()
}

/// A crash at every point of a checkpoint write, each followed by a reopen: a store opened
/// with `opts` and `cache_refresh_events` set to `refresh` (so its writers write no
/// checkpoint when it is huge) is filled by `fill`, then `read` writes
/// checkpoints while the power goes out at one of the [`checkpoint_write_crashes`]; after
/// the reopen, `check(store, full)` compares a read of the reopened store with one of a
/// store that keeps no cache and says how the read was built. Whatever the crash left, the
/// second read uses a whole checkpoint; and some crashes left one, others did not.
pub fn a_crash_at_every_point_of_a_checkpoint_write(
    (namespace_ops, writes): (u64, u64),
    refresh: u64,
    opts: &dyn Fn() -> StoreOptions,
    fill: &dyn Fn(&Store),
    read: &dyn Fn(&Store),
    check: &dyn Fn(&Store, &Store) -> CacheUse,
) {
    let dir = Path::new("/s");
    let mut outcomes = std::collections::BTreeMap::new();
    let schedules = checkpoint_write_crashes(namespace_ops, writes);
    for (run, (cut, policy)) in schedules.into_iter().enumerate() {
        let sim = SimStorage::new(run as u64);
        let store = Store::open_with(
            sim.as_storage(),
            dir,
            opts().with_cache_refresh_events(refresh),
        )
        .expect("store");
        fill(&store);
        let uncut = cut.is_none();
        if let Some(fault) = cut {
            sim.inject(fault);
        }
        let before = sim.stats();
        read(&store);
        drop(store);
        if uncut {
            // The schedule cuts before each operation the write makes, so it must not
            // make more than it covers.
            let after = sim.stats();
            let made = (
                after.namespace_ops - before.namespace_ops,
                after.writes - before.writes,
            );
            assert!(
                made.0 <= namespace_ops && made.1 <= writes,
                "the checkpoint write made {made:?} directory changes and writes; the schedule covers {:?}",
                (namespace_ops, writes)
            );
        }
        sim.clear_faults();
        sim.crash_with(&mut rand::rngs::StdRng::seed_from_u64(run as u64), &policy);
        let store = Store::open_with(sim.as_storage(), dir, opts()).expect("reopen");
        let full = Store::open_with_access(
            sim.as_storage(),
            dir,
            opts().with_projection_cache(false),
            sessionlog::Access::ReadOnly,
        )
        .expect("full");
        let how = check(&store, &full);
        *outcomes
            .entry(match how {
                CacheUse::Hit { .. } => "used",
                _ => "rebuilt",
            })
            .or_insert(0) += 1;
        assert_eq!(check(&store, &full), CacheUse::Hit { folded: 0 });
    }
    assert!(outcomes.contains_key("rebuilt"), "{outcomes:?}");
    assert!(outcomes.contains_key("used"), "{outcomes:?}");
}

/// The crashes of a checkpoint write that makes at most `namespace_ops` directory changes
/// (create the cache directory, remove a stale temporary file, create it, rename it) and
/// `writes` writes: the power goes out before any one of them (every later operation
/// fails), or after all of them; each cut as a process crash (every write made before it
/// kept) and as a power loss (a random subset of the unsynced ones kept, torn or not).
fn checkpoint_write_crashes(namespace_ops: u64, writes: u64) -> Vec<(Option<Fault>, CrashPolicy)> {
    let process_crash = CrashPolicy {
        file_changes: Survival::KeepAll,
        dir_changes: Survival::KeepAll,
        tear_probability: 0.0,
        zero_fill_probability: 0.0,
    };
    let cuts: Vec<Option<Fault>> = (0..namespace_ops)
        .map(|k| Some(Fault::on(OpKind::Namespace).after(k).sticky()))
        .chain((0..writes).map(|k| Some(Fault::on(OpKind::Write).after(k).sticky())))
        .chain([None])
        .collect();
    cuts.into_iter()
        .flat_map(|cut| [(cut.clone(), process_crash), (cut, CrashPolicy::default())])
        .collect()
}

/// The state of a test projection that counts: its 8 bytes.
pub fn encode_count(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&n.to_le_bytes());
}

/// What [`encode_count`] wrote.
pub fn decode_count(bytes: &[u8]) -> Result<u64, sessionlog::ProjectionError> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| sessionlog::ProjectionError::Undecodable("not 8 bytes".into()))?;
    Ok(u64::from_le_bytes(b))
}
