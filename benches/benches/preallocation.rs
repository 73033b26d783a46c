//! Durable (`Sync`) 1 KiB commits from one writer into a new store, under each preallocation
//! choice: none, growing from 16 KiB (the default), growing from 1 MiB, and the whole 64 MiB
//! segment up front; and the default and the whole segment again with zeros written ahead of
//! the data turned off (`zero_ahead_bytes = 0`), so appends land in fallocated, unwritten
//! extents: the baseline of zero-ahead in the same run. Commit latency p50/p99, commits/s, and the bytes allocated on disk after.
//! Rounds interleave the choices in a rotating order, so a disk that changes speed during the run affects each
//! alike; every figure is also given as a ratio to "none" from the same rounds.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use sessionlog_benches::{fresh_dir, human_ns, ns, payload, probe, write_json, Percentiles};
use sessionlog_log::{Append, Durability, Log, LogOptions};

const RECORD_BYTES: usize = 1024;
const SEGMENT_BYTES: u64 = 64 << 20;

fn commits_per_round() -> usize {
    std::env::var("SESSIONLOG_PREALLOC_COMMITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

fn rounds() -> usize {
    std::env::var("SESSIONLOG_PREALLOC_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn choices() -> Vec<(&'static str, LogOptions)> {
    let base = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    vec![
        ("none", base.clone().with_preallocate(false)),
        (
            "growing_from_16KiB",
            base.clone().with_first_preallocation_bytes(16 << 10),
        ),
        (
            "growing_from_1MiB",
            base.clone().with_first_preallocation_bytes(1 << 20),
        ),
        (
            "whole_segment",
            base.clone().with_first_preallocation_bytes(SEGMENT_BYTES),
        ),
        (
            "growing_from_16KiB_zero_ahead_off",
            base.clone()
                .with_first_preallocation_bytes(16 << 10)
                .with_zero_ahead_bytes(0),
        ),
        (
            "whole_segment_zero_ahead_off",
            base.with_first_preallocation_bytes(SEGMENT_BYTES)
                .with_zero_ahead_bytes(0),
        ),
    ]
}

fn allocated_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.blocks() * 512)
                .sum()
        })
        .unwrap_or(0)
}

/// One round of one choice: latencies (ns) and bytes allocated at the end.
fn round(name: &str, options: &LogOptions, commits: usize) -> (Vec<u64>, u64) {
    let dir = fresh_dir(&format!("prealloc-{name}"));
    let log = Log::open(&dir, options.clone()).expect("open");
    let stream = log.create_stream("s").expect("create");
    let data = payload(7, RECORD_BYTES);
    let mut lat = Vec::with_capacity(commits);
    for _ in 0..commits {
        let t = Instant::now();
        log.commit(&[Append::new(stream, 1, &data)], Durability::Sync)
            .expect("commit");
        lat.push(ns(t.elapsed()));
    }
    let allocated = allocated_bytes(&dir);
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);
    (lat, allocated)
}

fn main() {
    let probe = probe();
    let commits = commits_per_round();
    let choices = choices();
    let mut lat: Vec<Vec<u64>> = vec![Vec::new(); choices.len()];
    let mut secs = vec![0f64; choices.len()];
    let mut allocated = vec![0u64; choices.len()];
    for r in 0..rounds() {
        // Each round starts with a different choice, so none always runs first or last.
        for k in 0..choices.len() {
            let i = (k + r) % choices.len();
            let (name, options) = &choices[i];
            let (l, a) = round(name, options, commits);
            secs[i] += l.iter().sum::<u64>() as f64 / 1e9;
            lat[i].extend(l);
            allocated[i] = a;
        }
    }
    let stats: Vec<Percentiles> = lat.iter_mut().map(|l| Percentiles::of(l)).collect();
    let rate = |i: usize| lat[i].len() as f64 / secs[i];
    let mut results = Vec::new();
    for (i, (name, _)) in choices.iter().enumerate() {
        println!(
            "preallocation {name}: {:.0} commits/s ({:.2}x none), p50 {} ({:.2}x), p99 {} \
             ({:.2}x); {} KiB allocated after {} KiB of records",
            rate(i),
            rate(i) / rate(0),
            human_ns(stats[i].p50_ns),
            stats[i].p50_ns as f64 / stats[0].p50_ns as f64,
            human_ns(stats[i].p99_ns),
            stats[i].p99_ns as f64 / stats[0].p99_ns as f64,
            allocated[i] >> 10,
            (commits * RECORD_BYTES) >> 10,
        );
        results.push(json!({
            "choice": name,
            "commits_per_s": rate(i),
            "latency": stats[i],
            "ratio_to_none": {
                "commits_per_s": rate(i) / rate(0),
                "p50": stats[i].p50_ns as f64 / stats[0].p50_ns as f64,
                "p99": stats[i].p99_ns as f64 / stats[0].p99_ns as f64,
            },
            "allocated_bytes": allocated[i],
        }));
    }
    write_json(
        "preallocation.json",
        &json!({ "probe": probe, "commits_per_round": commits, "results": results }),
    );
}
