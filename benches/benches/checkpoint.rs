//! Resuming a session's state from a checkpoint against folding it from its first event:
//! a generated agent session of `EVENTS` events (already parsed, in memory, so the figures
//! are the state machine's own cost, without reading or parsing the log), checkpointed
//! `TAIL` events before its end. Resume = decode the checkpoint + fold the last `TAIL`
//! events; baseline = fold all of them. Both measure tokens with the heuristic counter and
//! must give equal states. Ratio in the same run, best of `RUNS`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog::session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog::session::{
    Event, FormatVersion, RuleSet, Seq, Session, SessionHeader, SessionState,
};
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog_benches::{human_ns, ns, probe, write_json};

const EVENTS: u64 = 200_000;
const TAIL: usize = 1_000;
const RUNS: usize = 3;

fn best_of(mut f: impl FnMut() -> Duration) -> Duration {
    (0..RUNS).map(|_| f()).min().unwrap_or(Duration::MAX)
}

fn generated() -> Session {
    let mut session = Session::new(
        SessionHeader::new("long", 1, None),
        FormatVersion::current(),
    );
    let mut w = Workload::new(
        42,
        WorkloadConfig::default()
            .with_compact_every_turns(Some(50))
            .with_keep_tail_nodes(40)
            .with_tool_result_bytes((64, 1024)),
    );
    let append = |session: &mut Session, events: Vec<_>| {
        for e in events {
            session.try_append(e).expect("generated event");
        }
    };
    append(&mut session, w.session_start(1));
    while session.next_seq().get() < EVENTS {
        let next = session.next_seq().get();
        append(&mut session, w.turn(next, 2, None));
        if w.wants_compaction() {
            let next = session.next_seq().get();
            if let Some(events) = w.compaction(&session.surface(), Seq(next), 3) {
                append(&mut session, events);
            }
        }
    }
    session
}

fn fold(state: &mut SessionState, events: &[Event], from: usize) {
    for (i, event) in events.iter().enumerate().skip(from) {
        state
            .append(event, RuleSet::Dsh, &&events[..i])
            .expect("fold");
    }
}

fn main() {
    let probe = probe();
    let built = Instant::now();
    let session = generated();
    let events = session.events();
    let n = events.len();
    let cut = n - TAIL;
    println!("built a {n}-event session in {:.1?}", built.elapsed());
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let fresh = || {
        SessionState::with_tokens(
            session.header().clone(),
            session.version().clone(),
            Arc::clone(&counter),
        )
    };

    let mut prefix = fresh();
    fold(&mut prefix, &events[..cut], 0);
    let mut checkpoint = Vec::new();
    let encode = best_of(|| {
        checkpoint.clear();
        let t = Instant::now();
        prefix.encode_checkpoint(&mut checkpoint);
        t.elapsed()
    });
    let mut full = fresh();

    let baseline = best_of(|| {
        let t = Instant::now();
        full = fresh();
        fold(&mut full, events, 0);
        std::hint::black_box(full.pressure());
        t.elapsed()
    });
    let mut resumed = fresh();
    let resume = best_of(|| {
        let t = Instant::now();
        resumed = SessionState::decode_checkpoint(
            &checkpoint,
            session.version().clone(),
            Some(Arc::clone(&counter)),
        )
        .expect("decode");
        fold(&mut resumed, events, cut);
        std::hint::black_box(resumed.pressure());
        t.elapsed()
    });
    // Equal states, or the fast figure means nothing.
    assert!(resumed == full, "resumed state differs from the full fold");

    println!(
        "state of a {n}-event session ({} surface nodes, checkpoint {} bytes, best of {RUNS}):",
        full.surface_state().len(),
        checkpoint.len()
    );
    println!(
        "  fold all {n} events        {} (baseline)",
        human_ns(ns(baseline))
    );
    println!("  decode + fold last {TAIL}    {}", human_ns(ns(resume)));
    println!("  encode checkpoint          {}", human_ns(ns(encode)));
    println!(
        "  ratio: baseline / resume {:.0}x",
        baseline.as_secs_f64() / resume.as_secs_f64().max(1e-12)
    );
    write_json(
        "checkpoint.json",
        &json!({
            "probe_fdatasync_p50_ns": probe.fsync_p50_ns(),
            "events": n,
            "tail_events": TAIL,
            "checkpoint_bytes": checkpoint.len(),
            "fold_all_ns": ns(baseline),
            "resume_ns": ns(resume),
            "encode_ns": ns(encode),
        }),
    );
}
