//! Opening a store: crash restart with a full 64 MiB active segment holding 10,000 streams
//! (the open scans the whole active segment), and clean open of >= 2 GiB of sealed segments
//! (the open reads footers only). Both warm (page cache holds the files, as after a process
//! crash) under criterion, and cold (files evicted from the page cache first) as a few timed
//! opens.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;
use sessionlog_benches::{
    bench_dir, dir_bytes, done_with_store, evict_dir_from_page_cache, fresh_dir, human_ns, ns,
    payload, probe, write_json, Calls, Percentiles, Probe, Rng, SAMPLE_SIZE,
};
use sessionlog_format::encoded_batch_len;
use sessionlog_log::{Append, Durability, Log, LogOptions, StreamId};

const CHILD_ENV: &str = "SESSIONLOG_BENCH_CRASH_CHILD";
const CRASH_STREAMS: usize = 10_000;
const SEALED_STREAMS: usize = 10_000;
const SEALED_TARGET_BYTES: u64 = (2 << 30) + (64 << 20);
/// Bump when the layout of the sealed store changes, so an old one is rebuilt.
const SEALED_MARKER: &str = "sealed-v1";
const COLD_OPENS: usize = 3;

/// Payloads of 64..=1024 bytes (seeded): 16 distinct buffers, chosen per record.
fn payloads() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(11);
    (0..16)
        .map(|i| payload(200 + i, rng.range(64, 1024) as usize))
        .collect()
}

/// Runs in a child process: fills the first segment of a new store in `dir` to just below
/// 64 MiB with records of 10,000 streams (one record per commit), makes it durable, and exits
/// without closing or dropping the log, as a crash would.
fn crash_child(dir: &Path) {
    let options = LogOptions::default();
    let log = Log::open(dir, options.clone()).expect("open");
    let streams: Vec<StreamId> = (0..CRASH_STREAMS)
        .map(|i| {
            log.create_stream(&format!("session-{i:05}"))
                .expect("create")
        })
        .collect();
    let data = payloads();
    let mut rng = Rng::new(5);
    let mut end = log.stats().bytes;
    let mut i = 0usize;
    loop {
        let p = &data[(rng.next_u64() % data.len() as u64) as usize];
        let len = encoded_batch_len([p.len()]) as u64;
        if end + len > options.segment_size_bytes {
            break;
        }
        let r = log
            .commit(
                &[Append::new(streams[i % CRASH_STREAMS], 1, p)],
                Durability::Buffered,
            )
            .expect("commit");
        assert_eq!(r.lsn.segment().0, 1, "the first segment rolled");
        end = r.lsn.offset() + len;
        i += 1;
    }
    log.flush().expect("flush");
    let stats = log.stats();
    assert_eq!(stats.segments, 1);
    println!(
        "child: {} records, {} bytes in the active segment",
        i, stats.bytes
    );
    std::mem::forget(log);
    std::process::exit(0);
}

fn build_crash_store() -> PathBuf {
    let dir = fresh_dir("crash-full-active");
    let status = Command::new(std::env::current_exe().expect("current exe"))
        .env(CHILD_ENV, &dir)
        .status()
        .expect("running the child that builds the crashed store");
    assert!(status.success(), "child failed: {status}");
    dir
}

