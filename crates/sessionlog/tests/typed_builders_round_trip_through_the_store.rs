//! Sessions written with the typed builders through `SessionHandle::append` read back the
//! same after a reopen, derive the expected messages, export as DSH JSONL that imports
//! again, and a builder that cannot go where it is appended is refused without a trace.

use sessionlog::build::{
    AssistantMessage, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart, UserMessage,
};
use sessionlog::{Error, Rule, SessionError, SessionHeader, Store, StoreOptions};

fn options() -> StoreOptions {
    StoreOptions::default().with_log(sessionlog_testkit::small_segments())
}

fn write_turn(store: &Store) -> Vec<String> {
    let mut s = store
        .create_session(
            "s1",
            SessionHeader::new("s1", 1_700_000_000_000, Some("/work")),
        )
        .expect("create");
    s.append(TurnStart::new().at(1)).expect("turn");
    s.append(StepStart::new().at(2)).expect("step");
    s.append(UserMessage::text("list the files").at(3))
        .expect("user");
    s.append(
        AssistantMessage::new("deepseek", "deepseek-chat")
            .tool_call("c1", "ls", "{}")
            .at(4),
    )
    .expect("settlement");
    s.append(ToolCall::new("c1", "ls", "{}").at(5))
        .expect("call");
    s.append(ToolResult::text("c1", "a.txt").at(6))
        .expect("result");
    s.append(StepEnd::new().at(7)).expect("step end");
    s.append(TurnEnd::completed().at(8)).expect("turn end");
    s.commit().expect("commit");
    s.events_from(sessionlog::Seq(0))
        .expect("read back")
        .iter()
        .map(|e| e.raw().to_owned())
        .collect()
}

#[test]
fn built_events_read_back_after_reopen_and_derive_the_expected_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = {
        let store = Store::open(dir.path(), options()).expect("open");
        let written = write_turn(&store);
        store.close().expect("close");
        written
    };
    let store = Store::open(dir.path(), options()).expect("reopen");
    let (handle, closers) = store.open_session("s1").expect("open session");
    assert!(closers.is_empty(), "the turn was closed");
    let events = handle.events_from(sessionlog::Seq(0)).expect("read back");
    let read: Vec<&str> = events.iter().map(|e| e.raw()).collect();
    assert_eq!(read, written);
    assert_eq!(
        read[5],
        r#"{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"tool-result-5","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.txt"}]}],"source":{"kind":"tool","callId":"c1"}}},"sourceEventSeqs":[4],"surfaceOp":"append"}"#
    );
    drop(handle);
    let view = store.view("s1").expect("view");
    assert_eq!(
        view.surface.derive_messages(),
        vec![
            r#"{"id":"user-2","role":"user","content":[{"type":"text","text":"list the files"}],"source":{"kind":"user"}}"#,
            r#"{"id":"assistant-3","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}}"#,
            r#"{"id":"tool-result-5","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.txt"}]}],"source":{"kind":"tool","callId":"c1"}}"#,
        ]
    );
    let exported = store.export_dsh("s1").expect("export");
    let imported = store
        .import_dsh(&exported, Some("copy"))
        .expect("the export imports");
    assert_eq!(imported.events, 8);
    assert_eq!(store.export_dsh("copy").expect("export copy"), exported);
}

#[test]
fn a_builder_appended_where_it_cannot_go_is_refused_without_a_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), options()).expect("open");
    let mut s = store
        .create_session("s1", SessionHeader::new("s1", 0, None))
        .expect("create");
    let refused = |e: Error, wanted: Rule| {
        assert!(
            matches!(e, Error::Session(SessionError::Invalid { rule, .. }) if rule == wanted),
            "{e}"
        );
    };
    refused(
        s.append(StepStart::new()).expect_err("no turn"),
        Rule::Nesting,
    );
    s.append(TurnStart::new()).expect("turn");
    refused(
        s.append(UserMessage::text("hi")).expect_err("no step yet"),
        Rule::SystemHead,
    );
    s.append(StepStart::new()).expect("step");
    refused(
        s.append(ToolResult::text("c9", "x"))
            .expect_err("no such call"),
        Rule::ToolPairing,
    );
    s.commit().expect("commit");
    assert_eq!(s.next_seq().get(), 2);
    assert_eq!(
        s.events_from(sessionlog::Seq(0)).expect("read back").len(),
        2
    );
    assert_eq!(store.view("s1").expect("view").events, 2);
}
