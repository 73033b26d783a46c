//! A projection that tallies kinds (`Projection::tallies`) is handed their events in runs
//! (`Projection::tally`), by writers and by reads of the log alike: every event reaches the
//! fold once, in seq order, either applied or in a run of its own type; an event that
//! carries a surface operation is applied whatever its kind; a run is handed over before
//! the next applied event and before the state is checkpointed or handed out; and `stats`,
//! which tallies the kinds whose payload it does not read, counts exactly what a fold that
//! applies every event counts. A tally that panics fails only its own projection.

use proptest::prelude::*;
use sessionlog::projection::{SessionStats, Stats};
use sessionlog::session::codec::kind;
use sessionlog::session::SessionHeader;

mod projecting;
use projecting::{append_turn, import_every_fixture, start_generated};
use sessionlog::{
    CacheUse, Error, Projection, ProjectionError, Store, StoreOptions, StoredEvent, Tally,
};

/// `stats` with every event applied one by one (it tallies nothing): the reference.
struct Applied;

impl Projection for Applied {
    type State = SessionStats;

    fn name(&self) -> &str {
        "stats-applied"
    }

    fn version(&self) -> u32 {
        1
    }

    fn init(&self, header: &SessionHeader) -> SessionStats {
        Stats.init(header)
    }

    fn apply(&self, s: &mut SessionStats, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        Stats.apply(s, e)
    }

    fn encode(&self, s: &SessionStats, out: &mut Vec<u8>) {
        Stats.encode(s, out)
    }

    fn decode(&self, bytes: &[u8]) -> Result<SessionStats, ProjectionError> {
        Stats.decode(bytes)
    }
}

/// What a fold was handed, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Applied {
        seq: u64,
        kind: u8,
    },
    Run {
        kind: u8,
        ty: String,
        first: u64,
        last: u64,
        events: u64,
        bytes: u64,
    },
}

/// Records what it is handed; tallies chunks, step starts and user messages (whose events
/// all carry a surface operation, so none may reach it in a run).
struct Recorder;

const RECORDER: &str = "recorder";

fn tallied_by_the_recorder(k: u8) -> bool {
    matches!(
        k,
        kind::ASSISTANT_CHUNK | kind::STEP_START | kind::USER_MESSAGE
    )
}

impl Projection for Recorder {
    type State = Vec<Seen>;

    fn name(&self) -> &str {
        RECORDER
    }

    fn version(&self) -> u32 {
        1
    }

    fn tallies(&self, k: u8) -> bool {
        tallied_by_the_recorder(k)
    }

    fn init(&self, _header: &SessionHeader) -> Vec<Seen> {
        Vec::new()
    }

    fn apply(&self, seen: &mut Vec<Seen>, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        seen.push(Seen::Applied {
            seq: e.event.seq().get(),
            kind: e.kind,
        });
        Ok(())
    }

    fn tally(&self, seen: &mut Vec<Seen>, t: &Tally<'_>) -> Result<(), ProjectionError> {
        seen.push(Seen::Run {
            kind: t.kind,
            ty: t.event_type.to_owned(),
            first: t.first_seq,
            last: t.last_seq,
            events: t.events,
            bytes: t.record_bytes,
        });
        Ok(())
    }

    fn encode(&self, seen: &Vec<Seen>, out: &mut Vec<u8>) {
        // Only what the checks below read back: the seqs, kinds and runs, as text.
        for s in seen {
            let line = match s {
                Seen::Applied { seq, kind } => format!("a {seq} {kind}\n"),
                Seen::Run {
                    kind,
                    ty,
                    first,
                    last,
                    events,
                    bytes,
                } => format!("r {kind} {ty} {first} {last} {events} {bytes}\n"),
            };
            out.extend_from_slice(line.as_bytes());
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<Vec<Seen>, ProjectionError> {
        let bad = || ProjectionError::Undecodable("not a recording".into());
        let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
        let mut seen = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or_else(bad);
            let k = |i: usize| f.get(i).and_then(|v| v.parse::<u8>().ok()).ok_or_else(bad);
            seen.push(match f.first() {
                Some(&"a") => Seen::Applied {
                    seq: n(1)?,
                    kind: k(2)?,
                },
                Some(&"r") => Seen::Run {
                    kind: k(1)?,
                    ty: f.get(2).ok_or_else(bad)?.to_string(),
                    first: n(3)?,
                    last: n(4)?,
                    events: n(5)?,
                    bytes: n(6)?,
                },
                _ => return Err(bad()),
            });
        }
        Ok(seen)
    }
}

/// Panics in its tally of chunks.
struct Broken;

impl Projection for Broken {
    type State = u64;

