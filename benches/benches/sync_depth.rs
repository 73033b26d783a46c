//! Durable 1 KiB commits from 64 writers with 1, 2 and 4 syncs allowed in flight, in
//! interleaved rounds of the same run, so a disk that changes speed weighs on every setting
//! alike. Prints records/s per setting (median of the rounds) and the ratio to depth 1.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sessionlog_benches::{fresh_dir, payload, probe};
use sessionlog_log::{Append, Durability, Log, LogOptions};

const WRITERS: usize = 64;
const ROUNDS: usize = 4;
const ROUND: Duration = Duration::from_millis(1500);
const DEPTHS: [u32; 3] = [1, 2, 4];

fn round(depth: u32) -> f64 {
    let dir = fresh_dir(&format!("sync-depth-{depth}"));
    let log =
        Log::open(&dir, LogOptions::default().with_max_concurrent_syncs(depth)).expect("open");
    let streams: Vec<_> = (0..WRITERS)
        .map(|i| log.create_stream(&format!("w{i}")).expect("create"))
        .collect();
    let data = payload(7, 1024);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for &s in &streams {
            let (log, stop, done, data) = (log.clone(), stop.clone(), done.clone(), &data);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    log.commit(&[Append::new(s, 1, data)], Durability::Sync)
                        .expect("commit");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(ROUND);
        stop.store(true, Ordering::Relaxed);
    });
    let rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);
    rate
}

fn main() {
    let probe = probe();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); DEPTHS.len()];
    for _ in 0..ROUNDS {
        for (i, &d) in DEPTHS.iter().enumerate() {
            rates[i].push(round(d));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let base = median(&mut rates[0].clone());
    for (i, &d) in DEPTHS.iter().enumerate() {
        let m = median(&mut rates[i]);
        println!(
            "64 writers, max_concurrent_syncs {d}: median {m:.0} records/s over {ROUNDS} rounds ({:.2}x depth 1; fdatasync p50 {:.0} µs)",
            m / base,
            probe.fsync_p50_ns() as f64 / 1000.0
        );
    }
}
