//! Durable (`Sync`) commits of 1 KiB records from 1, 8, 64 and 256 writer threads, each
//! with its own stream: records/s, commit latency percentiles, and how many commits share
//! one `fdatasync`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::json;
use sessionlog_benches::{
    fdatasync_floor_now, fresh_dir, human_ns, ns, payload, probe, write_json, Calls, Percentiles,
    Probe, SAMPLE_SIZE,
};
use sessionlog_log::{Append, Durability, Log, LogOptions};

const RECORD_BYTES: usize = 1024;
const WRITERS: [usize; 4] = [1, 8, 64, 256];

/// Writer threads kept across criterion's calls, so a call measures commits, not spawns.
struct Pool {
    threads: Vec<JoinHandle<()>>,
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    per_thread: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Latencies (ns) of the current call, and each thread's finish time.
    out: Arc<Mutex<(Vec<u64>, Vec<Instant>)>>,
}

impl Pool {
    fn new(log: &Log, writers: usize) -> Pool {
        let start = Arc::new(Barrier::new(writers + 1));
        let done = Arc::new(Barrier::new(writers + 1));
        let per_thread = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let out = Arc::new(Mutex::new((Vec::new(), Vec::new())));
        let threads = (0..writers)
            .map(|w| {
                let stream = log.create_stream(&format!("writer-{w}")).expect("create");
                let log = log.clone();
                let (start, done, per_thread, stop, out) = (
                    start.clone(),
                    done.clone(),
                    per_thread.clone(),
                    stop.clone(),
                    out.clone(),
                );
                let data = payload(w as u64, RECORD_BYTES);
                std::thread::spawn(move || {
                    let mut lat = Vec::new();
                    loop {
                        start.wait();
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        lat.clear();
                        for _ in 0..per_thread.load(Ordering::Acquire) {
                            let t = Instant::now();
                            log.commit(&[Append::new(stream, 1, &data)], Durability::Sync)
                                .expect("durable commit");
                            lat.push(ns(t.elapsed()));
                        }
                        let end = Instant::now();
                        {
                            let mut o = out.lock().expect("results lock");
                            o.0.extend_from_slice(&lat);
                            o.1.push(end);
                        }
                        done.wait();
                    }
                })
            })
            .collect();
        log.flush().expect("flush the catalog");
        Pool {
            threads,
            start,
            done,
            per_thread,
            stop,
            out,
        }
    }

    /// Runs `per_thread` commits on every thread; returns the wall time from start until the
    /// last thread finished, and the latencies.
    fn run(&self, per_thread: u64) -> (Duration, Vec<u64>) {
        self.per_thread.store(per_thread, Ordering::Release);
        self.start.wait();
        let t0 = Instant::now();
        self.done.wait();
        let mut o = self.out.lock().expect("results lock");
        let end = o.1.drain(..).max().unwrap_or(t0);
        (end.saturating_duration_since(t0), std::mem::take(&mut o.0))
    }

    fn shutdown(self) {
        self.stop.store(true, Ordering::Release);
        self.start.wait();
        for t in self.threads {
            t.join().expect("writer thread");
        }
    }
}

