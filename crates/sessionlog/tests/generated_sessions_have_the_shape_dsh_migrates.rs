//! The workload generator's sessions have the shape DeepSeek Harness 0.2 needs to migrate them
//! to format V4 (the DSH conformance job resumes them in the real runtime; these are the rules
//! it tripped on, pinned here without it):
//! - the request envelope (`request/header`, `request/context`) is inside a step, after the
//!   prompt, and the header's `tools` is a list of tool schemas;
//! - every assistant message equals the stream it cites: its content is the blocks the
//!   `block-end` chunks close, in order, and its usage is the `usage` chunk's.

use serde_json::Value;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog_session::EventInput;

/// Four turns of one generated session (seqs are positions in the result).
fn generated() -> Vec<EventInput> {
    let mut w = Workload::new(11, WorkloadConfig::default());
    let mut events = w.session_start(1);
    for _ in 0..4 {
        let next = events.len() as u64;
        events.extend(w.turn(next, 2, None));
    }
    events
}

fn data(e: &EventInput) -> Value {
    serde_json::from_str(&e.data).expect("generated data is JSON")
}

#[test]
fn the_request_envelope_is_inside_the_first_step_after_the_prompt() {
    let events = generated();
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    let header = types
        .iter()
        .position(|t| *t == "request/header")
        .expect("a header");
    let step = types
        .iter()
        .position(|t| *t == "step/start")
        .expect("a step");
    let prompt = types
        .iter()
        .position(|t| *t == "user/message")
        .expect("a prompt");
    assert!(step < prompt && prompt < header, "order: {types:?}");
    assert_eq!(types[header + 1], "request/context");
    assert_eq!(types.iter().filter(|t| **t == "request/header").count(), 1);
    let tools = &data(&events[header])["header"]["tools"];
    let tools = tools.as_array().expect("tools is a list");
    assert!(!tools.is_empty());
    for tool in tools {
        assert!(
            tool["name"].is_string() && tool["parameters"].is_object(),
            "{tool}"
        );
    }
}

#[test]
fn every_assistant_message_equals_the_stream_it_cites() {
    let events = generated();
    let mut messages = 0;
    for e in events
        .iter()
        .filter(|e| e.event_type == "assistant/message")
    {
        let cited = e
            .source_event_seqs
            .as_ref()
            .expect("a settlement cites its stream");
        let chunks: Vec<Value> = cited
            .iter()
            .map(|&seq| {
                let source = &events[seq.get() as usize];
                assert_eq!(source.event_type, "assistant/chunk");
                data(source)["chunk"].clone()
            })
            .collect();
        let closed: Vec<Value> = chunks
            .iter()
            .filter(|c| c["type"] == "block-end")
            .map(|c| c["block"].clone())
            .collect();
        let opened = chunks.iter().filter(|c| c["type"] == "block-start").count();
        let message = data(e);
        assert_eq!(Value::Array(closed.clone()), message["message"]["content"]);
        assert_eq!(opened, closed.len(), "each block opened is closed");
        let usage: Vec<&Value> = chunks
            .iter()
            .filter(|c| c["type"] == "usage")
            .map(|c| &c["usage"])
            .collect();
        assert_eq!(usage, vec![&message["usage"]]);
        let finish = chunks.last().expect("chunks");
        assert_eq!(finish["type"], "finish");
        let calls = closed.iter().any(|b| b["type"] == "tool-call");
        assert_eq!(
            finish["reason"]["kind"],
            if calls { "tool-calls" } else { "stop" }
        );
        messages += 1;
    }
    assert!(messages >= 4, "one settlement per step at least");
}
