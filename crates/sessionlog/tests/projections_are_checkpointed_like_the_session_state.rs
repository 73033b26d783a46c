//! Registered projections are kept like the session's own state: a projection handed back
//! from its checkpoint plus the events after it equals a fold of the whole log, on every
//! fixture and on generated sessions, after a crash at any point of its checkpoint write;
//! a checkpoint of another version is rebuilt; and a fold that panics or fails fails only
//! its own projection.

use std::cell::RefCell;
use std::path::Path;

use proptest::prelude::*;
use sessionlog::cache::CacheMiss;
use sessionlog::projection::{SessionStats, Stats, ToolAudit, ToolCalls, Transcript};
use sessionlog::session::codec::kind;
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};

mod projecting;
use projecting::{
    a_crash_at_every_point_of_a_checkpoint_write, append_turn, append_turn_then,
    import_every_fixture, start_generated, write_generated,
};
use sessionlog::{CacheUse, Error, Projection, ProjectionError, Store, StoreOptions, StoredEvent};

const REFRESH: u64 = 16;

fn log_options() -> sessionlog::LogOptions {
    sessionlog_testkit::small_segments()
}

fn opts() -> StoreOptions {
    StoreOptions::default()
        .with_log(log_options())
        .with_cache_refresh_events(REFRESH)
        .with_projection(Stats)
        .with_projection(ToolAudit)
        .with_projection(Transcript)
}

/// The same store read with no cache at all: every projection folded from the whole log.
fn fresh(dir: &Path) -> Store {
    Store::open_read_only(dir, opts().with_projection_cache(false)).expect("fresh store")
}

fn stats(store: &Store, name: &str) -> sessionlog::Projected<SessionStats> {
    store.projection::<Stats>(Stats::NAME, name).expect("stats")
}

fn audit(store: &Store, name: &str) -> sessionlog::Projected<ToolCalls> {
    store
        .projection::<ToolAudit>(ToolAudit::NAME, name)
        .expect("tool audit")
}

/// The shipped projections of `name` (and the transcript's text) equal those of a fold of the whole log; returns how
/// the stats were built.
fn assert_equal_to_a_full_fold(store: &Store, full: &Store, name: &str) -> CacheUse {
    let s = stats(store, name);
    let f = stats(full, name);
    assert_eq!(f.cache, CacheUse::Disabled);
    assert_eq!(s.state, f.state, "{name}: stats");
    assert_eq!(s.events, f.events);
    assert_eq!(
        audit(store, name).state,
        audit(full, name).state,
        "{name}: tool audit"
    );
    let shown = |store: &Store| {
        let t = store
            .projection::<Transcript>(Transcript::NAME, name)
            .expect("transcript");
        let mut out = Vec::new();
        t.state.write(name, &mut out).expect("write");
        (t.state, out)
    };
    let (transcript, text) = shown(store);
    let (fresh_transcript, fresh_text) = shown(full);
    assert_eq!(transcript, fresh_transcript, "{name}: transcript");
    assert_eq!(text, fresh_text, "{name}: transcript text");
    // The transcript's surface is the session's.
    let nodes = store.view(name).expect("view").surface.nodes().len();
    let heading = String::from_utf8_lossy(&text);
    let on_surface = match nodes {
        1 => "1 message on the surface".to_owned(),
        n => format!("{n} messages on the surface"),
    };
    assert!(
        heading
            .lines()
            .next()
            .is_some_and(|h| h.contains(&on_surface)),
        "{name}: {on_surface}"
    );
    s.cache
}

