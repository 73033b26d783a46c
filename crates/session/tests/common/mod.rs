//! Shared helpers for the integration tests: locating the DSH fixture corpus and
//! comparing JSON with key order preserved.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[path = "../../../testkit/src/corpus.rs"]
mod corpus;

/// The DSH fixture corpus, or `None` (after one line saying `test` is skipped) when this
/// checkout has no `shared/` beside it; see `crates/testkit/src/corpus.rs`.
pub fn dsh_fixture_dir(test: &str) -> Option<PathBuf> {
    corpus::dsh_corpus(test)
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable fixture dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Parses JSON keeping key order (serde_json with `preserve_order`).
pub fn value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("test JSON does not parse: {e}: {text}"))
}

/// Canonical compact text of a value, key order kept: equal text means equal values
/// with equal key order.
pub fn canon(value: &serde_json::Value) -> String {
    serde_json::to_string(value).expect("serialisable")
}

/// A closer with the human-readable tool-result text blanked (not part of the contract).
pub fn without_closer_text(mut closer: serde_json::Value) -> serde_json::Value {
    if let Some(blocks) = closer.pointer_mut("/data/message/content/0/content") {
        if let Some(items) = blocks.as_array_mut() {
            for item in items {
                if let Some(text) = item.get_mut("text") {
                    *text = serde_json::Value::String(String::new());
                }
            }
        }
    }
    closer
}

/// The golden file of a log.
pub fn golden_for(root: &Path, log: &Path) -> serde_json::Value {
    let rel = log
        .strip_prefix(root.join("logs"))
        .expect("log under logs/");
    let golden = root
        .join("golden")
        .join(format!("{}.golden.json", rel.display()));
    value(&std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display())))
}

use sessionlog_session::{EventInput, FormatVersion, RuleSet, Session, SessionHeader, SurfaceOp};

/// An empty DSH V0 session.
pub fn empty_session() -> Session {
    Session::new(
        SessionHeader::new("s1", 1000, Some("/work")),
        FormatVersion::dsh_v0(),
    )
}

/// A DSH V0 session with turn 1 and its step 1 open (seqs 0 and 1), where the helpers'
/// user, assistant (turn 1, step 1) and tool-result events are valid native appends.
pub fn session_in_step() -> Session {
    let mut session = empty_session();
    for input in [
        EventInput::new("turn/start", 1000, r#"{"turn":1}"#),
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
    ] {
        if let Err(e) = session.try_append(input) {
            panic!("opening turn refused: {e}");
        }
    }
    session
}

/// A `user/message` input with id `id`.
pub fn user(id: &str, text: &str) -> EventInput {
    let data = format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
    );
    EventInput::new("user/message", 1000, data).with_surface_op(SurfaceOp::Append)
}

/// An `assistant/message` input with id `id`, text and tool calls.
pub fn assistant(id: &str, text: &str, calls: &[&str]) -> EventInput {
    let mut content = vec![format!(r#"{{"type":"text","text":"{text}"}}"#)];
    for call in calls {
        content.push(format!(
            r#"{{"type":"tool-call","id":"{call}","name":"bash","arguments":"{{}}"}}"#
        ));
    }
    let data = format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#,
        content.join(",")
    );
    EventInput::new("assistant/message", 1000, data).with_surface_op(SurfaceOp::Append)
}

/// A `tool/result` input answering `call` with message id `id`.
pub fn tool_result(id: &str, call: &str, text: &str) -> EventInput {
    let data = format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"{text}"}}]}}]}}}}"#
    );
    EventInput::new("tool/result", 1000, data).with_surface_op(SurfaceOp::Append)
}

/// Moves an [`assistant`] or [`tool_result`] input (written for turn 1, step 1) to `turn`
/// and `step`.
pub fn at_step(mut input: EventInput, turn: u32, step: u32) -> EventInput {
    input.data = input.data.replacen(
        r#"{"turn":1,"step":1,"#,
        &format!(r#"{{"turn":{turn},"step":{step},"#),
        1,
    );
    input
}

/// Turns an input into a replacement of `start..=end` citing `sources`.
pub fn replacing(input: EventInput, start: u64, end: u64, sources: &[u64]) -> EventInput {
    input
        .with_surface_op(SurfaceOp::Replace { start, end })
        .with_sources(sources.to_vec())
}

/// Appends under DSH's reader rules, or panics with the refusal: builds the DSH-shaped logs
/// (surface sequences without turns, as in the interop spec's worked examples) that the
/// surface and compaction tests replay, exactly as an import would accept them.
pub fn push(session: &mut Session, input: EventInput) -> u64 {
    match session.try_append_with(input, RuleSet::Dsh) {
        Ok(event) => event.seq().get(),
        Err(e) => panic!("test event refused: {e}"),
    }
}