/// Builds (or reuses, when it was kept and its marker is present) a store with >= 2 GiB in
/// sealed segments.
fn sealed_store() -> PathBuf {
    let dir = bench_dir().join("sealed-2GiB");
    let marker = dir.join(SEALED_MARKER);
    if marker.exists() {
        println!("reusing {}", dir.display());
        return dir;
    }
    let dir = fresh_dir("sealed-2GiB");
    let t = Instant::now();
    let log = Log::open(&dir, LogOptions::default()).expect("open");
    let streams: Vec<StreamId> = (0..SEALED_STREAMS)
        .map(|i| {
            log.create_stream(&format!("session-{i:05}"))
                .expect("create")
        })
        .collect();
    let data = payloads();
    let mut rng = Rng::new(9);
    let mut i = 0usize;
    let mut last_segment = 1;
    loop {
        let p = &data[(rng.next_u64() % data.len() as u64) as usize];
        let r = log
            .commit(
                &[Append::new(streams[i % SEALED_STREAMS], 1, p)],
                Durability::Buffered,
            )
            .expect("commit");
        i += 1;
        if r.lsn.segment().0 != last_segment {
            last_segment = r.lsn.segment().0;
            let sealed = dir_bytes(&dir).saturating_sub(LogOptions::default().segment_size_bytes);
            if sealed >= SEALED_TARGET_BYTES {
                break;
            }
        }
    }
    log.close().expect("close");
    std::fs::write(&marker, format!("{i} records\n")).expect("marker");
    println!(
        "built {} ({} records, {} bytes) in {:.1} s",
        dir.display(),
        i,
        dir_bytes(&dir),
        t.elapsed().as_secs_f64()
    );
    dir
}

struct Opened {
    warm: f64,
    cold: Percentiles,
    report_ms: f64,
    active_records: u64,
    segments: usize,
    bytes: u64,
    index_memory_bytes: u64,
}

/// Removes the clean-close file a previous open left behind, so the next open is a crash
/// restart (it scans the active segment) rather than a clean one.
fn forget_clean_close(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("store dir").flatten() {
        if e.file_name().to_string_lossy().ends_with(".clean") {
            std::fs::remove_file(e.path()).expect("removing the clean-close file");
        }
    }
}

/// Measures opens of the store `build` makes, built when criterion first runs the bench (a
/// filtered-out bench builds nothing, and gives `None`); `done` is handed its directory
/// afterwards, to remove (or keep) it.
fn measure(
    c: &mut Criterion,
    name: &str,
    build: impl FnOnce() -> PathBuf,
    done: fn(&Path),
    crash: bool,
) -> Option<Opened> {
    let mut built: Option<PathBuf> = None;
    let opened = measure_built(c, name, build, &mut built, crash);
    if let Some(dir) = built {
        done(&dir);
    }
    opened
}

/// [`measure`], leaving the store's directory in `built` once it is built.
fn measure_built(
    c: &mut Criterion,
    name: &str,
    build: impl FnOnce() -> PathBuf,
    built: &mut Option<PathBuf>,
    crash: bool,
) -> Option<Opened> {
    let mut calls = Calls::default();
    let mut report_ms = 0.0;
    let mut build = Some(build);
    let mut group = c.benchmark_group("open");
    group.bench_function(name, |b| {
        let dir = built.get_or_insert_with(|| (build.take().expect("built once"))());
        let dir = &*dir;
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if crash {
                    forget_clean_close(dir);
                }
                let t = Instant::now();
                let log = Log::open(dir, LogOptions::default()).expect("open");
                let e = t.elapsed();
                total += e;
                report_ms = log.recovery_report().duration.as_secs_f64() * 1e3;
                assert!(log.recovery_report().tail_cut.is_none(), "a cut on reopen");
                drop(log);
            }
            calls.push(iters, total);
            total
        })
    });
    group.finish();
    let dir = built.as_deref()?; // filtered out on the command line
    if calls.is_empty() {
        return None;
    }
    let warm = 1.0 / calls.rate_last(SAMPLE_SIZE);
    let mut cold = Vec::new();
    let mut stats = None;
    let mut active_records = 0;
    for _ in 0..COLD_OPENS {
        if crash {
            forget_clean_close(dir);
        }
        evict_dir_from_page_cache(dir).expect("evicting");
        let t = Instant::now();
        let log = Log::open(dir, LogOptions::default()).expect("open");
        cold.push(ns(t.elapsed()));
        active_records = log.recovery_report().active_records;
        stats = Some(log.stats());
    }
    let stats = stats.expect("opened");
    Some(Opened {
        warm,
        cold: Percentiles::of(&mut cold),
        report_ms,
        active_records,
        segments: stats.segments,
        bytes: stats.bytes,
        index_memory_bytes: stats.index_memory_bytes,
    })
}

