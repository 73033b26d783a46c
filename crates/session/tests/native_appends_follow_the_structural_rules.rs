//! Native appends obey DSH's reader and the structural rules (turn/step nesting, typed
//! turn and step numbers, one `turn/end` per turn, calls and results only for announced
//! calls, no surface event before the first step); each refusal names its rule and leaves
//! the session unchanged. Import stays as lenient as DSH's reader.

mod common;

use common::{assistant, empty_session, tool_result, user};
use sessionlog_session::build::{AssistantMessage, StepStart, ToolCall, TurnStart, UserMessage};
use sessionlog_session::{
    export_jsonl, import_jsonl, Error, EventInput, ImportOptions, Rule, RuleSet, Session,
};

/// `turn/start{1}`, `step/start{1,1}`, a user message, and an assistant settlement
/// announcing call `c1` (seqs 0..=3).
fn in_step_with_call() -> Session {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    s.try_append(StepStart::new()).expect("step");
    s.try_append(UserMessage::text("hi")).expect("user");
    s.try_append(AssistantMessage::new("p", "m").tool_call("c1", "bash", "{}"))
        .expect("settlement");
    s
}

/// Appends `input` natively and returns the rule it broke; the session must be unchanged.
fn refused_rule(s: &mut Session, input: EventInput) -> Rule {
    let before = s.clone();
    let err = s.try_append(input).expect_err("the event must be refused");
    assert_eq!(*s, before, "a refused event changed the session");
    match err {
        Error::Invalid { rule, .. } => rule,
        other => panic!("refused for another reason: {other}"),
    }
}

fn raw(event_type: &str, data: &str) -> EventInput {
    EventInput::new(event_type, 5, data)
}

#[test]
fn assistant_message_with_no_turn_open_is_refused() {
    let mut s = empty_session();
    assert_eq!(
        refused_rule(&mut s, assistant("a0", "hello", &[])),
        Rule::Nesting
    );
}

#[test]
fn assistant_message_with_no_step_open_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    assert_eq!(
        refused_rule(&mut s, assistant("a1", "hello", &[])),
        Rule::Nesting
    );
}

#[test]
fn event_naming_another_step_than_the_open_one_is_refused() {
    let mut s = in_step_with_call();
    let wrong_step = raw(
        "tool/call",
        r#"{"turn":1,"step":2,"callId":"c1","name":"bash","arguments":"{}"}"#,
    );
    assert_eq!(refused_rule(&mut s, wrong_step), Rule::Nesting);
}

#[test]
fn tool_result_for_unknown_call_is_refused() {
    let mut s = in_step_with_call();
    assert_eq!(
        refused_rule(&mut s, tool_result("r4", "c9", "out")),
        Rule::ToolPairing
    );
}

#[test]
fn second_tool_result_for_one_call_is_refused() {
    let mut s = in_step_with_call();
    s.try_append(tool_result("r4", "c1", "out"))
        .expect("first result");
    assert_eq!(
        refused_rule(&mut s, tool_result("r5", "c1", "again")),
        Rule::ToolPairing
    );
}

#[test]
fn tool_result_with_no_turn_open_is_refused() {
    let mut s = empty_session();
    assert_eq!(
        refused_rule(&mut s, tool_result("r0", "c1", "out")),
        Rule::Nesting
    );
}

#[test]
fn tool_call_for_an_unannounced_call_is_refused() {
    let mut s = in_step_with_call();
    s.try_append(ToolCall::new("c1", "bash", "{}"))
        .expect("announced call");
    let unannounced = raw(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c2","name":"bash","arguments":"{}"}"#,
    );
    assert_eq!(refused_rule(&mut s, unannounced), Rule::ToolPairing);
}

