//! The current format version adds `system/message` (a surface node), `assistant/attempt`
//! (structural) and settlements carrying a compact timed stream record; DSH V0 refuses them.

mod common;

use common::{assistant, push, user};
use sessionlog_session::{
    Error, EventInput, FormatVersion, Rule, Session, SessionHeader, SurfaceOp,
};

fn current() -> Session {
    Session::new(SessionHeader::new("s2", 1, None), FormatVersion::current())
}

fn system() -> EventInput {
    EventInput::new(
        "system/message",
        1,
        r#"{"id":"sys","role":"system","content":[{"type":"text","text":"be brief"}]}"#,
    )
    .with_surface_op(SurfaceOp::Append)
}

#[test]
fn system_message_is_the_first_derived_message() {
    let mut s = current();
    push(&mut s, system());
    push(&mut s, user("u1", "hi"));
    assert_eq!(s.surface(), vec![0, 1]);
    let first = common::value(s.derive_messages()[0]);
    assert_eq!(first["role"], "system");
    assert_eq!(
        sessionlog_session::kind_tag(&s.events()[0]),
        sessionlog_session::codec::kind::SYSTEM_MESSAGE
    );
}

#[test]
fn dsh_v0_refuses_the_newer_types() {
    let mut s = common::empty_session();
    assert!(matches!(
        s.try_append(system()),
        Err(Error::UnknownEventType { .. })
    ));
}

#[test]
fn attempts_are_structural_and_checked() {
    let mut s = current();
    let attempt = r#"{"turn":1,"step":1,"outcome":"error","stream":{"time0":5,"dt":[1],"chunks":[{"type":"block-start"},{"type":"finish"}]}}"#;
    push(&mut s, EventInput::new("assistant/attempt", 1, attempt));
    assert!(s.surface().is_empty());
    let bad = EventInput::new(
        "assistant/attempt",
        1,
        r#"{"turn":1,"step":1,"outcome":"fine"}"#,
    );
    assert!(matches!(
        s.try_append(bad),
        Err(Error::Invalid {
            rule: Rule::Payload,
            ..
        })
    ));
    let on_surface =
        EventInput::new("assistant/attempt", 1, attempt).with_surface_op(SurfaceOp::Append);
    assert!(matches!(
        s.try_append(on_surface),
        Err(Error::Invalid {
            rule: Rule::SurfaceOp,
            ..
        })
    ));
}

#[test]
fn settlement_stream_records_are_validated() {
    let mut s = current();
    let mut good = assistant("a0", "hi", &[]);
    good.data = good.data.replacen('{', r#"{"stream":{"time0":9,"dt":[0,2],"chunks":[{"type":"block-start"},{"type":"text-delta","text":"hi"},{"type":"finish"}]},"#, 1);
    push(&mut s, good);
    let mut bad = assistant("a1", "hi", &[]);
    bad.data = bad.data.replacen(
        '{',
        r#"{"stream":{"time0":9,"dt":[],"chunks":[{"type":"a"},{"type":"b"}]},"#,
        1,
    );
    assert!(matches!(
        s.try_append(bad),
        Err(Error::Invalid {
            rule: Rule::Payload,
            ..
        })
    ));
}
