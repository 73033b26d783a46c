//! Spec §11 (d): an open final turn gets tool results for pending calls, a step end and
//! an interrupted turn end, as new events with the last event's time.

mod common;

use common::{assistant, empty_session, push, tool_result, user};
use sessionlog_session::{EventInput, Session};

fn open_turn() -> Session {
    let mut s = empty_session();
    push(&mut s, EventInput::new("turn/start", 1000, r#"{"turn":1}"#));
    push(
        &mut s,
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
    );
    push(&mut s, user("u2", "go"));
    push(&mut s, assistant("a3", "calling", &["c1", "c2"]));
    push(
        &mut s,
        EventInput::new(
            "tool/call",
            1037,
            r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}"#,
        ),
    );
    s
}

#[test]
fn open_turn_is_closed_with_codes_ids_and_sources() {
    let mut s = open_turn();
    let closers = s.repair().expect("repair");
    let seqs: Vec<u64> = closers.iter().map(|c| c.get()).collect();
    assert_eq!(seqs, [5, 6, 7, 8]);
    let event = |seq: u64| common::value(s.events()[seq as usize].raw());
    let r5 = event(5);
    assert_eq!(r5["data"]["message"]["id"], "interrupted-tool-result-c1-5");
    assert_eq!(r5["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(r5["sourceEventSeqs"], serde_json::json!([4]));
    assert_eq!(r5["time"], 1037);
    let r6 = event(6);
    assert_eq!(r6["data"]["message"]["id"], "interrupted-tool-result-c2-6");
    assert_eq!(r6["data"]["error"]["code"], "TOOL_NOT_STARTED");
    assert!(r6.get("sourceEventSeqs").is_none());
    assert_eq!(event(7)["type"], "step/end");
    assert_eq!(event(8)["data"]["reason"]["kind"], "interrupted");
    assert_eq!(s.surface(), vec![2, 3, 5, 6]);
    assert_eq!(s.derive_messages().len(), 4);
    assert!(!s.turn_open());
    assert!(s.repair().expect("second repair").is_empty());
}

#[test]
fn calls_of_an_ended_step_stay_dangling() {
    let mut s = open_turn();
    push(&mut s, tool_result("r5", "c1", "done"));
    push(
        &mut s,
        EventInput::new("step/end", 1040, r#"{"turn":1,"step":1}"#),
    );
    let closers = s.repair_closers().expect("closers");
    let types: Vec<&str> = closers.iter().map(|c| c.event_type()).collect();
    assert_eq!(types, ["turn/end"]);
    assert_eq!(closers[0].seq().get(), 7);
}
