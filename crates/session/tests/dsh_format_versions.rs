//! DSH's format generations V0-V4: their vocabularies as DSH froze them, what each holds,
//! the export that picks the lowest format holding every event, and the refusals.

mod common;

use sessionlog_session::{
    export_dsh, export_format, import_jsonl, DshFormat, Error, EventInput, ExportOptions,
    ImportOptions, RuleSet, Seq, Session, SessionHeader, SurfaceOp, DSH_FORMAT_V0_ADDED_TYPES,
    DSH_V0_KNOWN_TYPES,
};

#[test]
fn v0_is_dsh_frozen_inventory_of_51_types_without_attempts_or_system_messages() {
    assert_eq!(DshFormat::V0.event_types().len(), 51);
    assert_eq!(
        DSH_V0_KNOWN_TYPES.len() + DSH_FORMAT_V0_ADDED_TYPES.len(),
        51
    );
    for rc8 in DSH_V0_KNOWN_TYPES {
        assert!(DshFormat::V0.knows(rc8), "{rc8} is in rc.8's vocabulary");
    }
    for added in [
        "model/selection",
        "session-log-deepseek/delivery-accepted",
        "subagent/model-selection-policy",
        "assistant/chunk",
    ] {
        assert!(DshFormat::V0.knows(added), "{added}");
    }
    for later in ["assistant/attempt", "system/message", "compact/start"] {
        assert!(!DshFormat::V0.knows(later), "{later} is not a V0 type");
    }
}

#[test]
fn each_later_format_has_its_own_vocabulary() {
    assert_eq!(DshFormat::V1.event_types(), DshFormat::V0.event_types());
    // V2: assistant/chunk folded into settlements and attempts.
    assert_eq!(DshFormat::V2.event_types().len(), 51);
    assert!(!DshFormat::V2.knows("assistant/chunk"));
    assert!(DshFormat::V2.knows("assistant/attempt"));
    // V3: 58 types; system/message on the surface, the code-dispatch pair renamed.
    assert_eq!(DshFormat::V3.event_types().len(), 58);
    assert!(DshFormat::V3.knows("system/message"));
    assert!(DshFormat::V3.knows("tool/ptc-dispatch"));
    assert!(!DshFormat::V3.knows("tool/code-dispatch"));
    // V4: 62 types, developer messages and jobs.
    assert_eq!(DshFormat::V4.event_types().len(), 62);
    for added in [
        "developer/message",
        "job/registered",
        "working-directory/change",
    ] {
        assert!(
            DshFormat::V4.knows(added) && !DshFormat::V3.knows(added),
            "{added}"
        );
    }
    assert_eq!(DshFormat::V0.file_name(false), "session.jsonl");
    assert_eq!(DshFormat::V4.file_name(true), "session.v4.jsonl.zstd");
}

fn session_with(events: &[EventInput]) -> Session {
    let mut session = Session::new(
        SessionHeader::new("s1", 1000, Some("/work")),
        sessionlog_session::FormatVersion::current(),
    );
    for event in events {
        session
            .try_append_with(event.clone(), RuleSet::Dsh)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    session
}

fn user(text: &str) -> EventInput {
    EventInput::new(
        "user/message",
        1001,
        format!(
            r#"{{"role":"user","id":"u-{text}","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
        ),
    )
    .with_surface_op(SurfaceOp::Append)
}

/// An attempt as sessionlog writes it (DSH V0 does not know the type, so it is ignorable).
fn attempt() -> EventInput {
    EventInput::new(
        "assistant/attempt",
        1002,
        r#"{"turn":1,"step":1,"outcome":"cancelled","stream":{"time0":1002,"dt":[],"chunks":[]}}"#,
    )
    .ignorable()
}

#[test]
fn a_v0_export_refuses_an_attempt_with_dsh_reason() {
    let attempt = attempt();
    let session = session_with(&[user("a"), attempt]);
    let err = export_dsh(
        &session,
        &ExportOptions::default().with_format(Some(DshFormat::V0)),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Export {
                format: DshFormat::V0,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(
            "format v0 contains unknown historical event type \"assistant/attempt\" at seq 1; \
             migration refuses unknown historical events even when ignorable"
        ),
        "{err}"
    );
}

#[test]
fn export_picks_the_lowest_format_holding_every_event() {
    let plain = session_with(&[user("a")]);
    assert_eq!(export_format(&plain).expect("a format"), DshFormat::V0);
    let attempt = attempt();
    let with_attempt = session_with(&[user("a"), attempt]);
    // V0 and V1 refuse an attempt even when ignorable (DSH's V1 -> V2 stage refuses every
    // type V1 lacks); V2 has the type.
    assert_eq!(
        export_format(&with_attempt).expect("a format"),
        DshFormat::V2
    );
    let file = export_dsh(&with_attempt, &ExportOptions::default()).expect("export");
    let text = String::from_utf8(file).expect("utf8");
    let header = text.lines().next().expect("header");
    assert!(header.contains(r#""version":2"#), "{header}");
    assert!(header.contains(r#""isSeeded":false"#), "{header}");
    let back = import_jsonl(
        text.as_bytes(),
        &ImportOptions::default().with_repair(false),
    )
    .expect("the V2 export imports");
    assert_eq!(back.session.header().format(), DshFormat::V2);
}

#[test]
fn a_session_declaring_a_later_format_refuses_an_event_that_format_lacks() {
    let header = r#"{"type":"session","version":2,"id":"s2","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;
    let file = format!("{header}\n");
    let mut session = import_jsonl(
        file.as_bytes(),
        &ImportOptions::default().with_repair(false),
    )
    .expect("an empty V2 file imports")
    .session;
    assert_eq!(session.header().format(), DshFormat::V2);
    // A type V2 does not have is refused by the vocabulary ...
    let chunk = EventInput::new(
        "assistant/chunk",
        5,
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
    );
    let err = session.try_append_with(chunk, RuleSet::Dsh).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownEventType { event_type, .. } if event_type == "assistant/chunk"),
        "{err}"
    );
    // ... and a type it has, in another format's shape, by the declared format.
    let settlement = EventInput::new(
        "assistant/message",
        6,
        r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"hi"}],"source":{"kind":"model","provider":"p","model":"m"}}}"#,
    )
    .with_surface_op(SurfaceOp::Append);
    let err = session
        .try_append_with(settlement, RuleSet::Dsh)
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotInFormat { format: DshFormat::V2, event_type, .. } if event_type == "assistant/message"),
        "{err}"
    );
    assert!(err.to_string().contains("lacks its stream record"), "{err}");
    assert_eq!(
        session.events().len(),
        0,
        "a refused event leaves nothing behind"
    );
}

