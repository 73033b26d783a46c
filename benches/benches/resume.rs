//! Resuming a 1,000,000-event session for writing: from its state checkpoint (the records
//! after the checkpoint folded), cold (no checkpoint: every record streamed into the state),
//! and the whole-`Session` load every writer did before (every event read and kept), against a
//! serde_json line parse of the same session's DSH JSONL. Each measurement runs in a child
//! process so its peak resident memory (VmHWM) and its CPU time (user + sys of all its
//! threads, which other work on the machine disturbs less than the wall-clock time) are its
//! own. Figures are reported with the probe and as ratios to baselines measured in the same
//! run; the store is removed at the end.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use sessionlog::session::SessionHeader;
use sessionlog::{CacheUse, Store, StoreOptions};
use sessionlog_benches::{
    fill_long_session, fresh_dir, human_ns, ns, probe, process_cpu_ns, whole_session,
};

const EVENTS: u64 = 1_000_000;
const RUNS: usize = 3;
const CHILD: &str = "SESSIONLOG_RESUME_BENCH_CHILD";

fn options(cache: bool) -> StoreOptions {
    StoreOptions::default().with_projection_cache(cache)
}

/// Builds one session of at least `EVENTS` generated agent events (compacted as the
/// workload's policy says), committed at the end (which writes its checkpoint), and its DSH
/// export.
fn build(dir: &Path) -> u64 {
    let store = Store::open(dir, options(true)).expect("store");
    let mut h = store
        .create_session("long", SessionHeader::new("long", 1, None))
        .expect("create");
    fill_long_session(&mut h, EVENTS);
    h.commit().expect("commit");
    let events = h.next_seq().get();
    drop(h);
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(dir.join("long.jsonl")).expect("jsonl"));
    store.write_dsh("long", &mut out).expect("export");
    drop(out);
    store.close().expect("close");
    events
}

/// Peak resident set of this process, in bytes (VmHWM of /proc/self/status).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Prints a measurement as the parent reads it: `<ns> <peak rss bytes> <cpu ns>`, the CPU
/// time counted from `cpu_before`.
fn report(elapsed: Duration, cpu_before: u64) {
    println!(
        "{} {} {}",
        ns(elapsed),
        peak_rss_bytes(),
        process_cpu_ns() - cpu_before
    );
}