    fn name(&self) -> &str {
        "broken"
    }

    fn version(&self) -> u32 {
        1
    }

    fn tallies(&self, k: u8) -> bool {
        k == kind::ASSISTANT_CHUNK
    }

    fn init(&self, _header: &SessionHeader) -> u64 {
        0
    }

    fn apply(&self, n: &mut u64, _e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        *n += 1;
        Ok(())
    }

    fn tally(&self, _n: &mut u64, t: &Tally<'_>) -> Result<(), ProjectionError> {
        panic!("the consumer's tally is broken at {}", t.first_seq);
    }

    fn encode(&self, n: &u64, out: &mut Vec<u8>) {
        projecting::encode_count(*n, out);
    }

    fn decode(&self, bytes: &[u8]) -> Result<u64, ProjectionError> {
        projecting::decode_count(bytes)
    }
}

fn opts(refresh: u64) -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog_testkit::small_segments())
        .with_cache_refresh_events(refresh)
        .with_projection(Stats)
        .with_projection(Applied)
        .with_projection(Recorder)
}

/// Every event of a session of `next` events reached the recording once, in seq order;
/// each run is of one tallied kind that carries no surface operation, of consecutive
/// events (the recorder wants every kind). Returns the runs and the events in them.
fn check_recording(seen: &[Seen], next: u64) -> (usize, u64) {
    let mut expected = 0;
    let (mut runs, mut in_runs) = (0, 0);
    for s in seen {
        match s {
            Seen::Applied { seq, .. } => {
                assert_eq!(*seq, expected, "{s:?}");
                expected += 1;
            }
            Seen::Run {
                kind: k,
                ty,
                first,
                last,
                events,
                bytes,
            } => {
                assert_eq!(*first, expected, "{s:?}");
                assert_eq!(*events, last - first + 1, "{s:?}");
                assert!(*bytes > *events, "{s:?}");
                assert!(tallied_by_the_recorder(*k), "{s:?}");
                assert_ne!(
                    *k,
                    kind::USER_MESSAGE,
                    "an event with a surface operation was tallied: {s:?}"
                );
                let named = match *k {
                    kind::ASSISTANT_CHUNK => "assistant/chunk",
                    _ => "step/start",
                };
                assert_eq!(ty, named, "{s:?}");
                expected = last + 1;
                runs += 1;
                in_runs += events;
            }
        }
    }
    assert_eq!(expected, next, "every event reached the fold");
    (runs, in_runs)
}

fn stats(store: &Store, name: &str) -> (SessionStats, SessionStats) {
    let tallied = store.projection::<Stats>(Stats::NAME, name).expect("stats");
    let applied = store
        .projection::<Applied>("stats-applied", name)
        .expect("stats-applied");
    assert_eq!(tallied.events, applied.events);
    (tallied.state, applied.state)
}

