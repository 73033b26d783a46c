//! Durable commits while reclaim runs in the background. Two stores are prepared the same way:
//! 128 MiB of generated sessions in 4 MiB segments (`SESSIONLOG_RECLAIM_MIB` sets the size),
//! a random 90% of them deleted, so reclaim has every sealed segment to rewrite. On the first,
//! 64 writer threads make durable (`Sync`) 1 KiB commits, each to its own stream, while a
//! background reclaim (`Log::start_background_reclaim`) runs once through the store; the
//! window is exactly that run. On the second, the same writers run for the same time with no
//! reclaim. Each round does this twice: with a reclaim that never rests (work share 1) and
//! with one at the default work share (`SESSIONLOG_RECLAIM_WORK_SHARE` sets another). Two
//! rounds. Printed: commits/s and commit latency percentiles of both, and
//! the ratios (targets: throughput >= 0.7x, p99 <= 2x of the run without reclaim), with the
//! disk probe.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog_benches::{
    fill_interleaved_sessions, fresh_dir, human_ns, ns, payload, probe, write_json, Percentiles,
    Rng,
};
use sessionlog_log::{Append, Durability, Log, LogOptions, StreamId};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_SESSION: usize = 100;
const CONCURRENT_SESSIONS: usize = 16;
const SEGMENT_BYTES: u64 = 4 << 20;
const WRITERS: usize = 64;

fn store_mib() -> u64 {
    std::env::var("SESSIONLOG_RECLAIM_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

/// A store of interleaved sessions with a seeded random 90% deleted, everything durable.
fn prepare(name: &str) -> (std::path::PathBuf, Log) {
    let dir = fresh_dir(name);
    let options = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    let log = Log::open(&dir, options).expect("open");
    let data = payload(3, RECORD_BYTES);
    let sessions = (store_mib() << 20) as usize / (RECORD_BYTES * RECORDS_PER_SESSION);
    let mut ids = fill_interleaved_sessions(
        &log,
        sessions,
        RECORDS_PER_SESSION,
        CONCURRENT_SESSIONS,
        &data,
    );
    Rng::new(0x5EED).shuffle(&mut ids);
    for s in &ids[..ids.len() * 9 / 10] {
        log.delete_stream(*s, Durability::Buffered).expect("delete");
    }
    log.flush().expect("flush");
    (dir, log)
}

struct Outcome {
    commits: usize,
    seconds: f64,
    latency: Percentiles,
}

/// 64 writers commit durably until `done` says stop; returns what they did.
fn commit_until(log: &Log, done: &(dyn Fn() -> bool + Sync)) -> Outcome {
    let streams: Vec<StreamId> = (0..WRITERS)
        .map(|w| log.create_stream(&format!("writer-{w}")).expect("create"))
        .collect();
    let stop = AtomicBool::new(false);
    let start = Barrier::new(WRITERS + 1);
    let latencies = Mutex::new(Vec::new());
    let data = payload(9, RECORD_BYTES);
    let (started, ended) = std::thread::scope(|scope| {
        for s in &streams {
            let (stop, start, latencies, data) = (&stop, &start, &latencies, &data);
            scope.spawn(move || {
                let mut mine = Vec::new();
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    log.commit(&[Append::new(*s, 1, data)], Durability::Sync)
                        .expect("commit");
                    mine.push(ns(t.elapsed()));
                }
                latencies.lock().expect("latencies").extend(mine);
            });
        }
        start.wait();
        let started = Instant::now();
        while !done() {
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
        (started, Instant::now())
    });
    let mut all = latencies.into_inner().expect("latencies");
    Outcome {
        commits: all.len(),
        seconds: (ended - started).as_secs_f64(),
        latency: Percentiles::of(&mut all),
    }
}

fn describe(what: &str, o: &Outcome) -> serde_json::Value {
    let per_s = o.commits as f64 / o.seconds;
    println!(
        "{what}: {} durable commits in {:.2} s = {per_s:.0}/s; latency p50 {} p99 {} max {}",
        o.commits,
        o.seconds,
        human_ns(o.latency.p50_ns),
        human_ns(o.latency.p99_ns),
        human_ns(o.latency.max_ns)
    );
    json!({ "commits": o.commits, "seconds": o.seconds, "commits_per_s": per_s, "latency": o.latency })
}

/// One round: the workload with a background reclaim working `share` of the time, then
/// without it for as long.
fn round(n: usize, share: f64) -> serde_json::Value {
    let (dir, log) = prepare("reclaim-background-with");
    let reclaim = Arc::new(
        log.start_background_reclaim_paced(Duration::from_secs(3600), share)
            .expect("start"),
    );
    let watched = reclaim.clone();
    let with = commit_until(&log, &move || watched.report().runs >= 1);
    let reclaim = Arc::try_unwrap(reclaim).expect("one handle left").stop();
    assert!(reclaim.error.is_none(), "{:?}", reclaim.error);
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);

    let (dir, log) = prepare("reclaim-background-without");
    let window = Duration::from_secs_f64(with.seconds);
    let began = Instant::now();
    let without = commit_until(&log, &move || began.elapsed() >= window);
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "round {n}, work share {share}: reclaim ran once: {} segments rewritten, {} removed, {:.1} MiB given back, \
         {:.1} MiB of live records copied in {:.2} s ({:.0} MB/s of live data under load)",
        reclaim.segments_rewritten,
        reclaim.segments_removed,
        reclaim.bytes_freed as f64 / 1048576.0,
        reclaim.live_bytes_copied as f64 / 1048576.0,
        with.seconds,
        reclaim.live_bytes_copied as f64 / 1e6 / with.seconds
    );
    let with_json = describe("  with background reclaim", &with);
    let without_json = describe("  without reclaim", &without);
    let throughput_ratio =
        (with.commits as f64 / with.seconds) / (without.commits as f64 / without.seconds);
    let p99_ratio = with.latency.p99_ns as f64 / without.latency.p99_ns.max(1) as f64;
    println!(
        "  ratios with/without: throughput {throughput_ratio:.2}x (target >= 0.7x: {}), p99 \
         {p99_ratio:.2}x (target <= 2x: {})",
        if throughput_ratio >= 0.7 {
            "reached"
        } else {
            "not reached"
        },
        if p99_ratio <= 2.0 {
            "reached"
        } else {
            "not reached"
        },
    );
    json!({
        "work_share": share,
        "with_reclaim": with_json,
        "without_reclaim": without_json,
        "reclaim": {
            "segments_rewritten": reclaim.segments_rewritten,
            "segments_removed": reclaim.segments_removed,
            "bytes_freed": reclaim.bytes_freed,
            "live_bytes_copied": reclaim.live_bytes_copied,
        },
        "throughput_ratio": throughput_ratio,
        "p99_ratio": p99_ratio,
    })
}

fn main() {
    let probe = probe();
    // Each round runs a reclaim that never rests (work share 1) and one at the share a
    // background reclaim works by default (or SESSIONLOG_RECLAIM_WORK_SHARE), each against the
    // workload without reclaim for as long; two rounds, so the spread between them shows how
    // much of a ratio is noise.
    let share = std::env::var("SESSIONLOG_RECLAIM_WORK_SHARE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(sessionlog_log::DEFAULT_WORK_SHARE);
    let rounds: Vec<serde_json::Value> = (1..=2)
        .flat_map(|n| [round(n, 1.0), round(n, share)])
        .collect();
    write_json(
        "reclaim_background.json",
        &json!({
            "probe": probe,
            "store_mib": store_mib(),
            "writers": WRITERS,
            "rounds": rounds,
        }),
    );
}
