//! A store-wide projection (`totals`) is kept like a session's projections: read from its
//! checkpoint plus the events appended after each session's part, it equals a fold of the
//! whole log, on every fixture and on generated stores, after a crash at any point of its
//! checkpoint write, and after sessions are deleted and their segments reclaimed. Its
//! counts agree with the per-session `stats` projection added up. `cache verify` covers it
//! and every session projection's checkpoint.

use std::path::Path;

use proptest::prelude::*;
use sessionlog::cache::CacheMiss;
use sessionlog::projection::{SessionStats, Stats, StoreTotals, Totals};
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};

mod projecting;
use projecting::{
    a_crash_at_every_point_of_a_checkpoint_write, append_turn, import_every_fixture,
    write_generated,
};
use sessionlog::{
    CacheCheck, CacheUse, Error, Projection, ProjectionError, Store, StoreOptions, StoreProjected,
    StoreProjection, StoredEvent,
};

fn log_options() -> sessionlog::LogOptions {
    sessionlog::LogOptions::default()
        .with_preallocate(false)
        .with_segment_size_bytes(64 << 10)
}

fn opts() -> StoreOptions {
    StoreOptions::default()
        .with_log(log_options())
        .with_cache_refresh_events(16)
        .with_projection(Stats)
        .with_store_projection(Totals)
}

/// The same store read with no cache at all.
fn fresh(dir: &Path) -> Store {
    Store::open_read_only(dir, opts().with_projection_cache(false)).expect("fresh store")
}

fn totals(store: &Store) -> StoreProjected<StoreTotals> {
    store
        .store_projection::<Totals>(Totals::NAME)
        .expect("totals")
}

/// The totals of `store` equal those of a fold of the whole log, and the per-session
/// `stats` added up; returns how they were built.
fn assert_equal_to_a_full_fold(store: &Store, full: &Store) -> CacheUse {
    let t = totals(store);
    let f = totals(full);
    assert_eq!(f.cache, CacheUse::Disabled);
    assert_eq!(t.total, f.total);
    assert_eq!((t.sessions, t.events), (f.sessions, f.events));
    // An oracle of other code: the sessions' `stats` projections, added up.
    let names = full.session_names();
    assert_eq!(t.total.sessions, names.len() as u64);
    let mut sum = SessionStats::default();
    for name in &names {
        let s = full
            .projection::<Stats>(Stats::NAME, name)
            .expect("stats")
            .state;
        sum.events += s.events;
        sum.bytes += s.bytes;
        sum.turns += s.turns;
        sum.usage.requests += s.usage.requests;
        sum.usage.unreadable += s.usage.unreadable;
        sum.usage.usage.add(&s.usage.usage);
    }
    let c = &t.total.counts;
    assert_eq!(
        (c.events, c.bytes, c.turns),
        (sum.events, sum.bytes, sum.turns)
    );
    assert_eq!(t.events, sum.events);
    let mut by_model = sessionlog::session::tokens::Usage::default();
    let (mut requests, mut unreadable) = (0, 0);
    for m in c.models.values() {
        by_model.add(&m.usage);
        requests += m.requests;
        unreadable += m.unreadable;
    }
    assert_eq!(by_model, sum.usage.usage);
    assert_eq!(
        (requests, unreadable),
        (sum.usage.requests, sum.usage.unreadable)
    );
    t.cache
}

/// Appends `turns` more turns to an existing session.
fn append_turns(store: &Store, name: &str, seed: u64, turns: usize) {
    let mut h = store.open_session_as_is(name).expect("reopen");
    let mut w = Workload::new(seed, WorkloadConfig::default());
    for _ in 0..turns {
        append_turn(&mut h, &mut w);
    }
    h.commit().expect("commit");
}