#[test]
fn a_writer_hands_tallied_events_over_in_runs_and_stats_counts_what_applying_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A checkpoint every 64 events splits runs where it is written.
    let store = Store::open(dir.path(), opts(64)).expect("store");
    let (mut h, mut w) = start_generated(&store, "s", 11);
    for turn in 0..30 {
        append_turn(&mut h, &mut w);
        if turn % 4 == 0 {
            h.commit().expect("commit");
        }
        let kept = h.projection::<Stats>(Stats::NAME).expect("kept").clone();
        let applied = h
            .projection::<Applied>("stats-applied")
            .expect("applied")
            .clone();
        assert_eq!(kept, applied, "after turn {turn}");
        let next = h.next_seq().get();
        let seen = h
            .projection::<Recorder>(RECORDER)
            .expect("recording")
            .clone();
        let (runs, in_runs) = check_recording(&seen, next);
        assert!(runs > 0 && in_runs > 0);
    }
    h.commit().expect("commit");
    let next = h.next_seq().get();
    let seen = h
        .projection::<Recorder>(RECORDER)
        .expect("recording")
        .clone();
    let (runs, in_runs) = check_recording(&seen, next);
    // Runs hold many events each: chunks stream in runs of several.
    assert!(
        in_runs >= 2 * runs as u64,
        "{runs} runs of {in_runs} events"
    );
    drop(h);

    // Read from the log (no cache), and from the checkpoints the writer left.
    let full =
        Store::open_read_only(dir.path(), opts(64).with_projection_cache(false)).expect("fresh");
    let folded = full.projection::<Recorder>(RECORDER, "s").expect("folded");
    assert_eq!(folded.cache, CacheUse::Disabled);
    check_recording(&folded.state, next);
    let (tallied, applied) = stats(&full, "s");
    assert_eq!(tallied, applied);
    let (tallied_kept, applied_kept) = stats(&store, "s");
    assert_eq!(tallied_kept, applied_kept);
    assert_eq!(tallied_kept, tallied);
    assert!(tallied.by_type["assistant/chunk"].events > 0);
    assert!(tallied.steps > 0 && tallied.turns > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Any checkpoint interval, any session length, read at any point: the tallied
    /// `stats` equals the applied one, kept by a writer or folded from the log.
    #[test]
    fn stats_tallied_equal_stats_applied_whatever_the_checkpoints(
        seed in any::<u64>(),
        turns in 1usize..12,
        refresh in 1u64..200,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts(refresh)).expect("store");
        let (mut h, mut w) = start_generated(&store, "p", seed);
        for _ in 0..turns {
            append_turn(&mut h, &mut w);
            h.commit().expect("commit");
            let kept = h.projection::<Stats>(Stats::NAME).expect("kept").clone();
            let applied = h.projection::<Applied>("stats-applied").expect("applied").clone();
            prop_assert_eq!(kept, applied);
        }
        drop(h);
        let (tallied, applied) = stats(&store, "p");
        prop_assert_eq!(tallied, applied);
        let full = Store::open_read_only(dir.path(), opts(refresh).with_projection_cache(false))
            .expect("fresh");
        let (tallied, applied) = stats(&full, "p");
        prop_assert_eq!(tallied, applied);
    }
}

#[test]
fn every_fixture_counts_the_same_tallied_and_applied() {
    let Some(root) = sessionlog_testkit::dsh_corpus(
        "crates/sessionlog/tests/tallied_kinds_reach_a_fold_in_runs.rs",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts(16)).expect("store");
    let names = import_every_fixture(&store, &root);
    let mut chunks = 0;
    for name in &names {
        // Folded from the log, then from the checkpoint; then a writer's restart repair
        // appends after it.
        let (tallied, applied) = stats(&store, name);
        assert_eq!(tallied, applied, "{name}");
        let next = tallied.events;
        let seen = store
            .projection::<Recorder>(RECORDER, name)
            .expect("recording");
        check_recording(&seen.state, next);
        let (h, _) = store.open_session(name).expect("open");
        drop(h);
        let (tallied, applied) = stats(&store, name);
        assert_eq!(tallied, applied, "{name} after its repair");
        chunks += tallied
            .by_type
            .get("assistant/chunk")
            .map_or(0, |c| c.events);
    }
    assert!(chunks > 0, "the fixtures hold no chunk");
}

#[test]
fn a_panicking_tally_fails_only_its_own_projection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts(16).with_projection(Broken)).expect("store");
    let (mut h, mut w) = start_generated(&store, "b", 5);
    for _ in 0..3 {
        append_turn(&mut h, &mut w);
    }
    h.commit().expect("the appends stand");
    match h.projection::<Broken>("broken") {
        Err(Error::Projection {
            projection,
            source: ProjectionError::Panicked { during, message },
            ..
        }) => {
            assert_eq!(projection, "broken");
            assert_eq!(during, "tally");
            assert!(message.contains("tally is broken"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let next = h.next_seq().get();
    assert_eq!(
        h.projection::<Stats>(Stats::NAME).expect("stats").events,
        next
    );
    drop(h);
    assert!(matches!(
        store.projection::<Broken>("broken", "b"),
        Err(Error::Projection { .. })
    ));
    let (tallied, applied) = stats(&store, "b");
    assert_eq!(tallied, applied);
}
