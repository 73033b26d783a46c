//! Durable appends of 1 KiB events from N concurrent sessions, one thread per session, one
//! event per commit: throughput and commit latency.

use std::io;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::feed::FeedKind;
use crate::stats::{ns, Percentiles};
use crate::stores::{Kind, Store, WalRetention};

/// Bytes of one event.
pub const EVENT_BYTES: usize = 1024;

/// What one store did at one concurrency.
#[derive(Debug, Clone)]
pub struct AppendResult {
    /// The store.
    pub kind: Kind,
    /// Concurrent sessions (threads).
    pub sessions: usize,
    /// Commits (= events) in the measured window.
    pub commits: u64,
    /// Commits per second in the measured window.
    pub per_sec: f64,
    /// Commit latency.
    pub latency: Percentiles,
}

/// One slice of a cell: what one store did in one measured window.
#[derive(Debug, Default)]
pub struct Slice {
    /// Commits in the window.
    pub commits: u64,
    /// Length of the window, seconds.
    pub secs: f64,
    /// Commit latencies, nanoseconds.
    pub samples: Vec<u64>,
}

impl Slice {
    /// Adds `other` to this one.
    pub fn add(&mut self, other: Slice) {
        self.commits += other.commits;
        self.secs += other.secs;
        self.samples.extend(other.samples);
    }

    /// The result of all slices added.
    pub fn finish(mut self, kind: Kind, sessions: usize) -> AppendResult {
        AppendResult {
            kind,
            sessions,
            commits: self.commits,
            per_sec: self.commits as f64 / self.secs.max(1e-9),
            latency: Percentiles::of(&mut self.samples),
        }
    }
}

/// Runs `kind` with `sessions` writers committing `feed`'s events in a fresh `dir`:
/// `warmup`, then `window` measured.
pub fn run(
    kind: Kind,
    feed: FeedKind,
    dir: &Path,
    sessions: usize,
    warmup: Duration,
    window: Duration,
) -> io::Result<Slice> {
    let _ = std::fs::remove_dir_all(dir);
    let store = Store::create(kind, dir, sessions, WalRetention::Defaults, feed)?;
    let writers = (0..sessions)
        .map(|i| store.writer(i))
        .collect::<io::Result<Vec<_>>>()?;
    let barrier = Arc::new(Barrier::new(sessions + 1));
    let mut handles = Vec::with_capacity(sessions);
    for (i, mut w) in writers.into_iter().enumerate() {
        let barrier = barrier.clone();
        handles.push(std::thread::Builder::new().stack_size(256 << 10).spawn(
            move || -> io::Result<(Vec<u64>, Instant)> {
                let mut events = feed.feed(i as u64);
                let mut lat = Vec::with_capacity(4096);
                barrier.wait();
                let start = Instant::now();
                let measure_from = start + warmup;
                let until = measure_from + window;
                let mut last = start;
                loop {
                    let t = Instant::now();
                    if t >= until {
                        break;
                    }
                    w.commit_next(&mut events)?;
                    let done = Instant::now();
                    if t >= measure_from {
                        lat.push(ns(done - t));
                        last = done;
                    }
                }
                Ok((lat, last))
            },
        )?);
    }
    barrier.wait();
    let start = Instant::now();
    let mut all = Vec::new();
    let mut end = start + warmup;
    for h in handles {
        let (lat, last) = h.join().expect("writer thread panicked")?;
        all.extend(lat);
        end = end.max(last);
    }
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
    Ok(Slice {
        commits: all.len() as u64,
        secs: (end - (start + warmup)).as_secs_f64().max(1e-9),
        samples: all,
    })
}
