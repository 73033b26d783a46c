//! The typed builders write every event of a turn without JSON by hand: turn and step
//! numbers, `surfaceOp`, a result's step and `sourceEventSeqs` come from the session, the
//! payloads are DSH's shapes (the log imports again under DSH's rules), and the derived
//! messages are the expected ones.

mod common;

use common::empty_session;
use sessionlog_session::build::SummaryMessage;
use sessionlog_session::build::{
    AbortCause, AssistantMessage, CompactionEnd, CompactionStart, CompactionSummary, HeaderReason,
    RequestContext, RequestHeader, StepEnd, StepStart, ToolCall, ToolResult, ToolSchema, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use sessionlog_session::tokens::Usage;
use sessionlog_session::{export_jsonl, import_jsonl, Error, ImportOptions, Rule, Seq, Session};

fn one_turn() -> Session {
    let mut s = empty_session();
    s.try_append(TurnStart::new().at(10)).expect("turn");
    s.try_append(StepStart::new()).expect("step");
    let tool = ToolSchema {
        name: "ls".into(),
        description: "lists files".into(),
        parameters: r#"{"type":"object"}"#.into(),
    };
    s.try_append(
        RequestHeader::new("deepseek", "deepseek-chat", HeaderReason::Initial)
            .system("be brief")
            .tool(tool),
    )
    .expect("header");
    s.try_append(RequestContext::new("deepseek", "deepseek-chat").context_window(65536))
        .expect("context");
    s.try_append(UserMessage::text("what is here?"))
        .expect("user");
    let usage = Usage {
        input: 12,
        output: 3,
        ..Usage::default()
    };
    s.try_append(
        AssistantMessage::new("deepseek", "deepseek-chat")
            .reasoning("look first")
            .tool_call("c1", "ls", "{}")
            .usage(usage),
    )
    .expect("settlement");
    s.try_append(ToolCall::new("c1", "ls", "{}")).expect("call");
    s.try_append(ToolResult::text("c1", "a.txt"))
        .expect("result");
    s.try_append(StepEnd::new()).expect("step end");
    s.try_append(StepStart::new()).expect("second step");
    s.try_append(AssistantMessage::new("deepseek", "deepseek-chat").text("one file"))
        .expect("answer");
    s.try_append(StepEnd::new()).expect("step end");
    s.try_append(TurnEnd::completed()).expect("turn end");
    s
}

#[test]
fn builders_fill_numbers_surface_ops_and_sources_from_the_session() {
    let s = one_turn();
    let raw: Vec<&str> = s.events().iter().map(|e| e.raw()).collect();
    assert_eq!(
        raw[0],
        r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#
    );
    assert_eq!(
        raw[1],
        r#"{"type":"step/start","seq":1,"time":10,"data":{"turn":1,"step":1}}"#
    );
    assert_eq!(
        raw[7],
        r#"{"type":"tool/result","seq":7,"time":10,"data":{"turn":1,"step":1,"message":{"id":"tool-result-7","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.txt"}]}],"source":{"kind":"tool","callId":"c1"}}},"sourceEventSeqs":[6],"surfaceOp":"append"}"#
    );
    assert_eq!(
        raw[9],
        r#"{"type":"step/start","seq":9,"time":10,"data":{"turn":1,"step":2}}"#
    );
    assert_eq!(
        raw[12],
        r#"{"type":"turn/end","seq":12,"time":10,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
    );
}

#[test]
fn builders_derive_the_expected_messages() {
    let s = one_turn();
    assert_eq!(
        s.derive_messages(),
        vec![
            r#"{"id":"user-4","role":"user","content":[{"type":"text","text":"what is here?"}],"source":{"kind":"user"}}"#,
            r#"{"id":"assistant-5","role":"assistant","content":[{"type":"reasoning","text":"look first"},{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}}"#,
            r#"{"id":"tool-result-7","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.txt"}]}],"source":{"kind":"tool","callId":"c1"}}"#,
            r#"{"id":"assistant-10","role":"assistant","content":[{"type":"text","text":"one file"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}}"#,
        ]
    );
}

#[test]
fn a_built_session_imports_again_under_dshs_rules() {
    let s = one_turn();
    let import = import_jsonl(&export_jsonl(&s), &ImportOptions::default()).expect("imports");
    assert_eq!(import.session.events(), s.events());
    assert!(import.closers.is_empty());
    for event in s.events() {
        event.view().expect("every built event has a typed view");
    }
}

#[test]
fn turn_numbers_continue_and_every_end_reason_is_written() {
    let mut s = one_turn();
    let reasons = [
        TurnEndReason::Aborted(AbortCause::User),
        TurnEndReason::Aborted(AbortCause::Hook("policy".into())),
        TurnEndReason::Error {
            message: "overloaded".into(),
            code: "HTTP_529".into(),
        },
        TurnEndReason::Blocked,
        TurnEndReason::MaxTokens,
    ];
    for (i, reason) in reasons.into_iter().enumerate() {
        let start = s.try_append(TurnStart::new()).expect("turn").clone();
        let turn = i as i64 + 2;
        assert_eq!(
            start.data().get("turn").and_then(|t| t.as_safe_integer()),
            Some(turn)
        );
        s.try_append(TurnEnd::new(reason)).expect("end");
    }
    let import = import_jsonl(&export_jsonl(&s), &ImportOptions::default()).expect("imports");
    assert_eq!(import.session.events().len(), s.events().len());
}

#[test]
fn a_failed_tool_result_carries_its_error() {
    let mut s = empty_session();
    s.try_append(TurnStart::new()).expect("turn");
    s.try_append(StepStart::new()).expect("step");
    s.try_append(AssistantMessage::new("p", "m").tool_call("c1", "rm", "{}"))
        .expect("settlement");
    let result = s
        .try_append(ToolResult::error(
            "c1",
            "denied",
            "PermissionError",
            "DENIED",
        ))
        .expect("error result")
        .clone();
    assert_eq!(
        result.data().get("error").map(|e| e.raw().to_owned()),
        Some(r#"{"name":"PermissionError","code":"DENIED"}"#.to_owned())
    );
    assert_eq!(result.source_event_seqs(), None, "no tool/call was logged");
}

#[test]
fn a_builder_that_cannot_go_here_is_refused_before_anything_changes() {
    let mut s = empty_session();
    let before = s.clone();
    let err = s.try_append(StepStart::new()).expect_err("no turn open");
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::Nesting,
                ..
            }
        ),
        "{err}"
    );
    let err = s
        .try_append(ToolResult::text("c1", "x"))
        .expect_err("no turn open");
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::Nesting,
                ..
            }
        ),
        "{err}"
    );
    s.try_append(TurnStart::new()).expect("turn");
    let err = s
        .try_append(ToolResult::text("c1", "x"))
        .expect_err("no such call");
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::ToolPairing,
                ..
            }
        ),
        "{err}"
    );
    let mut fresh = before.clone();
    fresh.try_append(TurnStart::new()).expect("turn");
    assert_eq!(s, fresh, "refused builders changed nothing");
}

