//! The cold `view` probe that `run.sh` builds twice: against this tree and against an
//! earlier build, whose uncompressed cold `view` the compressed one is compared with.
//!
//! `view DIR SESSION ROUNDS` opens the store in `DIR`, views `SESSION` with its projection
//! cache deleted, and prints the best wall-clock time of `ROUNDS` with the CPU time of that
//! round (every thread of the process). It uses only `Store::open`, `Store::view`,
//! `Store::close` and `cache::CACHE_DIR`, which every build since the store's first has.
//!
//! With the `current` feature (this tree only): `gen DIR JSONL EVENTS` builds the generated
//! agent session of the `compression` bench in a new store in `DIR` and writes its events
//! as JSONL (header line first) to `JSONL`; `compress DIR LEVEL` compresses the sealed
//! segments of the store in `DIR` by a reclaim at zstd `LEVEL`, as that bench does.

use std::path::Path;
use std::time::{Duration, Instant};

/// CPU time of every thread of this process so far (user + sys, 10 ms ticks). Written out
/// here, as `sessionlog_benches::process_cpu_ns` is, because the probe also builds against
/// trees it cannot take the benches crate from.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it follow its `)`.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// The best wall-clock time of `rounds` cold views and the CPU time of that round.
fn cold_view(dir: &Path, session: &str, rounds: usize) -> (Duration, Duration) {
    let mut best = (Duration::MAX, Duration::ZERO);
    for _ in 0..rounds {
        let _ = std::fs::remove_dir_all(dir.join(sessionlog::cache::CACHE_DIR));
        let cpu_before = process_cpu();
        let started = Instant::now();
        let store = sessionlog::Store::open(dir, sessionlog::StoreOptions::default())
            .expect("open the store");
        let view = store.view(session).expect("view the session");
        std::hint::black_box(&view);
        let elapsed = started.elapsed();
        let cpu = process_cpu().saturating_sub(cpu_before);
        if elapsed < best.0 {
            best = (elapsed, cpu);
        }
        drop(view);
        store.close().expect("close the store");
    }
    best
}

#[cfg(feature = "current")]
fn generate(dir: &Path, jsonl: &Path, events: u64) {
    use std::io::Write;
    let store = sessionlog::Store::open(dir, sessionlog::StoreOptions::default()).expect("open");
    let header =
        sessionlog::SessionHeader::new("long-session", 1_700_000_000_000, Some("/work"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(jsonl).expect("create JSONL"));
    out.write_all(header.raw().as_bytes()).expect("write");
    out.write_all(b"\n").expect("write");
    let mut h = store.create_session("long-session", header).expect("create");
    sessionlog_benches::fill_compare_session(&mut h, events, Some(32));
    for e in h.events_from(sessionlog::Seq(0)).expect("events") {
        out.write_all(e.raw().as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
    }
    out.flush().expect("flush");
    println!("generated {} events", h.next_seq().get());
    drop(h);
    store.close().expect("close");
}

#[cfg(feature = "current")]
fn compress(dir: &Path, level: i32) {
    use sessionlog_log::{Compression, Log, LogOptions};
    let log = Log::open(dir, LogOptions::default().with_compression(Compression::Zstd { level }))
        .expect("open with compression");
    let report = log.reclaim().expect("compress");
    println!("compressed {} segments", report.segments_compressed.len());
    log.close().expect("close");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str {
        args.get(i)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("argument {i} missing: see the probe's doc comment"))
    };
    match arg(1) {
        "view" => {
            let rounds = arg(4).parse().expect("ROUNDS");
            let (wall, cpu) = cold_view(Path::new(arg(2)), arg(3), rounds);
            println!("{:.1} {:.0}", wall.as_secs_f64() * 1e3, cpu.as_secs_f64() * 1e3);
        }
        #[cfg(feature = "current")]
        "gen" => generate(Path::new(arg(2)), Path::new(arg(3)), arg(4).parse().expect("EVENTS")),
        #[cfg(feature = "current")]
        "compress" => compress(Path::new(arg(2)), arg(3).parse().expect("LEVEL")),
        other => panic!("unknown mode {other}"),
    }
}