#[test]
fn every_fixture_projects_from_its_checkpoint_as_from_the_whole_log() {
    let Some(root) = sessionlog_testkit::dsh_corpus(
        "crates/sessionlog/tests/projections_are_checkpointed_like_the_session_state.rs",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let names = import_every_fixture(&store, &root);
    let full = fresh(dir.path());
    let mut calls = 0;
    for name in &names {
        let first = assert_equal_to_a_full_fold(&store, &full, name);
        assert!(
            matches!(first, CacheUse::Rebuilt(CacheMiss::Missing)),
            "{name}: {first:?}"
        );
        let second = assert_equal_to_a_full_fold(&store, &full, name);
        assert_eq!(second, CacheUse::Hit { folded: 0 }, "{name}");
        calls += audit(&store, name).state.calls.len();
        // Restart repair appends closers after the checkpoint; the writer folds them in,
        // and the checkpoint plus the closers still equal the whole log.
        let (h, _) = store.open_session(name).expect("open");
        drop(h);
        assert_equal_to_a_full_fold(&store, &full, name);
    }
    assert!(calls > 20, "the fixtures hold {calls} tool calls");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_generated_session_projects_from_any_checkpoint_as_from_the_whole_log(
        seed in any::<u64>(),
        turns in 1usize..24,
        extra in 0usize..40,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts()).expect("store");
        write_generated(&store, "g", seed, turns);
        let full = fresh(dir.path());
        assert_equal_to_a_full_fold(&store, &full, "g");
        // Events appended after the checkpoint, not yet checkpointed, are folded on top.
        let mut h = store.open_session_as_is("g").expect("reopen");
        let mut w = Workload::new(seed ^ 1, WorkloadConfig::default());
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None).into_iter().take(extra) {
            h.append(e).expect("append");
        }
        h.commit().expect("commit");
        let kept = h.projection::<Stats>(Stats::NAME).expect("kept").clone();
        drop(h);
        let full = fresh(dir.path());
        assert_equal_to_a_full_fold(&store, &full, "g");
        prop_assert_eq!(kept, stats(&full, "g").state);
    }
}

#[test]
fn a_crash_at_any_point_of_a_projection_checkpoint_write_is_rebuilt_or_used_whole() {
    // Writing the checkpoints makes only directory changes (create a file under a
    // temporary name, put it in place; for tool-audit and the transcript first the files of
    // their appended parts) and writes, one a piece: the framing, the checkpoint and the
    // checksum for stats; for tool-audit its entries to a file of their own, then the
    // framing, the list of that part, the rest and the checksum; for the transcript its row
    // text, its rows, its tool names and its shadowings, each to its own file, then the
    // framing, the list of those parts, the rest in its pieces and the checksum. The first
    // read folds the whole log and writes them: 13 directory changes and 18 writes, which
    // the helper checks are no more than the schedule covers; one more of each puts a cut
    // after the last among the runs.
    a_crash_at_every_point_of_a_checkpoint_write(
        (14, 19),
        1 << 30,
        &opts,
        &|store| {
            write_generated(store, "c", 4, 6);
        },
        &|store| {
            let _ = store.projection::<Stats>(Stats::NAME, "c");
            let _ = store.projection::<ToolAudit>(ToolAudit::NAME, "c");
            let _ = store.projection::<Transcript>(Transcript::NAME, "c");
        },
        &|store, full| assert_equal_to_a_full_fold(store, full, "c"),
    );
}

#[test]
fn a_crash_at_any_point_of_a_checkpoint_appended_to_its_file_leaves_one_whole_or_none() {
    // A writer checkpointing every few events appends each checkpoint to the file of the
    // one before as a frame; the crash falls on the last commit: its log write and sync,
    // then its checkpoints (appended to their files, or the first of a generation), 2
    // directory changes and 20 writes in all; one more of each puts a cut after the last.
    let writer = RefCell::new(None);
    a_crash_at_every_point_of_a_checkpoint_write(
        (3, 21),
        4,
        &opts,
        &|store| {
            let (mut h, mut w) = start_generated(store, "c", 9);
            for _ in 0..5 {
                append_turn(&mut h, &mut w);
                h.commit().expect("commit");
            }
            *writer.borrow_mut() = Some((h, w));
        },
        &|_| {
            let (mut h, mut w) = writer.borrow_mut().take().expect("writer");
            append_turn(&mut h, &mut w);
            let _ = h.commit();
        },
        &|store, full| assert_equal_to_a_full_fold(store, full, "c"),
    );
}

