//! Compression of sealed segments (spec: segment.md#compressed-segments), in one run against
//! the same store uncompressed: bytes per event of one long generated agent session, beside
//! the same session as JSONL and as JSONL compressed with zstd (DeepSeek Harness's
//! `session.vN.jsonl.zstd`); warm point reads by seq from sealed segments; a cold `view`
//! (projection cache deleted); and the time reclaim takes to compress.
//!
//! `SESSIONLOG_COMPRESSION_EVENTS` sets the session's length (default 600,000: with 64 MiB
//! segments, four sealed segments and the active one); `SESSIONLOG_COMPRESSION_LEVEL` the zstd
//! level the store compresses at (default 3, zstd's default; 1 to 19).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;
use sessionlog::{SessionHeader, Store, StoreOptions};
use sessionlog_benches::{
    dir_bytes, fill_compare_session, fresh_dir, human_ns, point_read_latencies, probe,
    process_cpu_ns, write_json, Probe, Rng,
};
use sessionlog_log::{Compression, Log, LogOptions, Seq, StreamId};

const SESSION: &str = "long-session";
const KEYS: usize = 10_000;
const TIMED_READS: usize = 50_000;
/// zstd level DeepSeek Harness-like files are compared at: zstd's default.
const JSONL_ZSTD_LEVEL: i32 = 3;

