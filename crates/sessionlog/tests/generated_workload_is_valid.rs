//! The workload generator makes sessions that pass every validation rule, including
//! compactions and interrupted turns, and that the store round-trips.

mod support;

use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{Store, StoreOptions};
use sessionlog_session::SessionHeader;

#[test]
fn generated_sessions_validate_compact_and_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options =
        StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false));
    let store = Store::open(dir.path(), options).expect("store");
    let mut h = store
        .create_session("g", SessionHeader::new("g", 1, None))
        .expect("create");
    let mut w = Workload::new(
        7,
        WorkloadConfig::default().with_compact_every_turns(Some(3)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..20 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn event");
        }
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(events) = w.compaction(&surface, h.next_seq(), 3) {
                for e in events {
                    h.append(e).expect("compaction event");
                }
            }
        }
    }
    assert!(w.compactions() >= 5);
    assert!(h.state().replace_generation() >= 5);
    // An interrupted turn gets closers on reopen.
    let next = h.next_seq().get();
    for e in w.turn(next, 4, Some(9)) {
        h.append(e).expect("partial turn");
    }
    h.commit().expect("commit");
    drop(h);
    let (_h, closers) = store.open_session("g").expect("reopen");
    assert!(!closers.is_empty(), "an open turn is closed on reopen");
    let view = store.view("g").expect("view");
    let session = support::whole_session(&store, "g");
    assert_eq!(
        view.surface.derive_messages_json(),
        session.derive_messages_json()
    );
}

/// Told the surface's prompt tokens, the generator reports each request's input tokens as
/// those plus a quarter of the message bytes the turn added before it (and half of them read
/// from the cache); every other event, and every later turn, is what it generates without
/// being told.
#[test]
fn told_its_context_the_generator_reports_what_each_request_sent() {
    let config = WorkloadConfig::default().with_compact_every_turns(None);
    let (mut told, mut untold) = (Workload::new(9, config.clone()), Workload::new(9, config));
    told.set_context_tokens(Some(5_000));
    let (a, b) = (told.turn(0, 1, None), untold.turn(0, 1, None));
    assert_eq!(a.len(), b.len());
    let mut requests = 0;
    let mut added = 0usize;
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.event_type, y.event_type);
        if x.event_type == "assistant/message" {
            let usage = |e: &sessionlog::session::EventInput| -> (u64, String) {
                let v: serde_json::Value = serde_json::from_str(&e.data).expect("data");
                let input = v["usage"]["inputTokens"].as_u64().expect("inputTokens");
                // Half the input was read from the provider's cache.
                assert_eq!(v["usage"]["cacheReadTokens"].as_u64(), Some(input / 2));
                let mut rest = v.clone();
                rest["usage"]["inputTokens"] = serde_json::Value::Null;
                rest["usage"]["cacheReadTokens"] = serde_json::Value::Null;
                (input, rest.to_string())
            };
            let ((told_input, told_rest), (_, untold_rest)) = (usage(x), usage(y));
            assert_eq!(told_input, 5_000 + added as u64 / 4, "request {requests}");
            assert_eq!(told_rest, untold_rest, "only the input tokens differ");
            requests += 1;
        } else if x.event_type != "assistant/chunk" {
            assert_eq!(x.data, y.data, "{} differs", x.event_type);
        }
        if matches!(
            x.event_type.as_str(),
            "user/message" | "assistant/message" | "tool/result"
        ) {
            added += x.data.len();
        }
    }
    assert!(requests > 0, "the turn made requests");
    // Told nothing again, the next turn is the untold generator's next turn.
    told.set_context_tokens(None);
    let (a, b) = (
        told.turn(a.len() as u64, 2, None),
        untold.turn(b.len() as u64, 2, None),
    );
    assert_eq!(
        a.iter().map(|e| &e.data).collect::<Vec<_>>(),
        b.iter().map(|e| &e.data).collect::<Vec<_>>()
    );
}