#[test]
fn turn_end_with_no_turn_open_is_refused() {
    let mut s = empty_session();
    let end = raw("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#);
    assert_eq!(refused_rule(&mut s, end), Rule::Nesting);
}

#[test]
fn second_turn_end_for_the_same_turn_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let end = raw("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#);
    s.try_append(end.clone()).expect("first end");
    assert_eq!(refused_rule(&mut s, end), Rule::Nesting);
}

#[test]
fn turn_end_for_another_turn_than_the_open_one_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let end = raw("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#);
    assert_eq!(refused_rule(&mut s, end), Rule::Nesting);
}

#[test]
fn turn_start_without_a_numeric_turn_is_refused() {
    let mut s = empty_session();
    assert_eq!(refused_rule(&mut s, raw("turn/start", "{}")), Rule::Payload);
    assert_eq!(
        refused_rule(&mut s, raw("turn/start", r#"{"turn":"two"}"#)),
        Rule::Payload
    );
    assert_eq!(
        refused_rule(&mut s, raw("turn/start", r#"{"turn":1.5}"#)),
        Rule::Payload
    );
}

#[test]
fn turn_start_while_a_turn_is_open_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    assert_eq!(
        refused_rule(&mut s, raw("turn/start", r#"{"turn":2}"#)),
        Rule::Nesting
    );
}

#[test]
fn step_start_for_a_turn_that_does_not_exist_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let step = raw("step/start", r#"{"turn":7,"step":1}"#);
    assert_eq!(refused_rule(&mut s, step), Rule::Nesting);
    let mut closed = empty_session();
    let step = raw("step/start", r#"{"turn":1,"step":1}"#);
    assert_eq!(refused_rule(&mut closed, step), Rule::Nesting);
}

#[test]
fn step_start_while_a_step_is_open_is_refused() {
    let mut s = in_step_with_call();
    let step = raw("step/start", r#"{"turn":1,"step":2}"#);
    assert_eq!(refused_rule(&mut s, step), Rule::Nesting);
}

#[test]
fn step_end_with_no_step_open_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let end = raw("step/end", r#"{"turn":1,"step":1}"#);
    assert_eq!(refused_rule(&mut s, end), Rule::Nesting);
}

#[test]
fn user_message_with_no_turn_open_is_refused() {
    let mut s = empty_session();
    assert_eq!(refused_rule(&mut s, user("u0", "hi")), Rule::Nesting);
}

#[test]
fn surface_event_before_the_first_step_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let err = s
        .try_append(user("u1", "hi"))
        .expect_err("no system head yet");
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::SystemHead,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("step/start"), "{err}");
}

#[test]
fn surface_event_without_surface_op_is_refused() {
    let mut s = in_step_with_call();
    let bare = raw(
        "user/message",
        r#"{"id":"u4","role":"user","content":[],"source":{"kind":"user"}}"#,
    );
    assert_eq!(refused_rule(&mut s, bare), Rule::SurfaceOp);
}

#[test]
fn data_that_is_not_exactly_one_json_value_is_refused() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    let spliced = raw("step/start", r#"{"turn":1,"step":1},"ignorable":true"#);
    assert_eq!(refused_rule(&mut s, spliced), Rule::LosslessJson);
    assert_eq!(
        refused_rule(&mut s, raw("session/end-seed", "")),
        Rule::LosslessJson
    );
}

#[test]
fn import_stays_as_lenient_as_dsh_for_the_structural_rules() {
    // A log DSH 0.1.0-rc.8 loads: a user message before any turn or step, an assistant
    // settlement outside a step, a turn numbered by a string, a second turn/end. Each event
    // breaks a native rule.
    let mut s = empty_session();
    let lenient = [
        user("u0", "hi"),
        assistant("a1", "hello", &[]),
        raw("turn/start", r#"{"turn":"two"}"#),
        raw(
            "turn/end",
            r#"{"turn":"two","reason":{"kind":"completed"}}"#,
        ),
        raw(
            "turn/end",
            r#"{"turn":"two","reason":{"kind":"completed"}}"#,
        ),
    ];
    for input in lenient {
        let mut native = s.clone();
        assert!(
            native.try_append(input.clone()).is_err(),
            "native accepted {input:?}"
        );
        s.try_append_with(input, RuleSet::Dsh)
            .expect("DSH's rules accept it");
    }
    let file = export_jsonl(&s);
    let import = import_jsonl(&file, &ImportOptions::default()).expect("import accepts it");
    assert_eq!(import.session.events(), s.events());
}

#[test]
fn surface_event_without_surface_op_is_refused_at_import_too() {
    // DSH's reader refuses it as well, so import does not relax this rule.
    let file = concat!(
        r#"{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}"#,
        "\n",
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u0","role":"user","content":[],"source":{"kind":"user"}}}"#,
        "\n",
    );
    let err = import_jsonl(file.as_bytes(), &ImportOptions::default())
        .expect_err("DSH refuses a surface event without surfaceOp");
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::SurfaceOp,
                ..
            }
        ),
        "{err}"
    );
}

/// A tool result's message holds exactly one block, `{type: "tool-result", toolCallId:
/// source.callId, content: [...]}`: every other content is refused as a message shape, the
/// one block accepted, whatever the order of its keys and however long its text.
#[test]
fn a_tool_result_holds_exactly_one_tool_result_block_for_its_call() {
    let result = |content: &str| {
        let data = format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"r1","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":{content}}}}}"#
        );
        EventInput::new("tool/result", 1000, data)
            .with_surface_op(sessionlog_session::SurfaceOp::Append)
    };
    let block =
        r#"{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out"}]}"#;
    let refused = [
        "[]".to_owned(),
        format!("[{block},{block}]"),
        format!(r#"[{block},"x"]"#),
        r#"["x"]"#.to_owned(),
        "[1]".to_owned(),
        "[[]]".to_owned(),
        r#"[{"type":"text","toolCallId":"c1","content":[]}]"#.to_owned(),
        r#"[{"toolCallId":"c1","content":[]}]"#.to_owned(),
        r#"[{"type":"tool-result","toolCallId":"c2","content":[]}]"#.to_owned(),
        r#"[{"type":"tool-result","content":[]}]"#.to_owned(),
        r#"[{"type":"tool-result","toolCallId":"c1","content":"out"}]"#.to_owned(),
        r#"[{"type":"tool-result","toolCallId":"c1"}]"#.to_owned(),
    ];
    for content in refused {
        let mut s = in_step_with_call();
        assert_eq!(
            refused_rule(&mut s, result(&content)),
            Rule::MessageShape,
            "{content}"
        );
    }
    let long = "y".repeat(5000);
    let accepted = [
        format!("[{block}]"),
        r#"[ {"content":[],"toolCallId":"c1","type":"tool-result","isError":true} ]"#.to_owned(),
        format!(
            r#"[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"{long}"}}]}}]"#
        ),
    ];
    for content in accepted {
        let mut s = in_step_with_call();
        s.try_append(result(&content))
            .unwrap_or_else(|e| panic!("{content}: {e}"));
    }
}