#[test]
fn compaction_builders_write_a_valid_transaction() {
    let mut s = one_turn();
    let before = s.derive_messages().len();
    let start = s
        .try_append(CompactionStart::new("k1"))
        .expect("start")
        .seq();
    let shadowed = vec![Seq(4), Seq(5), Seq(7)];
    let summary = s
        .try_append(CompactionSummary::new(
            "k1",
            "listed a.txt",
            shadowed.clone(),
            40,
            "p",
            "m",
        ))
        .expect("summary")
        .seq();
    s.try_append(SummaryMessage::new(
        "k1",
        "listed a.txt",
        shadowed,
        vec![start, summary],
    ))
    .expect("replacement");
    s.try_append(CompactionEnd::new("k1")).expect("end");
    assert_eq!(s.derive_messages().len(), before - 2);
    assert!(s.derive_messages()[0].contains("listed a.txt"));
    let import = import_jsonl(&export_jsonl(&s), &ImportOptions::default()).expect("imports");
    assert_eq!(import.session.surface(), s.surface());
}

#[test]
fn stream_chunks_todos_and_the_end_seed_are_built_and_packed_on_export() {
    use sessionlog_session::build::{AssistantChunk, Block, EndSeed, TodoStatus, TodoWrite};
    let mut s = empty_session();
    s.try_append(TurnStart::new().at(1)).expect("turn");
    s.try_append(StepStart::new()).expect("step");
    s.try_append(UserMessage::text("hi")).expect("user");
    s.try_append(AssistantChunk::block_start(0, "text"))
        .expect("start");
    for piece in ["Hel", "lo ", "the", "re"] {
        s.try_append(AssistantChunk::text_delta(0, piece))
            .expect("delta");
    }
    s.try_append(AssistantChunk::block_end(
        0,
        Block::Text("Hello there".into()),
    ))
    .expect("end");
    s.try_append(AssistantChunk::tool_call_delta(1, "c1", Some("ls"), "{}"))
        .expect("call delta");
    s.try_append(AssistantChunk::usage(Usage {
        input: 3,
        output: 3,
        ..Usage::default()
    }))
    .expect("usage");
    s.try_append(AssistantChunk::finish("stop"))
        .expect("finish");
    s.try_append(TodoWrite::new().todo("answer", TodoStatus::InProgress))
        .expect("todos");
    s.try_append(AssistantMessage::new("p", "m").text("Hello there"))
        .expect("settlement");
    s.try_append(StepEnd::new()).expect("step end");
    s.try_append(TurnEnd::completed()).expect("turn end");
    s.try_append(EndSeed::new()).expect("end seed");
    let raw: Vec<&str> = s.events().iter().map(|e| e.raw()).collect();
    assert_eq!(
        raw[4],
        r#"{"type":"assistant/chunk","seq":4,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hel"}}}"#
    );
    assert_eq!(
        raw[9],
        r#"{"type":"assistant/chunk","seq":9,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"ls","argumentsDelta":"{}"}}}"#
    );
    assert_eq!(
        raw[12],
        r#"{"type":"todo/write","seq":12,"time":1,"data":{"todos":[{"content":"answer","status":"in_progress"}]}}"#
    );
    let exported = export_jsonl(&s);
    let text = String::from_utf8(exported.clone()).expect("utf8");
    assert!(
        text.contains(r#""type":"text-chunks""#),
        "the deltas are packed: {text}"
    );
    let import = import_jsonl(&exported, &ImportOptions::default()).expect("imports");
    assert_eq!(import.session.events(), s.events());
    for event in s.events() {
        event.view().expect("every built event has a typed view");
    }
}
