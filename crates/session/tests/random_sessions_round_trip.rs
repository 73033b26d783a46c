//! Random valid sessions (nested replacements, pruned tool results, chunk runs, opaque
//! events, interrupted turns) survive encode → decode → export → import unchanged, and
//! random invalid events are refused without changing the session.

mod common;

use proptest::prelude::*;
use sessionlog_session::{
    decode_event, decode_header, encode_event, encode_header, export_dsh, export_jsonl,
    import_jsonl, DshFormat, EventInput, ExportOptions, FormatVersion, ImportOptions, Seq, Session,
    SurfaceOp,
};

/// Interprets `choices` against the evolving session so every generated event is valid.
fn build(choices: &[(u8, u16)]) -> Session {
    let mut s = common::empty_session();
    let mut turn = 0u32;
    let mut step = 0u32;
    let mut in_turn = false;
    let mut in_step = false;
    // A surface event needs a step opened before it (its system head).
    let mut stepped = false;
    let mut calls: Vec<String> = Vec::new();
    let mut results: Vec<(u64, String, String, u32, u32)> = Vec::new();
    let mut time = 1_000i64;
    for (n, &(op, arg)) in choices.iter().enumerate() {
        time += i64::from(arg % 7) - 2;
        let id = format!("m{n}");
        let input = match op % 12 {
            0 if !in_turn => {
                turn += 1;
                in_turn = true;
                step = 0;
                calls.clear();
                EventInput::new("turn/start", time, format!(r#"{{"turn":{turn}}}"#))
            }
            1 if in_turn && !in_step => {
                step += 1;
                in_step = true;
                stepped = true;
                EventInput::new(
                    "step/start",
                    time,
                    format!(r#"{{"turn":{turn},"step":{step}}}"#),
                )
            }
            2 if in_turn && stepped => common::user(&id, &format!("text {arg}")),
            3 if in_step => {
                let count = usize::from(arg % 3);
                let new_calls: Vec<String> = (0..count).map(|k| format!("c{n}_{k}")).collect();
                calls.extend(new_calls.iter().cloned());
                let refs: Vec<&str> = new_calls.iter().map(String::as_str).collect();
                let text = if arg % 5 == 0 { "" } else { "answer" };
                let mut input = common::at_step(common::assistant(&id, text, &refs), turn, step);
                if arg % 4 == 0 {
                    input.data = input.data.replace(
                        r#""content":[{"type":"text","text":""}]"#,
                        r#""content":[]"#,
                    );
                }
                input
            }
            4 if in_step && !calls.is_empty() => {
                let call = &calls[usize::from(arg) % calls.len()];
                EventInput::new(
                    "tool/call",
                    time,
                    format!(
                        r#"{{"turn":{turn},"step":{step},"callId":"{call}","name":"bash","arguments":"{{\"n\":{arg}}}"}}"#
                    ),
                )
            }
            5 if in_step && !calls.is_empty() => {
                let call = calls.remove(usize::from(arg) % calls.len());
                let seq = s.next_seq().get();
                results.push((seq, id.clone(), call.clone(), turn, step));
                let output = "long output ".repeat(usize::from(arg % 4) + 1);
                common::at_step(common::tool_result(&id, &call, &output), turn, step)
            }
            6 if stepped && s.surface().len() >= 2 => {
                let surface: Vec<u64> = s.surface_state().iter().map(|n| n.get()).collect();
                let i = usize::from(arg) % surface.len();
                let j = i + usize::from(arg / 7) % (surface.len() - i);
                let (start, end) = (surface[i], surface[j]);
                let mut sources: Vec<u64> = surface[i..=j].to_vec();
                if arg % 3 == 0 {
                    sources.reverse();
                }
                common::replacing(common::user(&id, "summary"), start, end, &sources)
            }
            7 => {
                let live: Vec<&(u64, String, String, u32, u32)> = results
                    .iter()
                    .filter(|(seq, ..)| s.surface_state().contains(sessionlog_session::Seq(*seq)))
                    .collect();
                match live.get(usize::from(arg) % live.len().max(1)) {
                    Some((seq, msg_id, call, at_turn, at_step)) => common::replacing(
                        common::at_step(
                            common::tool_result(msg_id, call, "short"),
                            *at_turn,
                            *at_step,
                        ),
                        *seq,
                        *seq,
                        &[*seq],
                    ),
                    None => EventInput::new("todo/write", time, r#"{"todos":[]}"#),
                }
            }
            8 if in_step => {
                let seq = s.next_seq().get();
                for k in 0..u64::from(arg % 5) {
                    let chunk = format!(
                        r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"t{k}"}}}}"#
                    );
                    let mut input =
                        EventInput::new("assistant/chunk", time + (k as i64 % 3) - 1, chunk);
                    input.seq = Some(Seq(seq + k));
                    s.try_append(input).expect("chunk accepted");
                }
                EventInput::new(
                    "agent/inbox/spliced",
                    time,
                    r#"{"target":"next-turn","inserted":[]}"#,
                )
            }
            9 if in_step => {
                in_step = false;
                calls.clear();
                EventInput::new(
                    "step/end",
                    time,
                    format!(r#"{{"turn":{turn},"step":{step}}}"#),
                )
            }
            10 if in_turn && !in_step => {
                in_turn = false;
                EventInput::new(
                    "turn/end",
                    time,
                    format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
                )
            }
            11 => EventInput::new(
                "vendor/capability",
                time,
                format!(r#"{{"n":{arg},"x":-1.50e3}}"#),
            )
            .ignorable(),
            _ => EventInput::new("session/title", time, format!(r#"{{"title":"t{arg}"}}"#)),
        };
        if let Err(e) = s.try_append(input) {
            panic!("generated event refused at op {n}: {e}");
        }
    }
    s
}

fn round_trip(session: &Session) {
    let header = decode_header(&encode_header(session.header())).expect("header decodes");
    let events = session
        .events()
        .iter()
        .map(|e| decode_event(&encode_event(e)).expect("decodes"))
        .collect();
    let stored = Session::from_events(header, FormatVersion::dsh_v0(), events).expect("reopens");
    assert_eq!(&stored, session);
    let exported = export_jsonl(&stored);
    let imported =
        import_jsonl(&exported, &ImportOptions::default().with_repair(false)).expect("imports");
    assert!(imported.tail.is_none());
    assert_eq!(&imported.session, session);
    assert_eq!(export_jsonl(&imported.session), exported);
    let repaired = import_jsonl(&exported, &ImportOptions::default()).expect("imports with repair");
    let expected: Vec<String> = session
        .repair_closers()
        .expect("closers")
        .iter()
        .map(|c| c.raw().to_owned())
        .collect();
    let got: Vec<String> = repaired
        .closers
        .iter()
        .map(|s| repaired.session.event(*s).expect("closer").raw().to_owned())
        .collect();
    assert_eq!(got, expected);
    assert!(!repaired.session.turn_open());
}

/// Invalid by construction, whatever the session holds.
fn invalid_input(session: &Session, kind: u8, arg: u16) -> EventInput {
    let next = session.next_seq().get();
    let surface: Vec<u64> = session.surface_state().iter().map(|n| n.get()).collect();
    match kind % 9 {
        0 => EventInput::new("todo/write", 1, r#"{"todos":[],"n":-0}"#),
        1 => EventInput::new("todo/write", 1, r#"{"todos":[],"todos":[]}"#),
        2 => EventInput::new("todo/write", 1, r#"{"todos":[]}"#).with_surface_op(SurfaceOp::Append),
        3 => common::replacing(common::user("x", "x"), next + u64::from(arg), next, &[]),
        4 if surface.len() >= 2 => {
            let sources = surface[..surface.len() - 1].to_vec();
            common::replacing(
                common::user("x", "x"),
                surface[0],
                surface[surface.len() - 1],
                &sources,
            )
        }
        5 => EventInput::new(format!("unknown/type{arg}"), 1, "{}"),
        6 => EventInput {
            seq: Some(Seq(next + 1 + u64::from(arg))),
            ..common::user("x", "x")
        },
        7 => common::user("", "x"),
        _ => EventInput::new("todo/write", 1, r#"{"todos":[}"#),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_valid_sessions_round_trip(choices in prop::collection::vec((any::<u8>(), any::<u16>()), 0..120)) {
        let session = build(&choices);
        round_trip(&session);
    }

    #[test]
    fn random_valid_sessions_migrate_to_v4_or_are_refused_without_panicking(
        choices in prop::collection::vec((any::<u8>(), any::<u16>()), 0..120),
    ) {
        let session = build(&choices);
        let options = ExportOptions::default().with_format(Some(DshFormat::V4));
        match export_dsh(&session, &options) {
            Ok(v4) => {
                // What the migration writes is a V4 file sessionlog reads back and exports
                // as it was (plus the closers import adds to an open last turn).
                let back = import_jsonl(&v4, &ImportOptions::default()).expect("V4 imports");
                prop_assert_eq!(back.session.header().format(), DshFormat::V4);
                let again =
                    export_dsh(&back.session, &ExportOptions::default()).expect("V4 export");
                prop_assert!(again.starts_with(&v4));
            }
            Err(error) => prop_assert!(error.to_string().contains("DSH's own migration"), "{}", error),
        }
    }

    #[test]
    fn random_invalid_events_are_refused_without_change(
        choices in prop::collection::vec((any::<u8>(), any::<u16>()), 0..60),
        bad in prop::collection::vec((any::<u8>(), any::<u16>()), 1..12),
    ) {
        let mut session = build(&choices);
        let before = session.clone();
        let bytes = export_jsonl(&session);
        for (kind, arg) in bad {
            let input = invalid_input(&session, kind, arg);
            let shown = format!("{input:?}");
            prop_assert!(session.try_append(input).is_err(), "accepted {}", shown);
            prop_assert_eq!(&session, &before);
            prop_assert_eq!(export_jsonl(&session), bytes.clone());
        }
    }
}

/// Sessions whose V4 migration ends in a step with a tool call still pending: the result
/// import adds for that call must be a V4 tool message, or the migrated file does not read
/// back (cases proptest found).
#[test]
fn a_migrated_session_with_a_pending_call_reads_back_with_a_v4_closer() {
    let cases: [&[(u8, u16)]; 2] = [
        &[(36, 0), (181, 0), (51, 2335)],
        &[(132, 0), (169, 0), (0, 0), (0, 0), (231, 349)],
    ];
    for choices in cases {
        let session = build(choices);
        let options = ExportOptions::default().with_format(Some(DshFormat::V4));
        let v4 = export_dsh(&session, &options).expect("migrates");
        let back = import_jsonl(&v4, &ImportOptions::default()).expect("V4 imports");
        assert_eq!(
            back.closers.len(),
            3,
            "a result, step/end and turn/end close it"
        );
        let closer = back
            .session
            .events()
            .iter()
            .find(|e| e.event_type() == "tool/result");
        let closer = closer.expect("the pending call gets a result");
        let message = closer.data().get("message").expect("a message");
        assert_eq!(
            message.get("role").and_then(|r| r.as_str()).as_deref(),
            Some("tool")
        );
        let again = export_dsh(&back.session, &ExportOptions::default()).expect("V4 export");
        assert!(again.starts_with(&v4));
    }
}

/// A pruned tool result migrated to V4 replaces a `role: "tool"` message whose content is
/// the result itself; the migrated file must read back (a case proptest found).
#[test]
fn a_migrated_pruned_tool_result_reads_back_at_v4() {
    let choices = [
        (60, 0),
        (157, 0),
        (12, 0),
        (60, 0),
        (0, 0),
        (111, 7021),
        (12, 0),
        (65, 0),
        (175, 0),
    ];
    let session = build(&choices);
    let options = ExportOptions::default().with_format(Some(DshFormat::V4));
    let v4 = export_dsh(&session, &options).expect("migrates");
    let text = String::from_utf8_lossy(&v4);
    assert!(text.contains(r#""role":"tool""#) && text.contains(r#""startSeq""#));
    let back = import_jsonl(&v4, &ImportOptions::default()).expect("V4 imports");
    let again = export_dsh(&back.session, &ExportOptions::default()).expect("V4 export");
    assert!(again.starts_with(&v4));
}