#[test]
fn every_fixture_is_counted_from_the_checkpoint_as_from_the_whole_log() {
    let Some(root) = sessionlog_testkit::dsh_corpus(
        "crates/sessionlog/tests/store_wide_projections_fold_every_session.rs",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let names = import_every_fixture(&store, &root);
    let full = fresh(dir.path());
    let first = assert_equal_to_a_full_fold(&store, &full);
    assert!(
        matches!(first, CacheUse::Rebuilt(CacheMiss::Missing)),
        "{first:?}"
    );
    assert_eq!(
        assert_equal_to_a_full_fold(&store, &full),
        CacheUse::Hit { folded: 0 }
    );
    let t = totals(&store).total;
    assert!(t.counts.models.len() > 1, "models: {:?}", t.counts.models);
    assert!(t.counts.models.values().any(|m| m.usage.input > 0));
    // Restart repair appends closers to sessions left open: only those are folded again.
    for name in &names {
        let (h, _) = store.open_session(name).expect("open");
        drop(h);
    }
    let full = fresh(dir.path());
    assert!(matches!(
        assert_equal_to_a_full_fold(&store, &full),
        CacheUse::Hit { .. }
    ));
    assert_every_projection_checkpoint_verifies(&store);
}

fn assert_every_projection_checkpoint_verifies(store: &Store) {
    let checks = store.cache_verify_projections().expect("verify");
    assert!(checks.iter().any(|c| c.session.is_none()));
    for c in &checks {
        assert!(
            matches!(c.check, CacheCheck::Ok | CacheCheck::Missing),
            "{c:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn a_generated_store_is_counted_from_any_checkpoint_as_from_the_whole_log(
        seed in any::<u64>(),
        sessions in 1usize..5,
        turns in 1usize..8,
        more in proptest::collection::vec((0usize..5, 1usize..4), 0..4),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts()).expect("store");
        for i in 0..sessions {
            write_generated(&store, &format!("g{i}"), seed ^ i as u64, turns);
        }
        assert_equal_to_a_full_fold(&store, &fresh(dir.path()));
        // Turns appended after the checkpoint, to some sessions, and new sessions.
        for (k, &(i, turns)) in more.iter().enumerate() {
            let name = format!("g{i}");
            if i < sessions {
                append_turns(&store, &name, seed ^ (k as u64 + 7), turns);
            } else if store.view(&name).is_err() {
                write_generated(&store, &name, seed ^ (k as u64 + 11), turns);
            }
            let how = assert_equal_to_a_full_fold(&store, &fresh(dir.path()));
            prop_assert!(matches!(how, CacheUse::Hit { .. }), "{:?}", how);
        }
        assert_every_projection_checkpoint_verifies(&store);
    }
}

#[test]
fn a_crash_at_any_point_of_a_store_wide_checkpoint_write_is_rebuilt_or_used_whole() {
    // The checkpoint write makes at most four directory changes and one write; the first
    // read folds every session and writes it.
    a_crash_at_every_point_of_a_checkpoint_write(
        (6, 2),
        1 << 30,
        &opts,
        &|store| {
            write_generated(store, "a", 4, 4);
            write_generated(store, "b", 5, 3);
        },
        &|store| {
            let _ = store.store_projection::<Totals>(Totals::NAME);
        },
        &assert_equal_to_a_full_fold,
    );
}

#[test]
fn deleted_and_reclaimed_sessions_leave_the_totals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        dir.path(),
        opts().with_log(log_options().with_rewrite_below_live_percent(90)),
    )
    .expect("store");
    for (i, name) in ["keep-1", "gone-1", "keep-2", "gone-2"].iter().enumerate() {
        write_generated(&store, name, 20 + i as u64, 12);
    }
    let full = fresh(dir.path());
    assert!(matches!(
        assert_equal_to_a_full_fold(&store, &full),
        CacheUse::Rebuilt(_)
    ));
    let before = totals(&store).total;
    let gone = full
        .projection::<Stats>(Stats::NAME, "gone-1")
        .expect("stats")
        .state
        .events
        + full
            .projection::<Stats>(Stats::NAME, "gone-2")
            .expect("stats")
            .state
            .events;
    drop(full);

    store.delete_session("gone-1").expect("delete");
    store.delete_session("gone-2").expect("delete");
    let report = store.reclaim().expect("reclaim");
    assert!(
        !report.segments_removed.is_empty() || !report.segments_rewritten.is_empty(),
        "{report:?}"
    );
    let full = fresh(dir.path());
    // The parts of the deleted sessions are dropped from the checkpoint, nothing refolded.
    assert_eq!(
        assert_equal_to_a_full_fold(&store, &full),
        CacheUse::Hit { folded: 0 }
    );
    let after = totals(&store).total;
    assert_eq!(after.sessions, 2);
    assert_eq!(after.counts.events, before.counts.events - gone);

    // A session made again under a deleted name is a new session, folded whole.
    write_generated(&store, "gone-1", 99, 2);
    append_turns(&store, "keep-2", 7, 2);
    let full = fresh(dir.path());
    let how = assert_equal_to_a_full_fold(&store, &full);
    assert!(
        matches!(how, CacheUse::Hit { folded } if folded > 0),
        "{how:?}"
    );
    assert_eq!(totals(&store).total.sessions, 3);
    assert_every_projection_checkpoint_verifies(&store);
}

/// Counts events; `double` makes a fold that disagrees with a checkpoint of the other.
#[derive(Debug, Clone, Copy)]
struct Count {
    double: bool,
    panic_in: Option<&'static str>,
    version: u32,
}

impl Projection for Count {
    type State = u64;

    fn name(&self) -> &str {
        "count"
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn init(&self, _header: &SessionHeader) -> u64 {
        0
    }

    fn apply(&self, n: &mut u64, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let _ = e;
        *n += if self.double { 2 } else { 1 };
        Ok(())
    }

    fn encode(&self, n: &u64, out: &mut Vec<u8>) {
        projecting::encode_count(*n, out);
    }

    fn decode(&self, bytes: &[u8]) -> Result<u64, ProjectionError> {
        projecting::decode_count(bytes)
    }
}

impl StoreProjection for Count {
    type Total = u64;