/// One measurement, in this (child) process: prints `<ns> <peak rss bytes> <cpu ns>`.
fn child(mode: &str, dir: &Path) {
    // The CPU clock is read before the timed span starts and after it ends, so that reading
    // it (a file read) is not timed.
    let (cpu_before, started);
    match mode {
        "checkpoint" | "cold" => {
            let store = Store::open(dir, options(mode == "checkpoint")).expect("open");
            (cpu_before, started) = (process_cpu_ns(), Instant::now());
            let h = store.open_session_as_is("long").expect("resume");
            std::hint::black_box(h.pressure());
            let elapsed = started.elapsed();
            match (mode, h.opened_from()) {
                ("checkpoint", CacheUse::Hit { .. }) | ("cold", CacheUse::Disabled) => {}
                (_, other) => panic!("{mode} resume built its state as {other:?}"),
            }
            report(elapsed, cpu_before);
        }
        "whole_session" => {
            let store = Store::open(dir, options(false)).expect("open");
            (cpu_before, started) = (process_cpu_ns(), Instant::now());
            let session = whole_session(&store, "long");
            std::hint::black_box(session.next_seq());
            let elapsed = started.elapsed();
            report(elapsed, cpu_before);
        }
        "serde_json" => {
            use std::io::BufRead;
            (cpu_before, started) = (process_cpu_ns(), Instant::now());
            let file = std::io::BufReader::new(
                std::fs::File::open(dir.join("long.jsonl")).expect("jsonl"),
            );
            let mut n = 0u64;
            for line in file.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(&line.expect("line")).expect("json");
                n += u64::from(v.is_object());
            }
            std::hint::black_box(n);
            let elapsed = started.elapsed();
            report(elapsed, cpu_before);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// One measurement of `mode` in a child process: its time and peak RSS.
/// Wall-clock time, peak RSS and CPU time of one measurement.
#[derive(Debug, Clone, Copy)]
struct Run {
    time: Duration,
    rss: u64,
    cpu: Duration,
}

fn measure_once(mode: &str, dir: &Path) -> Run {
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(&exe)
        .env(CHILD, mode)
        .env("SESSIONLOG_RESUME_BENCH_DIR", dir)
        .output()
        .expect("child");
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text
        .split_whitespace()
        .map(|f| f.parse::<u64>().expect("number"));
    let (Some(time_ns), Some(rss), Some(cpu_ns)) = (fields.next(), fields.next(), fields.next())
    else {
        panic!("{mode}: child printed {text:?}");
    };
    Run {
        time: Duration::from_nanos(time_ns),
        rss,
        cpu: Duration::from_nanos(cpu_ns),
    }
}

/// The best run of one mode: its least wall-clock time with that run's peak RSS, and the
/// least CPU time of its runs.
#[derive(Debug, Clone, Copy)]
struct Best {
    time: Duration,
    rss: u64,
    cpu: Duration,
}

/// The best run of each of `modes`, over `RUNS` rounds that each run every mode once, in
/// turn: on a machine whose load changes from minute to minute, every mode then meets the
/// same spells of load.
fn measure(modes: &[&str], dir: &Path) -> Vec<Best> {
    let none = Best {
        time: Duration::MAX,
        rss: 0,
        cpu: Duration::MAX,
    };
    let mut best = vec![none; modes.len()];
    for _ in 0..RUNS {
        for (mode, best) in modes.iter().zip(&mut best) {
            let run = measure_once(mode, dir);
            if run.time < best.time {
                (best.time, best.rss) = (run.time, run.rss);
            }
            best.cpu = best.cpu.min(run.cpu);
        }
    }
    best
}

fn main() {
    if let (Ok(mode), Some(dir)) = (
        std::env::var(CHILD),
        std::env::var_os("SESSIONLOG_RESUME_BENCH_DIR"),
    ) {
        child(&mode, Path::new(&dir));
        return;
    }
    // Builds the session into a directory the caller keeps (for profiling one path).
    if let Some(dir) = std::env::var_os("SESSIONLOG_RESUME_BENCH_BUILD") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).expect("build dir");
        println!("built a {}-event session in {}", build(dir), dir.display());
        return;
    }
    let probe = probe();
    let dir = fresh_dir("resume-1m");
    let started = Instant::now();
    let events = build(&dir);
    println!(
        "built a {events}-event session in {:.1?}",
        started.elapsed()
    );

    let [checkpoint, cold, load, serde] =
        measure(&["checkpoint", "cold", "whole_session", "serde_json"], &dir)[..]
    else {
        unreachable!("one result per mode");
    };
    let _ = std::fs::remove_dir_all(&dir);

    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("{}", probe.summary());
    println!(
        "resume for writing of a {events}-event session (best of {RUNS} interleaved rounds, one child process each):"
    );
    for (name, best, note) in [
        (
            "checkpoint",
            checkpoint,
            "open_session_as_is, checkpoint + records after it",
        ),
        (
            "cold",
            cold,
            "open_session_as_is, no checkpoint: every record folded",
        ),
        (
            "whole_session",
            load,
            "the whole Session, every event kept (the old resume)",
        ),
        (
            "serde_json",
            serde,
            "the DSH JSONL export parsed line by line",
        ),
    ] {
        println!(
            "  {name:<13} {:>10}  CPU {:>10}  peak RSS {:>7.1} MB  ({note})",
            human_ns(ns(best.time)),
            human_ns(ns(best.cpu)),
            mb(best.rss)
        );
    }
    println!(
        "  ratios: checkpoint / whole_session {:.4}x; cold / serde_json {:.2}x; cold / whole_session {:.2}x",
        r(checkpoint.time, load.time),
        r(cold.time, serde.time),
        r(cold.time, load.time)
    );
    println!(
        "  CPU time (user + sys, every thread; least of {RUNS}): cold / serde_json {:.2}x; cold / whole_session {:.2}x",
        r(cold.cpu, serde.cpu),
        r(cold.cpu, load.cpu)
    );
}