#[test]
fn a_reader_beside_a_writer_appending_checkpoints_gets_what_the_writer_had() {
    // A writer commits a turn at a time, checkpointing every few events (each checkpoint a
    // frame appended to its file), while a reader opens the store read-only again and
    // again, as a CLI beside it would, and reads the projections: whatever frame it finds
    // whole or torn, what it gets equals what the writer kept at that event count.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts().with_cache_refresh_events(4)).expect("store");
    let kept = std::sync::Mutex::new(std::collections::HashMap::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let reads = std::sync::atomic::AtomicUsize::new(0);
    let mut seen = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (mut h, mut w) = start_generated(&store, "c", 5);
            // What the writer holds after each append (a reader may see any prefix of the
            // log: buffered appends reach the file before their commit).
            let mut keep = |h: &mut sessionlog::SessionHandle| {
                let stats = h.projection::<Stats>(Stats::NAME).expect("stats").clone();
                let calls = h
                    .projection::<ToolAudit>(ToolAudit::NAME)
                    .expect("tool audit")
                    .clone();
                kept.lock()
                    .expect("kept")
                    .insert(h.next_seq().get(), (stats, calls));
            };
            keep(&mut h);
            for turn in 0..40 {
                // The reader gets a turn between two commits, however the two threads are
                // scheduled.
                let waited = std::time::Instant::now();
                while reads.load(std::sync::atomic::Ordering::SeqCst) < turn
                    && waited.elapsed() < std::time::Duration::from_secs(5)
                {
                    std::thread::yield_now();
                }
                append_turn_then(&mut h, &mut w, &mut keep);
                h.commit().expect("commit");
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok(reader) = Store::open_read_only(dir.path(), opts()) else {
                continue;
            };
            let (Ok(s), Ok(a)) = (
                reader.projection::<Stats>(Stats::NAME, "c"),
                reader.projection::<ToolAudit>(ToolAudit::NAME, "c"),
            ) else {
                continue;
            };
            seen.push((s, a));
            reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let kept = kept.into_inner().expect("kept");
    let from_frames = seen
        .iter()
        .filter(|(s, _)| matches!(s.cache, CacheUse::Hit { .. }))
        .count();
    assert!(
        seen.len() > 10 && from_frames > 0,
        "{} reads, {from_frames} from a checkpoint",
        seen.len()
    );
    for (s, a) in &seen {
        // A read that raced the session's start may find fewer events than the writer
        // first kept.
        let Some((stats, calls)) = kept.get(&s.events) else {
            assert!(
                s.events < kept.keys().min().copied().unwrap_or(0),
                "a read of {} events, which the writer never held",
                s.events
            );
            continue;
        };
        assert_eq!(
            &s.state, stats,
            "stats at {} events ({:?})",
            s.events, s.cache
        );
        assert_eq!(a.events, s.events);
        assert_eq!(
            &a.state, calls,
            "tool audit at {} events ({:?})",
            a.events, a.cache
        );
    }
}

#[test]
fn a_writer_appends_its_checkpoints_to_the_files_of_the_ones_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts().with_cache_refresh_events(4)).expect("store");
    write_generated(&store, "c", 9, 6);
    // Each file holds more than its newest checkpoint: the ones before it, as frames.
    let cache = dir.path().join("cache");
    for (name, section, version) in [
        ("00000000000000000001.slpc", "state", 3),
        ("00000000000000000001.stats.slpv", Stats::NAME, 1),
    ] {
        let bytes = std::fs::read(cache.join(name)).expect("cache file");
        let (_, sections) =
            sessionlog::cache::decode(&bytes, &[(section, version)]).expect("verifies");
        let newest = 48 + 16 + section.len() + sections[0].len() + 4;
        assert!(bytes.len() > newest, "{name}: {} bytes", bytes.len());
    }
    drop(store);
    // The newest is the one read: nothing is folded past it.
    let store = Store::open(dir.path(), opts()).expect("reopen");
    assert_eq!(
        assert_equal_to_a_full_fold(&store, &fresh(dir.path()), "c"),
        CacheUse::Hit { folded: 0 }
    );
}

/// Counts events of the kinds it wants; its version and failure are chosen by the test.
#[derive(Debug, Clone, Copy)]
struct Count {
    version: u32,
    /// Panic on the event that would make the count this.
    panic_at: Option<u64>,
    /// Refuse the event that would make the count this.
    refuse_at: Option<u64>,
    name: &'static str,
}

impl Count {
    fn new(name: &'static str) -> Count {
        Count {
            version: 1,
            panic_at: None,
            refuse_at: None,
            name,
        }
    }
}

impl Projection for Count {
    type State = u64;