/// Removes a store measured once.
fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

fn print(name: &str, o: &Opened, target_ms: Option<f64>, probe: &Probe) -> serde_json::Value {
    let warm_ms = o.warm * 1e3;
    let index_pct = 100.0 * o.index_memory_bytes as f64 / o.bytes.max(1) as f64;
    // Reading the store at the disk's durable bandwidth, for scale.
    let read_at_bw_ms = o.bytes as f64 / (probe.seq_durable_mb_s * 1e6) * 1e3;
    let reached = target_ms.map(|t| warm_ms <= t);
    let verdict = match (target_ms, reached) {
        (Some(t), Some(true)) => format!("; target <= {t} ms: reached"),
        (Some(t), _) => format!("; target <= {t} ms: not reached"),
        _ => String::new(),
    };
    println!(
        "{name}: warm open {warm_ms:.1} ms (= {:.1}x fdatasync p50{verdict}); cold open p50 {} (max {}); {} segments, {} bytes, {} records scanned in the \
         active segment; index memory {} B = {index_pct:.3}% of data (target <= 0.5%: {}); \
         reading all bytes at the sequential durable bandwidth would take {read_at_bw_ms:.0} ms",
        warm_ms * 1e6 / probe.fsync_p50_ns() as f64,
        human_ns(o.cold.p50_ns),
        human_ns(o.cold.max_ns),
        o.segments,
        o.bytes,
        o.active_records,
        o.index_memory_bytes,
        if index_pct <= 0.5 {
            "reached"
        } else {
            "not reached"
        },
    );
    json!({
        "name": name,
        "warm_open_ms": warm_ms,
        "warm_open_x_fdatasync_p50": warm_ms * 1e6 / probe.fsync_p50_ns() as f64,
        "recovery_report_duration_ms": o.report_ms,
        "cold_open": o.cold,
        "target_ms": target_ms,
        "reached": reached,
        "segments": o.segments,
        "bytes": o.bytes,
        "active_records_scanned": o.active_records,
        "index_memory_bytes": o.index_memory_bytes,
        "index_memory_pct_of_data": index_pct,
        "index_memory_reached": index_pct <= 0.5,
        "read_all_at_seq_durable_bandwidth_ms": read_at_bw_ms,
    })
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        crash_child(Path::new(&dir));
        return;
    }
    let probe = probe();
    let mut c = Criterion::default()
        .sample_size(SAMPLE_SIZE)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut results = Vec::new();

    let o = measure(
        &mut c,
        "crash_restart_full_64MiB_active_10k_streams",
        build_crash_store,
        remove,
        true,
    );
    results.extend(o.map(|o| print("crash restart, full 64 MiB active", &o, Some(250.0), &probe)));

    // For scale: the fixed cost of an open, a store whose only segment is a new, empty,
    // preallocated active segment.
    let empty_store = || {
        let empty = fresh_dir("empty");
        Log::open(&empty, LogOptions::default())
            .expect("create")
            .close()
            .expect("close");
        empty
    };
    let o = measure(
        &mut c,
        "empty_store_new_64MiB_active",
        empty_store,
        remove,
        false,
    );
    results.extend(o.map(|o| print("open, empty store", &o, None, &probe)));

    let o = measure(
        &mut c,
        "clean_open_2GiB_sealed_10k_streams",
        sealed_store,
        done_with_store,
        false,
    );
    results.extend(o.map(|o| print("clean open, >= 2 GiB sealed", &o, Some(50.0), &probe)));

    write_json(
        "recovery.json",
        &json!({ "probe": probe, "results": results }),
    );
    c.final_summary();
}
