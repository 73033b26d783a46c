//! Consumer projections of a 1,000,000-event session: handing one back from its checkpoint
//! (against folding it from the whole log), `show` and `stats --session` as the CLI runs them
//! (a read-only open, the projection from its checkpoint, the output written) against the
//! whole-session load that every `show` began with before the transcript was a projection,
//! and each projection's upkeep while appending (buffered appends with and without it,
//! taking turns of a thousand events). Figures come with the probe and as ratios to baselines of the same
//! run; every store is removed at the end.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use sessionlog::projection::{Stats, ToolAudit, Totals, Transcript};
use sessionlog::session::{EventInput, SessionHeader};
use sessionlog::{Access, CacheUse, LogOptions, Projection, SessionHandle, Store, StoreOptions};
use sessionlog_benches::{
    fill_long_session, fresh_dir, human_ns, ns, probe, thread_cpu, LongSession,
};

/// Events of the long session; `SESSIONLOG_PROJECTION_BENCH_EVENTS` sets fewer for a quick
/// try.
fn long_events() -> u64 {
    std::env::var("SESSIONLOG_PROJECTION_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}
/// Events appended per upkeep round.
const UPKEEP_EVENTS: usize = 200_000;
/// A writer commits this often while appending (each commit may write checkpoints);
/// `SESSIONLOG_PROJECTION_COMMIT_EVERY` sets another interval (at 1,024 or less, the
/// store's default `cache_refresh_events`, every commit past that many events writes
/// checkpoints). Read from the environment once, not in the appends measured.
fn commit_every() -> usize {
    static EVERY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("SESSIONLOG_PROJECTION_COMMIT_EVERY")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(4096)
    })
}
const RUNS: usize = 7;
/// `SESSIONLOG_PROJECTION_UPKEEP_AFTER=N`: each upkeep store's session first holds the long
/// session's first N events (whole turns, so a few more), appended and committed before the
/// measured appends, which then continue the same session. The upkeep is then that of a
/// long session, whose checkpoints are larger and, for the transcript, due more often than
/// a young one's. Default 0: the measured appends begin the session.
fn upkeep_after() -> u64 {
    std::env::var("SESSIONLOG_PROJECTION_UPKEEP_AFTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn options() -> StoreOptions {
    StoreOptions::default()
        .with_projection(Stats)
        .with_projection(ToolAudit)
        .with_projection(Transcript)
        .with_store_projection(Totals)
}

fn open_read_only(dir: &Path, cache: bool) -> Store {
    Store::open_with_access(
        std::sync::Arc::new(sessionlog_log::RealStorage),
        dir,
        options().with_projection_cache(cache),
        Access::ReadOnly,
    )
    .expect("open read-only")
}

/// The long session, written by one writer keeping all three projections and committed at
/// the end; the writer going away checkpoints the projections it left behind by the
/// store's refresh interval or more, as any writer does, so a read folds fewer events than
/// that past each checkpoint. The session's own state and the store-wide totals are then
/// read once by a writable open, which checkpoints them. Returns the events and the
/// generator, to grow the session further.
fn build(dir: &Path) -> (u64, LongSession) {
    let store = Store::open(dir, options()).expect("store");
    let mut h = store
        .create_session("long", SessionHeader::new("long", 1, None))
        .expect("create");
    let mut traffic = LongSession::start(&mut h);
    traffic.fill(&mut h, long_events());
    h.commit().expect("commit");
    let events = h.next_seq().get();
    drop(h);
    let _ = store.view("long").expect("view");
    let _ = store
        .store_projection::<Totals>(Totals::NAME)
        .expect("totals");
    store.close().expect("close");
    (events, traffic)
}

/// The projections' checkpoints at their farthest behind: a writer resumes the long session
/// (whose checkpoints are fresh) and appends whole turns, committing only at the end, as
/// long as they keep the transcript's checkpoint from falling due (as its `checkpoint_every`
/// says of the writer's state); a read-only open beside it (the writer stays open, as a
/// live writer does, or as a crashed one left the store) hands the transcript back, then
/// the tool audit (due at the same point on a long session). The same for the stats (due
/// every refresh interval). Returns the events the session held
/// at the end and, per projection, the time and the events folded past its checkpoint.
fn hand_backs_behind(
    dir: &Path,
    traffic: &mut LongSession,
) -> (u64, [(&'static str, Duration, u64); 3]) {
    let refresh = options().cache_refresh_events;
    let store = Store::open(dir, options()).expect("store");
    let (mut h, closers) = store.open_session("long").expect("resume");
    assert!(closers.is_empty(), "the long session was left whole");
    // The checkpoints are fresh.
    let checkpointed = h.next_seq().get();
    let transcript_due = Transcript.checkpoint_every(
        h.projection::<Transcript>(Transcript::NAME)
            .expect("transcript"),
        refresh,
        checkpointed,
    );
    let audit_due = ToolAudit.checkpoint_every(
        h.projection::<ToolAudit>(ToolAudit::NAME)
            .expect("tool audit"),
        refresh,
        checkpointed,
    );
    // Grows the session short of `due` events past `from`, commits, and hands `P` back,
    // which must have folded most of them.
    let mut behind = |from: u64,
                      due: u64,
                      hand_back: fn(&Path, &str, u64) -> (Duration, u64),
                      name| {
        traffic.fill_short_of(&mut h, from + due);
        h.commit().expect("commit");
        let (took, past) = hand_back(dir, name, due);
        let appended = h.next_seq().get() - from;
        assert!(
            past == appended && past > due * 3 / 4,
            "{name}: folded {past} events past its checkpoint of the {appended} appended, not its farthest"
        );
        (name, took, past)
    };
    let transcript = behind(
        checkpointed,
        transcript_due,
        hand_back_from::<Transcript>,
        Transcript::NAME,
    );
    // Due at the same point, or later: nothing more to append, or a few turns.
    let tool_audit = behind(
        checkpointed,
        audit_due,
        hand_back_from::<ToolAudit>,
        ToolAudit::NAME,
    );
    // That commit checkpointed the stats.
    let stats = behind(
        checkpointed + transcript.2,
        refresh,
        hand_back_from::<Stats>,
        Stats::NAME,
    );
    let events = h.next_seq().get();
    drop(h);
    store.close().expect("close");
    (events, [stats, tool_audit, transcript])
}

/// Best of `RUNS` of `f`.
fn best(mut f: impl FnMut() -> Duration) -> Duration {
    (0..RUNS).map(|_| f()).min().unwrap_or_default()
}

/// Handing projection `P` back from a store opened read-only (the open not timed), and the
/// events folded past its checkpoint (fewer than the store's refresh interval: a writer
/// going away leaves none that far behind).
fn hand_back<P: Projection>(dir: &Path, name: &str, cache: bool) -> (Duration, u64) {
    if cache {
        hand_back_from::<P>(dir, name, options().cache_refresh_events)
    } else {
        let took = best(|| {
            let store = open_read_only(dir, false);
            let started = Instant::now();
            let p = store.projection::<P>(name, "long").expect("projection");
            let elapsed = started.elapsed();
            assert!(
                matches!(p.cache, CacheUse::Disabled),
                "{name}: {:?}",
                p.cache
            );
            std::hint::black_box(&p.state);
            elapsed
        });
        (took, 0)
    }
}

/// Handing projection `P` back from its checkpoint through a read-only open (the open not
/// timed), which must fold fewer than `most` events past it; and how many it folded.
fn hand_back_from<P: Projection>(dir: &Path, name: &str, most: u64) -> (Duration, u64) {
    let mut past = 0;
    let took = best(|| {
        let store = open_read_only(dir, true);
        let started = Instant::now();
        let p = store.projection::<P>(name, "long").expect("projection");
        let elapsed = started.elapsed();
        match &p.cache {
            CacheUse::Hit { folded } if *folded < most => past = *folded,
            other => panic!("{name}: built as {other:?}"),
        }
        std::hint::black_box(&p.state);
        elapsed
    });
    (took, past)
}

/// The store-wide `totals` from a store opened read-only (the open not timed).
fn totals(dir: &Path, cache: bool) -> Duration {
    best(|| {
        let store = open_read_only(dir, cache);
        let started = Instant::now();
        let p = store
            .store_projection::<Totals>(Totals::NAME)
            .expect("totals");
        let elapsed = started.elapsed();
        match (&p.cache, cache) {
            (CacheUse::Hit { folded: 0 }, true) | (CacheUse::Disabled, false) => {}
            (other, _) => panic!("totals: built as {other:?}"),
        }
        std::hint::black_box(&p.total);
        elapsed
    })
}

/// A read-only open of the store, which every CLI read begins with.
fn open_only(dir: &Path) -> Duration {
    best(|| {
        let started = Instant::now();
        let store = open_read_only(dir, true);
        let elapsed = started.elapsed();
        std::hint::black_box(store.log_reader().recovery_report().active_records);
        elapsed
    })
}

/// `sessionlog show`: open read-only, the transcript, written out.
fn show(dir: &Path) -> Duration {
    best(|| show_once(dir))
}

/// One `show`.
#[inline(never)]
fn show_once(dir: &Path) -> Duration {
    let started = Instant::now();
    let store = open_read_only(dir, true);
    let t = store
        .projection::<Transcript>(Transcript::NAME, "long")
        .expect("transcript");
    let mut out = std::io::BufWriter::new(std::io::sink());
    t.state.write("long", &mut out).expect("write");
    out.flush().expect("flush");
    started.elapsed()
}

/// `sessionlog stats --session`: open read-only, the stats projection, formatted.
fn stats(dir: &Path) -> Duration {
    best(|| {
        let started = Instant::now();
        let store = open_read_only(dir, true);
        let s = store
            .projection::<Stats>(Stats::NAME, "long")
            .expect("stats");
        std::hint::black_box(format!("{:?}", s.state));
        started.elapsed()
    })
}

/// What every `show` began with before: a read-only open and the whole session loaded.
fn load_session(dir: &Path) -> Duration {
    best(|| {
        let started = Instant::now();
        let store = open_read_only(dir, false);
        let session = sessionlog_benches::whole_session(&store, "long");
        std::hint::black_box(session.next_seq());
        started.elapsed()
    })
}

/// `UPKEEP_EVENTS` events of the long session, as inputs to append again, from the first
/// turn that begins at seq `after` or later (where the whole turns holding `after` events
/// end; the start of the session if `after` is 0), and that turn's seq.
fn inputs(dir: &Path, after: u64) -> (u64, Vec<EventInput>) {
    let store = open_read_only(dir, false);
    let mut events = store
        .events("long", sessionlog::Seq(after))
        .expect("events")
        .peekable();
    let mut from = after;
    while after > 0
        && events
            .next_if(|e| e.as_ref().is_ok_and(|e| e.stored_type() != "turn/start"))
            .is_some()
    {
        from += 1;
    }
    let inputs = events
        .take(UPKEEP_EVENTS)
        .map(|e| {
            let e = e.expect("event");
            let mut input =
                EventInput::new(e.stored_type(), e.time(), e.stored_data().raw().to_owned());
            input.surface_op = e.surface_op();
            input.source_event_seqs = e
                .source_event_seqs()
                .map(<[sessionlog::session::Seq]>::to_vec);
            input.ignorable = e.is_ignorable();
            input
        })
        .collect();
    (from, inputs)
}

/// Where the upkeep store of `projection` (or of none) lives under `root`.
fn upkeep_dir(root: &Path, projection: Option<&str>) -> std::path::PathBuf {
    root.join(projection.unwrap_or("none"))
}

/// A new store in `root` keeping `projection` (or none), with one new session to append to,
/// which holds the long session's first `after` events (none if 0), committed: `after` must
/// end a whole turn, as the seq [`inputs`] returns does.
fn upkeep_store(root: &Path, projection: Option<&str>, after: u64) -> (Store, SessionHandle) {
    let dir = upkeep_dir(root, projection);
    let _ = std::fs::remove_dir_all(&dir);
    let log = LogOptions::default()
        .with_preallocate(false)
        .with_segment_size_bytes(16 << 20);
    let mut options = StoreOptions::default().with_log(log);
    options = match projection {
        Some(Stats::NAME) => options.with_projection(Stats),
        Some(ToolAudit::NAME) => options.with_projection(ToolAudit),
        Some(Transcript::NAME) => options.with_projection(Transcript),
        _ => options,
    };
    let store = Store::open(&dir, options).expect("store");
    let mut h = store
        .create_session("u", SessionHeader::new("u", 1, None))
        .expect("create");
    if after > 0 {
        fill_long_session(&mut h, after);
        h.commit().expect("commit");
    }
    assert_eq!(
        h.next_seq().get(),
        after,
        "the measured appends continue the session where its whole turns end"
    );
    (store, h)
}

/// Appends `inputs` to the session of `h`, committing after every [`commit_every`]-th
/// event of the session (counting from `appended`, the events appended to it before).
#[inline(never)]
fn append_chunk(h: &mut SessionHandle, inputs: &[EventInput], appended: usize) {
    let every = commit_every();
    for (i, input) in inputs.iter().enumerate() {
        h.append(input.clone()).expect("append");
        if (appended + i + 1) % every == 0 {
            h.commit().expect("commit");
        }
    }
}

/// Appends `inputs` to the session of `h`, committing every [`commit_every`] events, and
/// closes its store. Reads no clock: under
/// `valgrind --tool=callgrind --toggle-collect='*append_all*'` its instructions are the
/// appends' (callgrind does not follow a clock read through the vDSO).
#[inline(never)]
fn append_all(store: Store, mut h: SessionHandle, inputs: &[EventInput]) {
    append_chunk(&mut h, inputs, 0);
    h.commit().expect("commit");
    drop(h);
    drop(store);
}

/// Events each configuration appends before the next takes its turn.
const CHUNK: usize = 1024;

/// One pass of the upkeep measurement: a store per configuration, all open at once, each
/// appending `inputs` in turns of `CHUNK` events (the order of the turns rotated from chunk
/// to chunk). A slower or faster stretch of the machine lasting longer than a few
/// milliseconds thus falls on every configuration alike. Returns each configuration's
/// thread CPU time for all of its appends and commits.
fn upkeep_pass(
    root: &Path,
    inputs: &[EventInput],
    configs: &[Option<&str>],
    from: u64,
) -> Vec<Duration> {
    let mut open: Vec<(Store, SessionHandle)> = configs
        .iter()
        .map(|c| upkeep_store(root, *c, from))
        .collect();
    let mut cpu = vec![Duration::ZERO; configs.len()];
    for (n, chunk) in inputs.chunks(CHUNK).enumerate() {
        for k in 0..configs.len() {
            let i = (n + k) % configs.len();
            let started = thread_cpu();
            append_chunk(&mut open[i].1, chunk, n * CHUNK);
            cpu[i] += thread_cpu().saturating_sub(started);
        }
    }
    for (i, (_, h)) in open.iter_mut().enumerate() {
        let started = thread_cpu();
        h.commit().expect("commit");
        cpu[i] += thread_cpu().saturating_sub(started);
    }
    drop(open);
    for c in configs {
        let _ = std::fs::remove_dir_all(upkeep_dir(root, *c));
    }
    cpu
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The best rate: the round least disturbed by other work on the machine.
fn top(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// `SESSIONLOG_PROJECTION_UPKEEP_ONLY=none|stats|tool-audit|transcript`: appends the events
/// of a freshly generated session of `UPKEEP_EVENTS` (or `SESSIONLOG_PROJECTION_BENCH_EVENTS`,
/// if fewer) events once, keeping that projection (or none), and exits; with
/// `SESSIONLOG_PROJECTION_UPKEEP_AFTER=N`, to a session holding the first N events (whole
/// turns) before them, appended outside `append_all`. Run under `valgrind --tool=callgrind --toggle-collect='*append_all*'`,
/// the instructions of each configuration give a projection's upkeep per appended event,
/// a figure that other work on the machine does not disturb.
fn upkeep_only(config: &str) {
    // A directory of its own per configuration, so that configurations may be counted at
    // the same time.
    let dir = fresh_dir(&format!("projections-upkeep-only-{config}"));
    let store = Store::open(&dir, StoreOptions::default()).expect("store");
    let mut h = store
        .create_session("long", SessionHeader::new("long", 1, None))
        .expect("create");
    let after = upkeep_after();
    fill_long_session(&mut h, after + long_events().min(UPKEEP_EVENTS as u64));
    h.commit().expect("commit");
    drop(h);
    store.close().expect("close");
    let projection = (config != "none").then_some(config);
    let (from, inputs) = inputs(&dir, after);
    let (upkeep, u) = upkeep_store(&dir.join("upkeep"), projection, from);
    append_all(upkeep, u, &inputs);
    let _ = std::fs::remove_dir_all(&dir);
    println!("{config}: {} events appended", inputs.len());
}

/// `SESSIONLOG_PROJECTION_SHOW_ONLY=1`: builds the long session (of
/// `SESSIONLOG_PROJECTION_BENCH_EVENTS` events, if set), runs `show` on it once and exits.
/// Run under `valgrind --tool=callgrind --toggle-collect='*show_once*'`, the instructions
/// of `show` (the kernel's copying of file bytes aside), for profiling.
fn show_only() {
    let dir = fresh_dir("projections-show-only");
    let (events, _) = build(&dir);
    let took = show_once(&dir);
    println!("show of a {events}-event session: {}", human_ns(ns(took)));
    // `SESSIONLOG_PROJECTION_SHOW_ONLY=N` (N > 1): N more, each split into its parts.
    let more: usize = std::env::var("SESSIONLOG_PROJECTION_SHOW_ONLY")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    for _ in 1..more {
        let started = Instant::now();
        let store = open_read_only(&dir, true);
        let opened = started.elapsed();
        let t = store
            .projection::<Transcript>(Transcript::NAME, "long")
            .expect("transcript");
        let handed = started.elapsed();
        let mut out = std::io::BufWriter::new(std::io::sink());
        t.state.write("long", &mut out).expect("write");
        out.flush().expect("flush");
        let all = started.elapsed();
        println!(
            "show {}: open {}, transcript handed back {}, written {}",
            human_ns(ns(all)),
            human_ns(ns(opened)),
            human_ns(ns(handed - opened)),
            human_ns(ns(all - handed))
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    commit_every();
    if let Ok(config) = std::env::var("SESSIONLOG_PROJECTION_UPKEEP_ONLY") {
        return upkeep_only(&config);
    }
    if std::env::var_os("SESSIONLOG_PROJECTION_SHOW_ONLY").is_some() {
        return show_only();
    }
    let probe = probe();
    let dir = fresh_dir("projections-1m");
    let started = Instant::now();
    let (events, mut traffic) = build(&dir);
    println!(
        "built a {events}-event session keeping three projections in {:.1?}",
        started.elapsed()
    );

    let hand_backs = [
        (
            Stats::NAME,
            hand_back::<Stats>(&dir, Stats::NAME, true),
            hand_back::<Stats>(&dir, Stats::NAME, false),
        ),
        (
            ToolAudit::NAME,
            hand_back::<ToolAudit>(&dir, ToolAudit::NAME, true),
            hand_back::<ToolAudit>(&dir, ToolAudit::NAME, false),
        ),
        (
            Transcript::NAME,
            hand_back::<Transcript>(&dir, Transcript::NAME, true),
            hand_back::<Transcript>(&dir, Transcript::NAME, false),
        ),
    ];
    let totals_times = (totals(&dir, true), totals(&dir, false));
    let open_time = open_only(&dir);
    let show_time = show(&dir);
    let stats_time = stats(&dir);
    let load_time = load_session(&dir);
    let (events_behind, behind) = hand_backs_behind(&dir, &mut traffic);

    let upkeep_root = fresh_dir("projections-upkeep");
    let (from, inputs) = inputs(&dir, upkeep_after());
    let configs = [
        None,
        Some(Stats::NAME),
        Some(ToolAudit::NAME),
        Some(Transcript::NAME),
    ];
    // Each pass is a fresh store per configuration; the configurations take turns within
    // it (see `upkeep_pass`), so each pass gives a ratio of the same stretch of time.
    let passes: Vec<Vec<Duration>> = (0..RUNS)
        .map(|_| upkeep_pass(&upkeep_root, &inputs, &configs, from))
        .collect();
    let _ = std::fs::remove_dir_all(&upkeep_root);
    let _ = std::fs::remove_dir_all(&dir);

    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("{}", probe.summary());
    println!("a projection of the {events}-event session handed back (best of {RUNS}, store open not timed):");
    for (name, (checkpoint, past), (cold, _)) in hand_backs {
        println!(
            "  {name:<11} from its checkpoint {:>10} ({past} events folded past it); folded from the whole log {:>10}; ratio {:.4}x",
            human_ns(ns(checkpoint)),
            human_ns(ns(cold)),
            r(checkpoint, cold)
        );
    }
    println!(
        "the same, each checkpoint at its farthest behind (a writer beside; {events_behind} events at the end; best of {RUNS}):"
    );
    for (name, took, past) in behind {
        println!(
            "  {name:<11} from its checkpoint {:>10} ({past} events folded past it)",
            human_ns(ns(took))
        );
    }
    println!(
        "  totals      from its checkpoint {:>10}; folded from the whole log {:>10}; ratio {:.4}x (store-wide, over the one session)",
        human_ns(ns(totals_times.0)),
        human_ns(ns(totals_times.1)),
        r(totals_times.0, totals_times.1)
    );
    println!(
        "the CLI's reads (best of {RUNS}, read-only open included; the open alone {}):",
        human_ns(ns(open_time))
    );
    println!(
        "  show (transcript written to a sink) {:>10}; stats --session {:>10}; the whole-session load every show began with before {:>10}",
        human_ns(ns(show_time)),
        human_ns(ns(stats_time)),
        human_ns(ns(load_time))
    );
    println!(
        "  ratios to that load (a lower bound of the old show): show {:.4}x, stats {:.4}x",
        r(show_time, load_time),
        r(stats_time, load_time)
    );
    let rate = |cpu: Duration| inputs.len() as f64 / cpu.as_secs_f64().max(1e-9);
    let base: Vec<f64> = passes.iter().map(|p| rate(p[0])).collect();
    println!(
        "upkeep: buffered appends of {} events to a session holding {from} before them, a commit every {}, the configurations taking turns of {CHUNK} events, {RUNS} passes, per second of the appending thread's CPU time:",
        inputs.len(),
        commit_every()
    );
    println!(
        "  no projection median {:.0} events/s (passes {:.0} to {:.0})",
        median(base.clone()),
        base.iter().copied().fold(f64::INFINITY, f64::min),
        top(&base)
    );
    for (i, config) in configs.iter().enumerate().skip(1) {
        // A pass's ratio: the configuration's rate to the baseline's over the same turns.
        let ratios: Vec<f64> = passes
            .iter()
            .map(|p| p[0].as_secs_f64() / p[i].as_secs_f64())
            .collect();
        let m = median(ratios.clone());
        println!(
            "  {:<13} median of the passes' ratios {m:.3}x (upkeep {:.1}% of append throughput); passes {:.3}x to {:.3}x",
            config.unwrap_or("?"),
            (1.0 - m) * 100.0,
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            top(&ratios)
        );
    }
}