#[test]
fn header_versions_follow_each_format_layout() {
    let v2_with_seed_length = r#"{"type":"session","version":2,"id":"s","createdAt":1,"seedLength":3,"delegationDepth":0}"#;
    assert!(matches!(
        SessionHeader::parse(v2_with_seed_length),
        Err(Error::Header { .. })
    ));
    let v1_with_is_seeded = r#"{"type":"session","version":1,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;
    assert!(matches!(
        SessionHeader::parse(v1_with_is_seeded),
        Err(Error::Header { .. })
    ));
    let v0 = SessionHeader::new("s", 7, Some("/w"));
    let v4 = v0
        .for_format(DshFormat::V4)
        .expect("an unseeded header crosses");
    assert_eq!(
        v4.raw(),
        r#"{"type":"session","version":4,"id":"s","createdAt":7,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#
    );
    assert_eq!(v4.for_format(DshFormat::V0).expect("back").raw(), v0.raw());
    let seeded = SessionHeader::parse(
        r#"{"type":"session","version":0,"id":"c","createdAt":1,"parentSession":"p","seedLength":4,"delegationDepth":1}"#,
    )
    .expect("seeded V0 header");
    assert!(seeded.for_format(DshFormat::V1).is_ok());
    assert!(seeded.for_format(DshFormat::V2).is_err(), "needs migration");
}

#[test]
fn a_v4_header_is_written_in_dsh_writer_order_with_its_defaults() {
    // DSH's V4 writer encodes the header from its fields, whatever order the older file had.
    let v0 = SessionHeader::parse(
        r#"{"delegationDepth":2,"cwd":"/w","id":"s","origin":"subagent","type":"session","createdAt":5,"agentPreset":"code","version":0}"#,
    )
    .expect("a V0 header in another order");
    assert_eq!(
        v0.for_format(DshFormat::V4).expect("unseeded").raw(),
        r#"{"type":"session","version":4,"id":"s","createdAt":5,"cwd":"/w","isSeeded":false,"origin":"subagent","delegationDepth":2,"agentPreset":"ptc"}"#
    );
    let without_depth = SessionHeader::parse(r#"{"type":"session","id":"s","createdAt":5}"#)
        .expect("a lenient V0 header");
    assert_eq!(
        without_depth
            .for_format(DshFormat::V4)
            .expect("unseeded")
            .raw(),
        r#"{"type":"session","version":4,"id":"s","createdAt":5,"isSeeded":false,"delegationDepth":0}"#
    );
}

#[test]
fn v2_writes_runs_of_cited_seqs_as_ranges_and_reads_them_back() {
    let mut events = vec![user("a"), user("b"), user("c"), user("d")];
    events.push(
        EventInput::new(
            "user/message",
            1003,
            r#"{"role":"user","id":"u-sum","content":[{"type":"text","text":"sum"}],"source":{"kind":"user"}}"#,
        )
        .with_surface_op(SurfaceOp::Replace { start: Seq(0), end: Seq(3) })
        .with_sources(vec![Seq(0), Seq(1), Seq(2), Seq(3)]),
    );
    let session = session_with(&events);
    let v2 = export_dsh(
        &session,
        &ExportOptions::default().with_format(Some(DshFormat::V2)),
    )
    .expect("V2 holds these events");
    let text = String::from_utf8(v2.clone()).expect("utf8");
    assert!(text.contains(r#""sourceEventSeqs":[[0,3]]"#), "{text}");
    let back = import_jsonl(&v2, &ImportOptions::default().with_repair(false)).expect("import V2");
    assert_eq!(
        back.session.events()[4].source_event_seqs(),
        Some(&[Seq(0), Seq(1), Seq(2), Seq(3)][..])
    );
    // At its own format the file comes back byte for byte; at V0 the list is spelled out.
    assert_eq!(
        export_dsh(&back.session, &ExportOptions::default()).expect("same"),
        v2
    );
    let v0 = export_dsh(
        &back.session,
        &ExportOptions::default().with_format(Some(DshFormat::V0)),
    )
    .expect("V0 too");
    assert_eq!(
        v0,
        export_dsh(&session, &ExportOptions::default()).expect("native V0")
    );
}
