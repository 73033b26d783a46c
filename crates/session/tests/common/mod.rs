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

use sessionlog_session::{
    EventInput, FormatVersion, RuleSet, Seq, Session, SessionHeader, SurfaceOp,
};

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
    open_first_step(empty_session())
}

/// `session` (empty) with turn 1 and its step 1 opened.
pub fn open_first_step(mut session: Session) -> Session {
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
        .with_surface_op(SurfaceOp::Replace {
            start: Seq(start),
            end: Seq(end),
        })
        .with_sources(sources.iter().map(|&s| Seq(s)).collect())
}

/// Compacts `session` keeping the newest fifth of its surface estimate (compaction id `id`),
/// appends the transaction's events, and returns the shadowed nodes; panics unless it
/// compacted.
pub fn compact_keeping_a_fifth(
    session: &mut Session,
    summarizer: &mut dyn sessionlog_session::compaction::Summarizer,
    id: &str,
) -> Vec<sessionlog_session::Seq> {
    use sessionlog_session::compaction::{
        compact, CompactionContext, CompactionOutcome, CompactionPolicy, KeepRecent,
    };
    let projection = sessionlog_session::tokens::TokenProjection::from_session(
        session,
        std::sync::Arc::new(sessionlog_session::tokens::HeuristicCounter),
    )
    .expect("folds");
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Fraction(0.2));
    let outcome = compact(
        session,
        &projection,
        &policy,
        summarizer,
        &CompactionContext::new(id, 7),
    )
    .expect("plans");
    let CompactionOutcome::Compacted(report) = outcome else {
        panic!("expected a compaction, got {outcome:?}");
    };
    for event in report.events {
        session.try_append(event).expect("accepted");
    }
    report.shadowed
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

/// One step of a random agent session, for [`agent_session`].
#[derive(Debug, Clone)]
pub enum AgentStep {
    /// A user prompt.
    User,
    /// An assistant settlement reporting `prompt` prompt tokens (0: usage in no known
    /// shape), announcing `calls` tool calls.
    Assistant { calls: usize, prompt: u64 },
    /// Results for the first `answered` announced calls.
    Results { answered: usize },
    /// End the step, start the next.
    NextStep,
    /// End the turn, start the next.
    NextTurn,
    /// A new request envelope (`system` picks one of two prompts).
    Header { system: bool },
    /// A new context window.
    Context { window: u64 },
    /// Replace surface nodes `[from, from + len]` (positions modulo the surface length).
    Replace { from: usize, len: usize },
    /// A summary compaction (start, summary with usage, replacement, end) of the same range.
    Compact { from: usize, len: usize },
}

/// A strategy for [`AgentStep`]s.
pub fn agent_step() -> impl proptest::strategy::Strategy<Value = AgentStep> {
    use proptest::prelude::*;
    prop_oneof![
        3 => Just(AgentStep::User),
        3 => (0usize..3, 0u64..5000).prop_map(|(calls, prompt)| AgentStep::Assistant { calls, prompt }),
        2 => (0usize..3).prop_map(|answered| AgentStep::Results { answered }),
        1 => Just(AgentStep::NextStep),
        1 => Just(AgentStep::NextTurn),
        1 => any::<bool>().prop_map(|system| AgentStep::Header { system }),
        1 => (0u64..200_000).prop_map(|window| AgentStep::Context { window }),
        1 => (0usize..64, 0usize..4).prop_map(|(from, len)| AgentStep::Replace { from, len }),
        1 => (0usize..64, 0usize..4).prop_map(|(from, len)| AgentStep::Compact { from, len }),
    ]
}

/// Where a generated agent session stands.
#[derive(Debug, Clone, Default)]
pub struct AgentCursor {
    turn: u64,
    step: u64,
    calls: u64,
    pending: Vec<String>,
    id: usize,
}

/// The range `[from, from + len]` of the current surface (positions modulo its length).
fn surface_range(session: &Session, from: usize, len: usize) -> Option<Vec<u64>> {
    let surface = session.surface_state().to_vec();
    if surface.is_empty() {
        return None;
    }
    let first = from % surface.len();
    let last = (first + len).min(surface.len() - 1);
    Some(surface[first..=last].iter().map(|s| s.get()).collect())
}

