//! Appending typical agent events with full validation, one thread, nothing made durable:
//! through a store's `SessionHandle` (built, validated, folded into the session state with its
//! token tally, encoded and written to the log buffer with `Durability::Buffered`, never
//! committed) and, as the baseline of the same run, through the in-memory `Session` alone. Events come from the seeded workload generator (prompts, chunks,
//! settlements, tool calls and results of 64 B–4 KiB).

use std::time::{Duration, Instant};

use sessionlog::session::{EventInput, FormatVersion, Session, SessionHeader};
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{Store, StoreOptions};
use sessionlog_benches::{fresh_dir, probe, write_json};

const EVENTS: u64 = 300_000;

fn events() -> Vec<EventInput> {
    let mut w = Workload::new(
        9,
        WorkloadConfig::default()
            .with_compact_every_turns(None)
            .with_tool_result_bytes((64, 4096)),
    );
    let mut out = w.session_start(1);
    while (out.len() as u64) < EVENTS {
        let next = out.len() as u64;
        out.extend(w.turn(next, 2, None));
    }
    out
}

fn main() {
    let probe = probe();
    let inputs = events();
    let n = inputs.len() as u64;
    let bytes: usize = inputs.iter().map(|e| e.data.len() + 64).sum();

    let session_only = {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let mut s = Session::new(SessionHeader::new("b", 1, None), FormatVersion::current());
            let batch = inputs.clone();
            let t = Instant::now();
            for e in batch {
                s.try_append(e).expect("valid");
            }
            best = best.min(t.elapsed());
        }
        best
    };
    let store = {
        let mut best = Duration::MAX;
        for round in 0..3 {
            let dir = fresh_dir(&format!("session-append-{round}"));
            let store = Store::open(&dir, StoreOptions::default()).expect("open");
            let mut h = store
                .create_session("b", SessionHeader::new("b", 1, None))
                .expect("create");
            let batch = inputs.clone();
            let t = Instant::now();
            for e in batch {
                h.append(e).expect("valid");
            }
            best = best.min(t.elapsed());
            drop(h);
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
        }
        best
    };
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "append with full validation, {n} events ({:.0} B average), one core (best of 3):",
        bytes as f64 / n as f64
    );
    println!(
        "  Session::try_append alone          {:.0} events/s",
        rate(session_only)
    );
    println!(
        "  SessionHandle::append, buffered     {:.0} events/s, {:.2}x the Session alone (target >= 300,000: {})",
        rate(store),
        rate(store) / rate(session_only),
        if rate(store) >= 300_000.0 {
            "reached"
        } else {
            "not reached"
        }
    );
    write_json(
        "session_append.json",
        &serde_json::json!({
            "events": n, "avg_bytes": bytes as f64 / n as f64,
            "session_only_events_per_s": rate(session_only),
            "store_buffered_events_per_s": rate(store),
            "probe_fdatasync_p50_ns": probe.fsync_p50_ns(),
        }),
    );
}
