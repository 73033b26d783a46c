//! A refused append changes nothing: the session compares equal and exports the same
//! bytes, for every rule.

mod common;

use common::{assistant, empty_session, push, replacing, tool_result, user};
use sessionlog_session::{export_jsonl, Error, EventInput, Seq, SurfaceOp};

#[test]
fn every_kind_of_refusal_leaves_the_session_byte_identical() {
    let mut s = empty_session();
    push(&mut s, EventInput::new("turn/start", 1, r#"{"turn":1}"#));
    push(&mut s, user("u1", "hi"));
    push(&mut s, assistant("a2", "calling", &["c1"]));
    let before = s.clone();
    let before_bytes = export_jsonl(&s);
    let bad: Vec<EventInput> = vec![
        EventInput::new("turn/start", 1, r#"{"turn":-0}"#),
        EventInput::new("turn/start", 1, r#"{"turn":1,"turn":2}"#),
        EventInput::new("turn/start", 1, r#"{"turn":1e999}"#),
        EventInput::new("turn/start", 1, r#"{"turn":1"#),
        EventInput::new("no/such-type", 1, "{}"),
        EventInput::new(
            "user/message",
            1,
            r#"{"id":"x","role":"user","content":[],"source":{"kind":"user"}}"#,
        ),
        EventInput::new("step/start", 1, r#"{"turn":1,"step":1}"#)
            .with_surface_op(SurfaceOp::Append),
        user("", "empty id"),
        replacing(user("u9", "x"), 7, 7, &[1]),
        replacing(tool_result("r9", "c1", "x"), 1, 1, &[1]),
        user("u9", "x").with_sources(vec![Seq(9)]),
        EventInput::new(
            "request/header",
            1,
            r#"{"header":{"config":{"model":"m"}},"reason":"initial"}"#,
        ),
        EventInput {
            seq: Some(Seq(7)),
            ..user("u9", "x")
        },
    ];
    for input in bad {
        let description = format!("{input:?}");
        let result = s.try_append(input);
        assert!(result.is_err(), "accepted {description}");
        assert_eq!(s, before, "session changed after refusing {description}");
        assert_eq!(export_jsonl(&s), before_bytes);
    }
    let err = s
        .try_append(EventInput::new("no/such-type", 1, "{}"))
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownEventType { ref event_type, .. } if event_type == "no/such-type"),
        "{err}"
    );
    assert!(err.to_string().contains("no/such-type"));
    push(&mut s, EventInput::new("no/such-type", 1, "{}").ignorable());
}
