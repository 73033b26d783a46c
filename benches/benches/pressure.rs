//! Context pressure of a 1,000,000-event session: `SessionHandle::pressure()`, read from the
//! token projection the handle maintains, against folding the token projection from the
//! session (what an agent loop had to do before every request). Ratio in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog::session::tokens::{HeuristicCounter, TokenCounter, TokenProjection};
use sessionlog::session::SessionHeader;
use sessionlog::{LogOptions, Store, StoreOptions};
use sessionlog_benches::{bench_dir, fill_long_session, human_ns, ns, probe, write_json};

const EVENTS: u64 = 1_000_000;
const RUNS: usize = 3;
const PRESSURE_CALLS: u32 = 1_000_000;

fn best_of(mut f: impl FnMut() -> Duration) -> Duration {
    (0..RUNS).map(|_| f()).min().unwrap_or(Duration::MAX)
}

fn main() {
    let probe = probe();
    let dir = bench_dir().join("pressure");
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(
        &dir,
        StoreOptions::default().with_log(LogOptions::default().with_preallocate(false)),
    )
    .expect("store");
    let mut h = store
        .create_session("long", SessionHeader::new("long", 1, None))
        .expect("create");
    let built = Instant::now();
    fill_long_session(&mut h, EVENTS);
    let events = h.next_seq().get();
    println!("built a {events}-event session in {:.1?}", built.elapsed());

    // The handle's maintained projection: one call, averaged over many.
    let maintained = best_of(|| {
        let t = Instant::now();
        for _ in 0..PRESSURE_CALLS {
            std::hint::black_box(h.pressure().estimated_prompt_tokens.tokens);
        }
        t.elapsed() / PRESSURE_CALLS
    });
    // The baseline: fold the token projection from the session, then ask.
    h.commit().expect("commit");
    let session = sessionlog_benches::whole_session(&store, h.name());
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let refold = best_of(|| {
        let t = Instant::now();
        let projection =
            TokenProjection::from_session(&session, Arc::clone(&counter)).expect("fold");
        std::hint::black_box(projection.pressure().estimated_prompt_tokens.tokens);
        t.elapsed()
    });
    // Both must agree, or the fast figure means nothing.
    let folded = TokenProjection::from_session(&session, counter).expect("fold");
    assert_eq!(h.pressure(), folded.pressure());

    println!("pressure() of a {events}-event session (best of {RUNS}):");
    println!(
        "  SessionHandle::pressure   {} per call (maintained projection)",
        human_ns(ns(maintained))
    );
    println!(
        "  fold + pressure           {} (TokenProjection::from_session, the baseline)",
        human_ns(ns(refold))
    );
    println!(
        "  ratio: baseline / maintained {:.0}x",
        refold.as_secs_f64() / maintained.as_secs_f64().max(1e-12)
    );
    write_json(
        "pressure.json",
        &json!({
            "probe_fdatasync_p50_ns": probe.fsync_p50_ns(),
            "events": events,
            "pressure_maintained_ns": ns(maintained),
            "pressure_refold_ns": ns(refold),
        }),
    );
    drop(h);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