fn bench(c: &mut Criterion, probe: &Probe) {
    let mut results = Vec::new();
    let mut group = c.benchmark_group("group_commit_sync_1KiB");
    group.throughput(Throughput::Elements(1));
    for writers in WRITERS {
        let dir = fresh_dir(&format!("group-commit-{writers}"));
        let log = Log::open(&dir, LogOptions::default()).expect("open");
        let pool = Pool::new(&log, writers);
        let floor_before = fdatasync_floor_now(60);
        let syncs_before = log.stats().syncs;
        let commits_before = log.stats().commits;
        let mut calls = Calls::default();
        let mut latencies: Vec<Vec<u64>> = Vec::new();
        group.bench_function(format!("{writers}_writers"), |b| {
            b.iter_custom(|iters| {
                let per_thread = iters.div_ceil(writers as u64);
                let done = per_thread * writers as u64;
                let (elapsed, lat) = pool.run(per_thread);
                calls.push(done, elapsed);
                latencies.push(lat);
                // Criterion asked for `iters` commits; scale the time of the ones we did.
                elapsed.mul_f64(iters as f64 / done as f64)
            })
        });
        pool.shutdown();
        let floor_after = fdatasync_floor_now(60);
        let stats = log.stats();
        log.close().expect("close");
        let _ = std::fs::remove_dir_all(&dir);
        if calls.is_empty() {
            continue; // filtered out on the command line
        }
        let adjacent_ns = (floor_before.p50_ns + floor_after.p50_ns) as f64 / 2.0;

        // The measurement phase is the last SAMPLE_SIZE calls; earlier ones were warm-up.
        let mut lat: Vec<u64> = latencies
            .iter()
            .rev()
            .take(SAMPLE_SIZE)
            .flatten()
            .copied()
            .collect();
        let p = Percentiles::of(&mut lat);
        let rate = calls.rate_last(SAMPLE_SIZE);
        let disk_per_record = stats.bytes as f64 / stats.records.max(1) as f64;
        let equiv = probe.records_equivalent(disk_per_record);
        let payload_pct = 100.0 * rate * RECORD_BYTES as f64 / (probe.seq_durable_mb_s * 1e6);
        let commits_per_sync =
            (stats.commits - commits_before) as f64 / (stats.syncs - syncs_before).max(1) as f64;
        let p50_x = p.p50_ns as f64 / probe.fsync_p50_ns() as f64;
        let p50_x_adjacent = p.p50_ns as f64 / adjacent_ns;
        println!(
            "  fdatasync floor p50 right before {} / after {}: commit p50 = {p50_x_adjacent:.2}x \
             their mean",
            human_ns(floor_before.p50_ns),
            human_ns(floor_after.p50_ns)
        );
        let bound_adjacent = writers as f64 * 1e9 / adjacent_ns;
        // With one commit outstanding per writer, no engine beats every writer committing
        // once per fdatasync: writers / fdatasync p50.
        let bound = writers as f64 * 1e9 / probe.fsync_p50_ns() as f64;
        println!(
            "  bound with {writers} writers each waiting one fdatasync p50: {bound:.0} records/s \
             at the start probe, {bound_adjacent:.0} at the adjacent floor; measured = {:.1}% / \
             {:.1}% of it",
            100.0 * rate / bound,
            100.0 * rate / bound_adjacent
        );
        let p50_x_falloc = p.p50_ns as f64 / probe.fdatasync_4k_fallocated.p50_ns as f64;
        println!(
            "group commit {writers} writers: {rate:.0} records/s ({:.1}% of sequential durable \
             bandwidth in records at {disk_per_record:.0} B/record; {payload_pct:.1}% in payload \
             bytes); commit latency p50 {} ({p50_x:.2}x fdatasync p50, {p50_x_falloc:.2}x \
             fallocated fdatasync p50) p99 {} ({:.2}x fdatasync p99); {commits_per_sync:.1} \
             commits per fdatasync",
            100.0 * rate / equiv,
            human_ns(p.p50_ns),
            human_ns(p.p99_ns),
            p.p99_ns as f64 / probe.fdatasync_4k.p99_ns as f64,
        );
        let mut target = serde_json::Map::new();
        if writers == 1 {
            println!(
                "  1 writer durable p50 = {p50_x:.2} x fdatasync floor p50 {}; target <= 1.3x: {}",
                human_ns(probe.fsync_p50_ns()),
                if p50_x <= 1.3 {
                    "reached"
                } else {
                    "not reached"
                }
            );
            target.insert("p50_max_x_fdatasync".into(), json!(1.3));
            target.insert("reached".into(), json!(p50_x <= 1.3));
        }
        if writers == 64 {
            println!(
                "  64 writers: {rate:.0} records/s; target >= 150,000 records/s: {}",
                if rate >= 150_000.0 {
                    "reached"
                } else {
                    "not reached"
                }
            );
            target.insert("min_records_per_s".into(), json!(150_000));
            target.insert("reached".into(), json!(rate >= 150_000.0));
        }
        results.push(json!({
            "writers": writers,
            "record_bytes": RECORD_BYTES,
            "records_per_s": rate,
            "latency": p,
            "p50_x_fdatasync_p50": p50_x,
            "adjacent_fdatasync_floor_before": floor_before,
            "adjacent_fdatasync_floor_after": floor_after,
            "p50_x_adjacent_fdatasync_p50": p50_x_adjacent,
            "one_sync_per_commit_bound_adjacent_records_per_s": bound_adjacent,
            "pct_of_one_sync_per_commit_bound_adjacent": 100.0 * rate / bound_adjacent,
            "p50_x_fallocated_fdatasync_p50": p50_x_falloc,
            "p99_x_fdatasync_p99": p.p99_ns as f64 / probe.fdatasync_4k.p99_ns as f64,
            "disk_bytes_per_record": disk_per_record,
            "pct_of_seq_durable_bandwidth_records": 100.0 * rate / equiv,
            "pct_of_seq_durable_bandwidth_payload": payload_pct,
            "commits_per_fdatasync": commits_per_sync,
            "one_sync_per_commit_bound_records_per_s": bound,
            "pct_of_one_sync_per_commit_bound": 100.0 * rate / bound,
            "segments": stats.segments,
            "target": target,
        }));
    }
    group.finish();
    write_json(
        "group_commit.json",
        &json!({ "probe": probe, "results": results }),
    );
}

fn main() {
    let probe = probe();
    let mut c = Criterion::default()
        .sample_size(SAMPLE_SIZE)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    bench(&mut c, &probe);
    c.final_summary();
}