fn level_wanted() -> i32 {
    std::env::var("SESSIONLOG_COMPRESSION_LEVEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// The store reopened with compression on, at zstd `level`.
fn open_compressed(dir: &Path, level: i32) -> Log {
    let compression = Compression::Zstd { level };
    Log::open(dir, LogOptions::default().with_compression(compression))
        .expect("open with compression")
}

fn events_wanted() -> u64 {
    std::env::var("SESSIONLOG_COMPRESSION_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600_000)
}

/// Builds the session in a store at `dir` and returns its events' JSONL (header line first).
fn build(dir: &Path, events: u64) -> (u64, Vec<u8>) {
    let store = Store::open(dir, StoreOptions::default()).expect("open");
    let header = SessionHeader::new(SESSION, 1_700_000_000_000, Some("/work"));
    let mut jsonl = header.raw().as_bytes().to_vec();
    jsonl.push(b'\n');
    let mut h = store.create_session(SESSION, header).expect("create");
    fill_compare_session(&mut h, events, Some(32));
    let stored = h.next_seq().get();
    for e in h.events_from(sessionlog::Seq(0)).expect("events") {
        jsonl.extend_from_slice(e.raw().as_bytes());
        jsonl.push(b'\n');
    }
    drop(h);
    store.close().expect("close");
    (stored, jsonl)
}

/// Bytes of the sealed segments (every segment file but the last) and of all of them.
fn segment_bytes(dir: &Path) -> (u64, u64) {
    let mut sizes: Vec<(String, u64)> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| {
            let len = e.metadata().expect("metadata").len();
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect();
    sizes.sort();
    let all = sizes.iter().map(|s| s.1).sum();
    let sealed = sizes[..sizes.len().saturating_sub(1)]
        .iter()
        .map(|s| s.1)
        .sum();
    (sealed, all)
}

/// Store::open + view with the projection cache deleted, best of two by the clock: its
/// wall-clock time and the CPU time of every thread of the process meanwhile (the view reads,
/// decodes and folds on two threads, and a compressed store's blocks are decompressed on a
/// third, so on a loaded machine the two figures tell different stories).
fn cold_view(dir: &Path) -> (Duration, Duration) {
    let mut best = (Duration::MAX, Duration::ZERO);
    for _ in 0..2 {
        let _ = std::fs::remove_dir_all(dir.join(sessionlog::cache::CACHE_DIR));
        let cpu_before = process_cpu_ns();
        let t = Instant::now();
        let store = Store::open(dir, StoreOptions::default()).expect("open");
        std::hint::black_box(store.view(SESSION).expect("view"));
        let elapsed = t.elapsed();
        let cpu = Duration::from_nanos(process_cpu_ns() - cpu_before);
        if elapsed < best.0 {
            best = (elapsed, cpu);
        }
        store.close().expect("close");
    }
    best
}

fn bench(c: &mut Criterion, probe: &Probe) {
    let events = events_wanted();
    let level = level_wanted();
    let dir = fresh_dir("compression");
    let (stored, jsonl) = build(&dir, events);
    let jsonl_zstd = zstd::bulk::compress(&jsonl, JSONL_ZSTD_LEVEL).expect("zstd");
    let (sealed_plain, all_plain) = segment_bytes(&dir);
    let (view_plain, view_plain_cpu) = cold_view(&dir);

    // Keys from the sealed part of the session: the sealed segments hold its first events.
    let log = Log::open(&dir, LogOptions::default()).expect("open log");
    let stream = log.stream_id(SESSION).expect("session stream");
    let sealed_events = (stored as f64 * sealed_plain as f64 / all_plain as f64 * 0.95) as u64;
    let mut rng = Rng::new(7);
    let keys: Vec<(StreamId, Seq)> = (0..KEYS)
        .map(|_| (stream, Seq(rng.next_u64() % sealed_events.max(1))))
        .collect();
    let reads_plain = point_read_latencies(&log, &keys, TIMED_READS);
    let mut group = c.benchmark_group("compression_point_read_sealed");
    let mut next = 0usize;
    group.bench_function("plain", |b| {
        b.iter(|| {
            let (s, q) = keys[next % keys.len()];
            next += 1;
            log.read(s, q).expect("read")
        })
    });
    log.close().expect("close");

    let log = open_compressed(&dir, level);
    let t = Instant::now();
    let report = log.reclaim().expect("compress");
    let compress_time = t.elapsed();
    let (sealed_zstd, all_zstd) = segment_bytes(&dir);
    let reads_zstd = point_read_latencies(&log, &keys, TIMED_READS);
    group.bench_function("compressed", |b| {
        b.iter(|| {
            let (s, q) = keys[next % keys.len()];
            next += 1;
            log.read(s, q).expect("read")
        })
    });
    group.finish();
    log.close().expect("close");
    let (view_zstd, view_zstd_cpu) = cold_view(&dir);

    // The store at rest, as `sessionlog gc --compress` leaves it: the active segment sealed
    // and compressed too.
    let log = open_compressed(&dir, level);
    log.seal_active().expect("seal the active segment");
    log.reclaim().expect("compress the rest");
    log.close().expect("close");
    let (_, at_rest) = segment_bytes(&dir);

    let per = |b: u64| b as f64 / stored as f64;
    println!(
        "session: {stored} events, {} segments compressed at zstd level {} in \
         {compress_time:.2?} ({:.0} MB/s of sealed data)",
        report.segments_compressed.len(),
        level,
        sealed_plain as f64 / 1e6 / compress_time.as_secs_f64()
    );
    println!(
        "bytes/event: store {:.0} -> {:.0} ({:.3}x); sealed segments {:.0} -> {:.0} ({:.3}x); \
         JSONL {:.0}, JSONL+zstd-{JSONL_ZSTD_LEVEL} {:.0}",
        per(all_plain),
        per(all_zstd),
        all_zstd as f64 / all_plain as f64,
        per(sealed_plain),
        per(sealed_zstd),
        sealed_zstd as f64 / sealed_plain as f64,
        per(jsonl.len() as u64),
        per(jsonl_zstd.len() as u64),
    );
    println!(
        "bytes/event at rest (the active segment sealed and compressed too): {:.1} ({:.3}x the \
         plain store; {:.2}x JSONL+zstd-{JSONL_ZSTD_LEVEL})",
        per(at_rest),
        at_rest as f64 / all_plain as f64,
        at_rest as f64 / jsonl_zstd.len() as f64,
    );
    println!(
        "sealed point read p50/p99: plain {} / {}, compressed {} / {} ({:.2}x p50); \
         target p50 <= 20 µs: {}",
        human_ns(reads_plain.p50_ns),
        human_ns(reads_plain.p99_ns),
        human_ns(reads_zstd.p50_ns),
        human_ns(reads_zstd.p99_ns),
        reads_zstd.p50_ns as f64 / reads_plain.p50_ns.max(1) as f64,
        if reads_zstd.p50_ns <= 20_000 {
            "reached"
        } else {
            "not reached"
        }
    );
    println!(
        "cold view: plain {view_plain:.2?}, compressed {view_zstd:.2?} ({:.2}x; target <= 1.2x)",
        view_zstd.as_secs_f64() / view_plain.as_secs_f64()
    );
    println!(
        "cold view CPU time (every thread, 10 ms ticks): plain {view_plain_cpu:.2?}, \
         compressed {view_zstd_cpu:.2?} ({:.2}x)",
        view_zstd_cpu.as_secs_f64() / view_plain_cpu.as_secs_f64().max(1e-9)
    );
    let _ = std::io::stdout().flush();
    write_json(
        "compression.json",
        &json!({
            "probe": probe,
            "events": stored,
            "segments_compressed": report.segments_compressed.len(),
            "zstd_level": level,
            "compress_seconds": compress_time.as_secs_f64(),
            "bytes": {
                "store_plain": all_plain, "store_compressed": all_zstd,
                "sealed_plain": sealed_plain, "sealed_compressed": sealed_zstd,
                "at_rest_compressed": at_rest,
                "jsonl": jsonl.len(), "jsonl_zstd": jsonl_zstd.len(),
            },
            "bytes_per_event": {
                "store_plain": per(all_plain), "store_compressed": per(all_zstd),
                "jsonl": per(jsonl.len() as u64), "jsonl_zstd": per(jsonl_zstd.len() as u64),
            },
            "point_read_sealed_plain": reads_plain,
            "point_read_sealed_compressed": reads_zstd,
            "cold_view_seconds": { "plain": view_plain.as_secs_f64(), "compressed": view_zstd.as_secs_f64() },
            "cold_view_cpu_seconds": { "plain": view_plain_cpu.as_secs_f64(), "compressed": view_zstd_cpu.as_secs_f64() },
            "dir_bytes_after": dir_bytes(&dir),
        }),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let probe = probe();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench(&mut c, &probe);
    c.final_summary();
}
