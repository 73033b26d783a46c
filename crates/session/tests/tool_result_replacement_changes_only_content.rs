//! Spec §11 (c): a tool-result replacement (the pruner) shadows exactly one tool result
//! and may change only its inner content; the message id stays.

mod common;

use common::{assistant, empty_session, push, replacing, tool_result, user};
use sessionlog_session::{Error, EventInput, Rule, Session};

fn with_result() -> Session {
    let mut s = empty_session();
    push(&mut s, user("u0", "run it"));
    push(&mut s, assistant("a1", "ok", &["c1"]));
    push(
        &mut s,
        EventInput::new(
            "tool/call",
            1000,
            r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}"#,
        ),
    );
    push(
        &mut s,
        tool_result("r3", "c1", "a very long output")
            .with_sources(vec![sessionlog_session::Seq(2)]),
    );
    s
}

#[test]
fn shortened_content_replaces_the_result_in_place() {
    let mut s = with_result();
    push(
        &mut s,
        replacing(tool_result("r3", "c1", "short"), 3, 3, &[3]),
    );
    assert_eq!(s.surface(), vec![0, 1, 4]);
    let third = common::value(s.derive_messages()[2]);
    assert_eq!(third["id"], "r3");
    assert_eq!(third["content"][0]["content"][0]["text"], "short");
}

#[test]
fn a_new_message_id_is_refused() {
    let mut s = with_result();
    let err = s
        .try_append(replacing(tool_result("r9", "c1", "short"), 3, 3, &[3]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::ToolResultReplace,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_two_node_range_is_refused() {
    let mut s = with_result();
    let err = s
        .try_append(replacing(tool_result("r3", "c1", "short"), 1, 3, &[1, 3]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::ToolResultReplace,
                ..
            }
        ),
        "{err}"
    );
}