    fn name(&self) -> &str {
        self.name
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn wants(&self, tag: u8) -> bool {
        tag != kind::ASSISTANT_CHUNK
    }

    fn init(&self, _header: &SessionHeader) -> u64 {
        0
    }

    fn apply(&self, n: &mut u64, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        assert_ne!(
            e.kind,
            kind::ASSISTANT_CHUNK,
            "a skipped kind reached the fold"
        );
        let seq = e.event.seq().get();
        if self.panic_at == Some(*n + 1) {
            panic!("the consumer's fold is broken at {seq}");
        }
        if self.refuse_at == Some(*n + 1) {
            return Err(ProjectionError::refused(e.event, "not this one"));
        }
        *n += 1;
        Ok(())
    }

    fn encode(&self, n: &u64, out: &mut Vec<u8>) {
        projecting::encode_count(*n, out);
    }

    fn decode(&self, bytes: &[u8]) -> Result<u64, ProjectionError> {
        projecting::decode_count(bytes)
    }
}

#[test]
fn a_projection_whose_version_changes_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store =
            Store::open(dir.path(), opts().with_projection(Count::new("count"))).expect("store");
        write_generated(&store, "v", 3, 8);
        let p = store.projection::<Count>("count", "v").expect("count");
        assert!(matches!(p.cache, CacheUse::Hit { .. }), "{:?}", p.cache);
    }
    let v2 = Count {
        version: 2,
        ..Count::new("count")
    };
    let store = Store::open(dir.path(), opts().with_projection(v2)).expect("store");
    let p = store.projection::<Count>("count", "v").expect("count");
    assert!(
        matches!(p.cache, CacheUse::Rebuilt(CacheMiss::Incompatible(_))),
        "{:?}",
        p.cache
    );
    let again = store.projection::<Count>("count", "v").expect("count");
    assert_eq!(again.cache, CacheUse::Hit { folded: 0 });
    assert_eq!(again.state, p.state);
    // It never saw a chunk, and saw every other event.
    let chunks = store
        .raw_events("v", sessionlog::Seq(0))
        .expect("events")
        .iter()
        .filter(|e| e.event_type() == "assistant/chunk")
        .count() as u64;
    assert!(chunks > 0);
    assert_eq!(p.state + chunks, p.events);
}