    fn total(&self, parts: &[(&str, &u64)]) -> u64 {
        if self.panic_in == Some("total") {
            panic!("the consumer's total is broken");
        }
        parts.iter().map(|(_, n)| **n).sum()
    }
}

fn count_opts(count: Count) -> StoreOptions {
    opts().with_projection(count).with_store_projection(count)
}

#[test]
fn cache_verify_finds_a_projection_checkpoint_that_is_damaged_or_folds_differently() {
    let dir = tempfile::tempdir().expect("tempdir");
    let honest = Count {
        double: false,
        panic_in: None,
        version: 1,
    };
    {
        let store = Store::open(dir.path(), count_opts(honest)).expect("store");
        write_generated(&store, "v", 3, 5);
        write_generated(&store, "w", 4, 5);
        // Nothing read yet: the store-wide checkpoint is missing, which is not damage.
        let checks = store.cache_verify_projections().expect("verify");
        let wide: Vec<_> = checks.iter().filter(|c| c.session.is_none()).collect();
        assert_eq!(wide.len(), 2);
        assert!(
            wide.iter().all(|c| c.check == CacheCheck::Missing),
            "{wide:?}"
        );
        let p = store.store_projection::<Count>("count").expect("count");
        assert_eq!(p.total, p.events);
        totals(&store);
        store.projection::<Count>("count", "v").expect("count");
        for c in store.cache_verify_projections().expect("verify") {
            assert_eq!(c.check, CacheCheck::Ok, "{c:?}");
        }
        append_turns(&store, "v", 8, 1);
    }
    // The same name and version with another fold: a checkpoint of the old fold plus the
    // records after it is not what the new fold gives, and verify says so.
    let changed = Count {
        double: true,
        panic_in: None,
        version: 1,
    };
    let store = Store::open_read_only(dir.path(), count_opts(changed)).expect("store");
    let unusable: Vec<_> = store
        .cache_verify_projections()
        .expect("verify")
        .into_iter()
        .filter(|c| matches!(c.check, CacheCheck::Unusable(_)))
        .map(|c| (c.projection, c.session))
        .collect();
    assert!(
        unusable.contains(&("count".into(), Some("v".into()))),
        "{unusable:?}"
    );
    assert!(unusable.contains(&("count".into(), None)), "{unusable:?}");
    // Stats and totals still verify.
    assert!(!unusable.iter().any(|(p, _)| p != "count"), "{unusable:?}");
    drop(store);

    // A flipped byte in the store-wide checkpoint is found, and the next read rebuilds it.
    let path = dir.path().join("cache").join("store.totals.slpw");
    let mut bytes = std::fs::read(&path).expect("checkpoint");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, &bytes).expect("damage");
    let store = Store::open(dir.path(), count_opts(honest)).expect("store");
    let totals_check = |store: &Store| {
        store
            .cache_verify_projections()
            .expect("verify")
            .into_iter()
            .find(|c| c.projection == Totals::NAME && c.session.is_none())
            .expect("totals check")
            .check
    };
    assert!(matches!(totals_check(&store), CacheCheck::Unusable(_)));
    assert!(matches!(
        totals(&store).cache,
        CacheUse::Rebuilt(CacheMiss::Corrupt(_))
    ));
    assert_eq!(totals_check(&store), CacheCheck::Ok);
}

#[test]
fn a_panicking_total_fails_only_its_own_view() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = Count {
        double: false,
        panic_in: Some("total"),
        version: 1,
    };
    let store = Store::open(dir.path(), count_opts(broken)).expect("store");
    write_generated(&store, "p", 3, 3);
    match store.store_projection::<Count>("count") {
        Err(Error::Projection {
            source: ProjectionError::Panicked { during, .. },
            ..
        }) => assert_eq!(during, "total"),
        other => panic!("{other:?}"),
    }
    assert_equal_to_a_full_fold(&store, &fresh(dir.path()));
    assert!(store.projection::<Count>("count", "p").is_ok());
    assert!(matches!(
        store.store_projection::<Totals>("absent"),
        Err(Error::NoSuchProjection(_))
    ));
    assert!(matches!(
        store.store_projection::<Count>(Totals::NAME),
        Err(Error::NoSuchProjection(_))
    ));
}

#[test]
fn a_store_wide_projection_whose_version_changes_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v1 = Count {
        double: false,
        panic_in: None,
        version: 1,
    };
    {
        let store = Store::open(dir.path(), count_opts(v1)).expect("store");
        write_generated(&store, "v", 3, 4);
        let first = store.store_projection::<Count>("count").expect("count");
        assert!(matches!(first.cache, CacheUse::Rebuilt(CacheMiss::Missing)));
        let again = store.store_projection::<Count>("count").expect("count");
        assert_eq!(again.cache, CacheUse::Hit { folded: 0 });
    }
    // Version 2 counts twice per event: a checkpoint of version 1 must not be read as one.
    let v2 = Count {
        double: true,
        version: 2,
        ..v1
    };
    let store = Store::open(dir.path(), count_opts(v2)).expect("store");
    let p = store.store_projection::<Count>("count").expect("count");
    assert!(
        matches!(p.cache, CacheUse::Rebuilt(CacheMiss::Incompatible(_))),
        "{:?}",
        p.cache
    );
    assert_eq!(p.total, 2 * p.events);
    let again = store.store_projection::<Count>("count").expect("count");
    assert_eq!(again.cache, CacheUse::Hit { folded: 0 });
    assert_eq!(again.total, p.total);
}