/// The inputs `step` stands for at `cursor` on `session` (advancing the cursor).
pub fn agent_inputs(
    session: &Session,
    cursor: &mut AgentCursor,
    step: &AgentStep,
) -> Vec<EventInput> {
    cursor.id += 1;
    let id = cursor.id;
    let (t, s) = (cursor.turn, cursor.step);
    let at = format!(r#""turn":{t},"step":{s}"#);
    match *step {
        AgentStep::User => vec![user(&format!("u{id}"), &format!("prompt {id}"))],
        AgentStep::Assistant { calls, prompt } => {
            let mut content = vec![format!(r#"{{"type":"text","text":"answer {id}"}}"#)];
            for _ in 0..calls {
                cursor.calls += 1;
                let call = format!("c{}", cursor.calls);
                content.push(format!(
                    r#"{{"type":"tool-call","id":"{call}","name":"bash","arguments":"{{}}"}}"#
                ));
                cursor.pending.push(call);
            }
            let usage = if prompt == 0 {
                r#"{"unknownBucket":1}"#.to_owned()
            } else {
                format!(r#"{{"inputTokens":{prompt},"outputTokens":7,"cacheReadTokens":3}}"#)
            };
            let data = format!(
                r#"{{{at},"message":{{"id":"a{id}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{usage}}}"#,
                content.join(",")
            );
            vec![EventInput::new("assistant/message", 1000, data).with_surface_op(SurfaceOp::Append)]
        }
        AgentStep::Results { answered } => {
            let n = answered.min(cursor.pending.len());
            cursor
                .pending
                .drain(..n)
                .map(|call| {
                    at_step(
                        tool_result(&format!("r{id}-{call}"), &call, "done"),
                        t as u32,
                        s as u32,
                    )
                })
                .collect()
        }
        AgentStep::NextStep => {
            cursor.pending.clear();
            cursor.step += 1;
            vec![
                EventInput::new("step/end", 1000, format!("{{{at}}}")),
                EventInput::new(
                    "step/start",
                    1000,
                    format!(r#"{{"turn":{t},"step":{}}}"#, s + 1),
                ),
            ]
        }
        AgentStep::NextTurn => {
            cursor.pending.clear();
            cursor.turn += 1;
            cursor.step = 1;
            vec![
                EventInput::new("step/end", 1000, format!("{{{at}}}")),
                EventInput::new(
                    "turn/end",
                    1000,
                    format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
                ),
                EventInput::new("turn/start", 1000, format!(r#"{{"turn":{}}}"#, t + 1)),
                EventInput::new(
                    "step/start",
                    1000,
                    format!(r#"{{"turn":{},"step":1}}"#, t + 1),
                ),
            ]
        }
        AgentStep::Header { system } => {
            let prompt = if system {
                "You are terse."
            } else {
                "You are careful and thorough."
            };
            vec![EventInput::new(
                "request/header",
                1000,
                format!(
                    r#"{{"header":{{"config":{{"model":"m","provider":"p"}},"system":"{prompt}","tools":"[bash]"}},"reason":"initial"}}"#
                ),
            )]
        }
        AgentStep::Context { window } => vec![EventInput::new(
            "request/context",
            1000,
            format!(r#"{{"provider":"p","model":"m","contextWindow":{window}}}"#),
        )],
        AgentStep::Replace { from, len } => {
            let Some(shadowed) = surface_range(session, from, len) else {
                return Vec::new();
            };
            let (start, end) = (shadowed[0], shadowed[shadowed.len() - 1]);
            vec![replacing(
                user(&format!("x{id}"), "shorter"),
                start,
                end,
                &shadowed,
            )]
        }
        AgentStep::Compact { from, len } => {
            let Some(shadowed) = surface_range(session, from, len) else {
                return Vec::new();
            };
            let (start, end) = (shadowed[0], shadowed[shadowed.len() - 1]);
            let first = session.next_seq().get();
            let seqs: Vec<String> = shadowed.iter().map(u64::to_string).collect();
            let mut sources = vec![first, first + 1];
            sources.extend_from_slice(&shadowed);
            vec![
                EventInput::new(
                    "compaction/start",
                    1000,
                    format!(r#"{{"compactionId":"k{id}","turn":{t}}}"#),
                ),
                EventInput::new(
                    "compaction/summary",
                    1000,
                    format!(
                        r#"{{"compactionId":"k{id}","summary":[{{"type":"text","text":"sum"}}],"shadowedRange":{{"start":{start},"end":{end}}},"shadowedSeqs":[{}],"shadowedTokenCount":40,"provider":"p","model":"m","usage":{{"inputTokens":90,"outputTokens":5}}}}"#,
                        seqs.join(",")
                    ),
                ),
                replacing(user(&format!("k{id}-summary"), "sum"), start, end, &sources),
                EventInput::new(
                    "compaction/end",
                    1000,
                    format!(r#"{{"compactionId":"k{id}","turn":{t}}}"#),
                ),
            ]
        }
    }
}

/// A session of turn 1, step 1 followed by the events `steps` stand for, each appended
/// under DSH's reader rules (steps that would be refused are left out, whole).
pub fn agent_session(steps: &[AgentStep]) -> Session {
    let mut session = session_in_step();
    let mut cursor = AgentCursor::in_first_step();
    agent_steps(&mut session, &mut cursor, steps);
    session
}

impl AgentCursor {
    /// The cursor of a session in turn 1, step 1 ([`session_in_step`]).
    pub fn in_first_step() -> AgentCursor {
        AgentCursor {
            turn: 1,
            step: 1,
            ..AgentCursor::default()
        }
    }
}

/// Appends the events of `steps` to `session` (see [`agent_session`]).
pub fn agent_steps(session: &mut Session, cursor: &mut AgentCursor, steps: &[AgentStep]) {
    for step in steps {
        let inputs = agent_inputs(session, cursor, step);
        let _refused = session.atomically(|s| {
            inputs
                .into_iter()
                .try_for_each(|input| s.try_append_with(input, RuleSet::Dsh).map(drop))
        });
    }
}
