//! Durable appends through the `SessionStore` trait at 64 concurrent sessions: 64 threads,
//! one session each, 1 KiB events, `commit` after every append. sessionlog's engine against
//! the SQLite and DSH JSONL adapters in one run, reported as ratios, next to this disk's
//! `fdatasync` floor.
//!
//! Criterion measures one round (every thread appends and commits once) per store; a
//! fixed-time run of each store afterwards prints events/s and the ratios.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use sessionlog::{Store, StoreOptions};
use sessionlog_adapters::{DshDirStore, SqliteStore};
use sessionlog_session::{EventInput, NewEvent, SessionHeader, SessionStore, SurfaceOp};

const SESSIONS: usize = 64;
const EVENT_BYTES: usize = 1024;
const SUMMARY_SECONDS: f64 = 3.0;

/// A user message whose envelope is about 1 KiB.
fn event() -> EventInput {
    let text = "x".repeat(EVENT_BYTES - 160);
    EventInput::new(
        "user/message",
        1_700_000_000_000,
        format!(
            "{{\"id\":\"m\",\"role\":\"user\",\"source\":{{\"kind\":\"user\"}},\
             \"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}"
        ),
    )
    .with_surface_op(SurfaceOp::Append)
}

fn session_name(i: usize) -> String {
    format!("session-{i:02}")
}

/// A store with 64 sessions, each with its first turn and step open.
fn prepared(kind: &str, dir: &Path) -> Arc<dyn SessionStore> {
    let store: Arc<dyn SessionStore> = match kind {
        "sessionlog" => {
            Arc::new(Store::open(dir.join("store"), StoreOptions::default()).expect("store"))
        }
        "sqlite" => Arc::new(SqliteStore::open(dir.join("sessions.db")).expect("sqlite")),
        "dsh" => Arc::new(DshDirStore::open(dir.join("dsh")).expect("dsh")),
        _ => unreachable!("unknown store kind {kind}"),
    };
    // Each session's turn and step are open, so every appended user message is valid.
    let opening = [
        EventInput::new("turn/start", 1_700_000_000_000, r#"{"turn":1}"#),
        EventInput::new("step/start", 1_700_000_000_000, r#"{"turn":1,"step":1}"#),
    ];
    let opening: Vec<NewEvent<'_>> = opening.iter().map(NewEvent::Input).collect();
    for i in 0..SESSIONS {
        let name = session_name(i);
        store
            .create(&name, &SessionHeader::new(&name, 1_700_000_000_000, None))
            .expect("create");
        store.append(&name, &opening, 0).expect("open a turn");
        store.commit(&name).expect("commit");
    }
    store
}

/// Runs 64 writers; each appends and commits `rounds` times (or until `deadline`).
/// Returns total events appended and the wall time.
fn run(store: &Arc<dyn SessionStore>, rounds: u64, deadline: Option<Duration>) -> (u64, Duration) {
    let barrier = Arc::new(Barrier::new(SESSIONS + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let (store, barrier, stop, total) =
                (store.clone(), barrier.clone(), stop.clone(), total.clone());
            std::thread::spawn(move || {
                let name = session_name(i);
                let event = event();
                let mut next = store.next_seq(&name).expect("next seq");
                barrier.wait();
                let mut done = 0;
                while done < rounds && !stop.load(Ordering::Relaxed) {
                    next = store
                        .append(&name, &[NewEvent::Input(&event)], next)
                        .expect("append");
                    store.commit(&name).expect("commit");
                    done += 1;
                }
                total.fetch_add(done, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    if let Some(limit) = deadline {
        std::thread::sleep(limit);
        stop.store(true, Ordering::Relaxed);
    }
    for t in threads {
        t.join().expect("writer");
    }
    (total.load(Ordering::Relaxed), start.elapsed())
}

/// Sequential 4 KiB write + `fdatasync` per second on this disk, for one second.
fn fsync_floor(dir: &Path) -> f64 {
    let mut file = File::create(dir.join("probe")).expect("probe");
    let block = [7u8; 4096];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        file.write_all(&block).expect("write");
        file.sync_data().expect("sync");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

const KINDS: [&str; 3] = ["sessionlog", "sqlite", "dsh"];

fn criterion_rounds(c: &mut Criterion, root: &Path) {
    let mut group = c.benchmark_group("durable_appends_64_sessions");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(SESSIONS as u64));
    for kind in KINDS {
        let dir = tempfile::tempdir_in(root).expect("tempdir");
        let store = prepared(kind, dir.path());
        group.bench_function(kind, |b| {
            b.iter_custom(|rounds| run(&store, rounds, None).1);
        });
    }
    group.finish();
}

fn summary(root: &Path) {
    let floor = fsync_floor(root);
    let mut rates = Vec::new();
    for kind in KINDS {
        let dir = tempfile::tempdir_in(root).expect("tempdir");
        let store = prepared(kind, dir.path());
        let (events, took) = run(
            &store,
            u64::MAX,
            Some(Duration::from_secs_f64(SUMMARY_SECONDS)),
        );
        rates.push((kind, events as f64 / took.as_secs_f64()));
    }
    println!("\ndurable appends, {SESSIONS} sessions x 1 thread, {EVENT_BYTES} B events, commit after each:");
    println!("  fdatasync floor (1 thread, 4 KiB writes): {floor:.0}/s");
    for (kind, rate) in &rates {
        println!("  {kind:<11} {rate:>9.0} events/s");
    }
    let engine = rates[0].1;
    for (kind, rate) in &rates[1..] {
        println!("  sessionlog / {kind}: {:.1}x", engine / rate);
    }
}

fn main() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).to_path_buf();
    let mut c = Criterion::default().configure_from_args();
    criterion_rounds(&mut c, &root);
    c.final_summary();
    // Only a full run prints the fixed-time comparison; `--list`, `--test` and filtered runs
    // skip it.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filtered = args.iter().any(|a| !a.starts_with('-'));
    if !filtered && !args.iter().any(|a| a == "--list" || a == "--test") {
        summary(&root);
    }
}