#[test]
fn a_panicking_or_failing_fold_fails_only_its_own_projection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let panics = Count {
        panic_at: Some(5),
        ..Count::new("panics")
    };
    let refuses = Count {
        refuse_at: Some(7),
        ..Count::new("refuses")
    };
    let store = Store::open(
        dir.path(),
        opts().with_projection(panics).with_projection(refuses),
    )
    .expect("store");
    let events = write_generated(&store, "p", 9, 6);

    // The writer went on; its other projections and its state are whole.
    let mut h = store.open_session_as_is("p").expect("reopen");
    assert_eq!(h.next_seq().get(), events);
    for name in ["panics", "refuses"] {
        match h.projection::<Count>(name) {
            Err(Error::Projection { projection, .. }) => assert_eq!(projection, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(
        h.projection::<Stats>(Stats::NAME).expect("stats").events,
        events
    );
    drop(h);

    match store.projection::<Count>("panics", "p") {
        Err(Error::Projection {
            source: ProjectionError::Panicked { during, message },
            ..
        }) => {
            assert_eq!(during, "apply");
            assert!(message.contains("broken at"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match store.projection::<Count>("refuses", "p") {
        Err(e @ Error::Projection { .. }) => {
            assert_eq!(e.class(), sessionlog::ErrorClass::Refused);
            assert!(e.to_string().contains("not this one"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let full = fresh(dir.path());
    assert_equal_to_a_full_fold(&store, &full, "p");
    let view = store.view("p").expect("view");
    assert_eq!(view.events, events);
    assert!(store
        .cache_verify()
        .expect("verify")
        .iter()
        .all(|(_, c)| *c == sessionlog::CacheCheck::Ok));
    // Asking for a projection that is not registered, or with another type, is an error.
    assert!(matches!(
        store.projection::<Count>("absent", "p"),
        Err(Error::NoSuchProjection(_))
    ));
    assert!(matches!(
        store.projection::<Count>(Stats::NAME, "p"),
        Err(Error::NoSuchProjection(_))
    ));
}

#[test]
fn a_projection_registered_twice_or_badly_named_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let twice = Store::open(dir.path(), opts().with_projection(Stats));
    assert!(matches!(twice, Err(Error::BadProjection(_))), "{twice:?}");
    let bad = Store::open(dir.path(), opts().with_projection(Count::new("Not/A name")));
    assert!(matches!(bad, Err(Error::BadProjection(_))), "{bad:?}");
}

/// A projection checkpointed less often than the store's refresh interval (the transcript's
/// checkpoint, in a session this short, after a sixteenth more events) left far behind by
/// a writer is checkpointed when the writer goes away, so a reader after it folds fewer
/// than the store's refresh interval past the checkpoint; and what it hands back equals a
/// fold of the whole log.
#[test]
fn a_writer_going_away_checkpoints_a_projection_it_left_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let mut h = projecting::create(&store, "w");
    let mut w = Workload::new(5, WorkloadConfig::default());
    let folded_by_a_reader = || {
        let reader = Store::open_read_only(dir.path(), opts()).expect("reader");
        let t = reader
            .projection::<Transcript>(Transcript::NAME, "w")
            .expect("transcript");
        match t.cache {
            CacheUse::Hit { folded } => folded,
            other => panic!("the transcript was built as {other:?}"),
        }
    };
    // Turns until the transcript's checkpoint lags by several refresh intervals.
    let mut lag = 0;
    while lag < 4 * REFRESH || h.next_seq().get() < 2_000 {
        let next = h.next_seq().get();
        for e in w.turn(next, 1, None) {
            h.append(e).expect("append");
        }
        h.commit().expect("commit");
        lag = folded_by_a_reader();
        assert!(h.next_seq().get() < 100_000, "the checkpoint never lagged");
    }
    drop(h);
    let after = folded_by_a_reader();
    assert!(
        after < REFRESH,
        "a reader after the writer folds {after} events (lagged by {lag} before)"
    );
    let full = fresh(dir.path());
    let reader = Store::open_read_only(dir.path(), opts()).expect("reader");
    assert_equal_to_a_full_fold(&reader, &full, "w");
}

/// Counts the surface events a writer handed over with and without its estimates, and how
/// often it was asked which kinds it wants.
struct Figures {
    name: &'static str,
    reads: bool,
    asked: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Surface events handed over with an estimate, and without one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    with: u64,
    without: u64,
}

impl Projection for Figures {
    type State = Seen;

    fn name(&self) -> &str {
        self.name
    }

    fn version(&self) -> u32 {
        1
    }

    fn wants(&self, tag: u8) -> bool {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        sessionlog::session::is_surface_kind(tag)
    }

    fn reads_estimates(&self) -> bool {
        self.reads
    }

    fn init(&self, _header: &SessionHeader) -> Seen {
        Seen::default()
    }

    fn apply(&self, seen: &mut Seen, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        if !self.reads {
            assert!(e.usage.is_none(), "usage handed to a fold that reads none");
        }
        match e.message_estimate {
            Some(_) => seen.with += 1,
            None => seen.without += 1,
        }
        Ok(())
    }

    fn encode(&self, seen: &Seen, out: &mut Vec<u8>) {
        out.extend_from_slice(&seen.with.to_le_bytes());
        out.extend_from_slice(&seen.without.to_le_bytes());
    }

    fn decode(&self, bytes: &[u8]) -> Result<Seen, ProjectionError> {
        let word = |i: usize| {
            bytes
                .get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| ProjectionError::Undecodable("short".into()))
        };
        if bytes.len() != 16 {
            return Err(ProjectionError::Undecodable("not 16 bytes".into()));
        }
        Ok(Seen {
            with: word(0)?,
            without: word(1)?,
        })
    }
}

#[test]
fn a_writer_hands_its_estimates_only_to_folds_that_read_them_and_asks_for_kinds_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let figures = |name, reads| Figures {
        name,
        reads,
        asked: asked.clone(),
    };
    let store = Store::open(
        dir.path(),
        opts()
            .with_projection_cache(false)
            .with_projection(figures("reads", true))
            .with_projection(figures("ignores", false)),
    )
    .expect("store");
    let mut h = projecting::create(&store, "f");
    let asked_at_create = asked.load(std::sync::atomic::Ordering::Relaxed);
    let mut w = Workload::new(3, WorkloadConfig::default());
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..40 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("append");
        }
    }
    h.commit().expect("commit");
    // Each projection was asked once per kind when the session's slots were set up, and
    // never again while appending.
    assert_eq!(asked_at_create, 2 * 256);
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 2 * 256);
    let reads = *h.projection::<Figures>("reads").expect("reads");
    let ignores = *h.projection::<Figures>("ignores").expect("ignores");
    // The same events reached both; only the one that reads estimates was handed them.
    assert_eq!(reads.with + reads.without, ignores.without);
    assert_eq!(ignores.with, 0);
    assert!(ignores.without > 100, "{ignores:?}");
    // Every surface event appended reaches its fold with the writer's estimate.
    assert_eq!(reads.without, 0, "{reads:?}");
}

/// A result's error is found wherever it is marked: in its block after a long output or
/// before it, or in the result's own `error`; read from the payload index of a writer's
/// events and of events read back from the log alike.
#[test]
fn a_tool_results_error_is_found_in_any_block_of_its_message() {
    use sessionlog::session::{EventInput, Seq, SurfaceOp};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let mut h = projecting::create(&store, "e");
    let t = 1_700_000_000_000i64;
    let long = "x".repeat(20_000);
    let result = |id: &str, blocks: String, error: &str| {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{blocks}]}}{error}}}"#
        )
    };
    let block = |id: &str, text: &str, error: bool| {
        format!(
            r#"{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{text}"}}],"isError":{error}}}"#
        )
    };
    let calls = ["late", "first", "data", "clean"];
    let mut inputs = vec![
        EventInput::new("turn/start", t, r#"{"turn":1}"#),
        EventInput::new("step/start", t, r#"{"turn":1,"step":1}"#),
    ];
    let tool_calls: Vec<String> = calls
        .iter()
        .map(|id| format!(r#"{{"type":"tool-call","id":"{id}","name":"bash","arguments":"{{}}"}}"#))
        .collect();
    inputs.push(
        EventInput::new(
            "assistant/message",
            t,
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"a1","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#,
                tool_calls.join(",")
            ),
        )
        .with_surface_op(SurfaceOp::Append),
    );
    for id in calls {
        inputs.push(EventInput::new(
            "tool/call",
            t,
            format!(r#"{{"turn":1,"step":1,"callId":"{id}","name":"bash","arguments":"{{\"cmd\":\"{long}\"}}"}}"#),
        ));
    }
    // A tool result message holds one block; its flag may follow the output or lead it.
    let results = [
        result("late", block("late", &long, true), ""),
        result(
            "first",
            r#"{"type":"tool-result","toolCallId":"first","isError":true,"content":[{"type":"text","text":"no"}]}"#.to_owned(),
            "",
        ),
        result(
            "data",
            block("data", &long, false),
            r#","error":{"message":"killed"}"#,
        ),
        result("clean", block("clean", &long, false), r#","error":null"#),
    ];
    // Each result cites its call: seqs 3..=6, after the turn, the step and the message.
    for (i, data) in results.into_iter().enumerate() {
        inputs.push(
            EventInput::new("tool/result", t, data)
                .with_surface_op(SurfaceOp::Append)
                .with_sources(vec![Seq(3 + i as u64)]),
        );
    }
    for input in inputs {
        h.append(input).expect("append");
    }
    h.commit().expect("commit");
    let check = |store: &Store, how: &str| {
        let bash = stats(store, "e").state.tools["bash"];
        assert_eq!((bash.calls, bash.results, bash.errors), (4, 4, 3), "{how}");
        let errors: Vec<(String, bool)> = audit(store, "e")
            .state
            .calls
            .iter()
            .map(|c| {
                (
                    c.call_id.clone(),
                    c.result.as_ref().expect("answered").error,
                )
            })
            .collect();
        let expected = [
            ("late", true),
            ("first", true),
            ("data", true),
            ("clean", false),
        ];
        assert_eq!(
            errors,
            expected.map(|(id, e)| (id.to_owned(), e)).to_vec(),
            "{how}"
        );
    };
    check(&store, "the writer's store");
    drop(h);
    store.close().expect("close");
    check(&fresh(dir.path()), "folded from the whole log");
}
