//! Invalid events through the store's write path (`SessionHandle::append`): each is refused
//! with a specific error, and the session is byte-identical afterwards (its export, its
//! stored records, and the handle's in-memory session), and the handle keeps working.

use sessionlog::session::{Error as SessionError, EventInput, Rule, Seq, SessionHeader, SurfaceOp};
use sessionlog::{Error, LogOptions, SessionHandle, Store, StoreOptions};

const MAX_RECORD_BYTES: usize = 4096;

fn user(id: &str, text: &str) -> EventInput {
    let data = format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
    );
    EventInput::new("user/message", 1000, data).with_surface_op(SurfaceOp::Append)
}

fn assistant(id: &str, text: &str, calls: &[&str]) -> EventInput {
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

fn tool_result(id: &str, call: &str, text: &str) -> EventInput {
    let data = format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"{text}"}}]}}]}}}}"#
    );
    EventInput::new("tool/result", 1000, data).with_surface_op(SurfaceOp::Append)
}

fn replacing(input: EventInput, start: u64, end: u64, sources: &[u64]) -> EventInput {
    input
        .with_surface_op(SurfaceOp::Replace {
            start: Seq(start),
            end: Seq(end),
        })
        .with_sources(sources.iter().map(|&s| Seq(s)).collect())
}

/// A store in a temporary directory with one session: `turn/start` (seq 0), `step/start` (1),
/// a user message (2) and an assistant message (3) on the surface. Everything committed.
fn store_with_session() -> (tempfile::TempDir, Store, SessionHandle) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = StoreOptions::default().with_log(
        LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_max_record_bytes(MAX_RECORD_BYTES)
            .with_preallocate(false),
    );
    let store = Store::open(dir.path(), options).expect("open store");
    let mut handle = store
        .create_session("s1", SessionHeader::new("s1", 1000, Some("/work")))
        .expect("create session");
    for input in [
        EventInput::new("turn/start", 1000, r#"{"turn":1}"#),
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
        user("u1", "hello"),
        assistant("a2", "hi there", &[]),
    ] {
        handle.append(input).expect("valid event");
    }
    handle.commit().expect("commit");
    (dir, store, handle)
}

/// What a refusal must be.
type Expect = fn(&Error) -> bool;

fn rule(e: &Error, wanted: Rule) -> bool {
    matches!(e, Error::Session(SessionError::Invalid { rule, .. }) if *rule == wanted)
}

fn lossless_json(e: &Error) -> bool {
    rule(e, Rule::LosslessJson)
}

fn cases() -> Vec<(&'static str, EventInput, Expect)> {
    let oversized = "x".repeat(MAX_RECORD_BYTES + 1);
    vec![
        (
            "malformed JSON (unterminated object)",
            EventInput::new("turn/start", 1, r#"{"turn":1"#),
            lossless_json,
        ),
        (
            "malformed JSON (trailing comma)",
            EventInput::new("turn/start", 1, r#"{"turn":1,}"#),
            lossless_json,
        ),
        (
            "malformed JSON (empty payload)",
            EventInput::new("turn/start", 1, ""),
            lossless_json,
        ),
        (
            "negative zero",
            EventInput::new("vendor/x", 1, r#"{"n":-0}"#).ignorable(),
            lossless_json,
        ),
        (
            "negative zero spelled -0.0e5",
            EventInput::new("vendor/x", 1, r#"{"n":-0.0e5}"#).ignorable(),
            lossless_json,
        ),
        (
            "NaN literal",
            EventInput::new("vendor/x", 1, r#"{"n":NaN}"#).ignorable(),
            lossless_json,
        ),
        (
            "Infinity literal",
            EventInput::new("vendor/x", 1, r#"{"n":Infinity}"#).ignorable(),
            lossless_json,
        ),
        (
            "-Infinity literal",
            EventInput::new("vendor/x", 1, r#"{"n":-Infinity}"#).ignorable(),
            lossless_json,
        ),
        (
            "a number that overflows a double",
            EventInput::new("vendor/x", 1, r#"{"n":1e999}"#).ignorable(),
            lossless_json,
        ),
        (
            "a negative number that overflows a double",
            EventInput::new("vendor/x", 1, r#"{"n":-123456789e400}"#).ignorable(),
            lossless_json,
        ),
        (
            "a time that is not a safe integer",
            EventInput::new("turn/start", 9_007_199_254_740_993, r#"{"turn":2}"#),
            |e| rule(e, Rule::Envelope),
        ),
        (
            "duplicate keys",
            EventInput::new("vendor/x", 1, r#"{"a":1,"b":2,"a":3}"#).ignorable(),
            lossless_json,
        ),
        (
            "duplicate keys spelled differently (escape)",
            EventInput::new("vendor/x", 1, r#"{"a":1,"\u0061":2}"#).ignorable(),
            lossless_json,
        ),
        (
            "unknown type without ignorable",
            EventInput::new("vendor/unknown", 1, "{}"),
            |e| {
                matches!(e, Error::Session(SessionError::UnknownEventType { event_type, .. })
                    if event_type == "vendor/unknown")
            },
        ),
        (
            "replace range whose endpoints are not surface nodes",
            replacing(user("u9", "x"), 7, 7, &[1]),
            |e| rule(e, Rule::ReplaceRange) || rule(e, Rule::SourceEventSeqs),
        ),
        (
            "replace range naming a structural event",
            replacing(user("u9", "x"), 0, 0, &[0]),
            |e| rule(e, Rule::ReplaceRange),
        ),
        (
            "replace range in reverse surface order",
            replacing(user("u9", "x"), 3, 2, &[2, 3]),
            |e| rule(e, Rule::ReplaceRange),
        ),
        (
            "sources that miss a shadowed node",
            replacing(user("u9", "x"), 2, 3, &[2]),
            |e| rule(e, Rule::SourceEventSeqs),
        ),
        (
            "sources citing a future event",
            user("u9", "x").with_sources(vec![Seq(99)]),
            |e| rule(e, Rule::SourceEventSeqs),
        ),
        (
            "surfaceOp on a structural type",
            EventInput::new("turn/start", 1, r#"{"turn":2}"#).with_surface_op(SurfaceOp::Append),
            |e| rule(e, Rule::SurfaceOp),
        ),
        (
            "surface type without surfaceOp",
            EventInput::new(
                "user/message",
                1,
                r#"{"id":"u9","role":"user","content":[],"source":{"kind":"user"}}"#,
            ),
            |e| rule(e, Rule::SurfaceOp),
        ),
        ("message with an empty id", user("", "no id"), |e| {
            rule(e, Rule::MessageShape)
        }),
        (
            "payload beyond max_record_bytes",
            EventInput::new("vendor/x", 1, format!(r#"{{"blob":"{oversized}"}}"#)).ignorable(),
            |e| {
                matches!(
                    e,
                    Error::Log(sessionlog_log::Error::RecordTooLarge { max, .. })
                        if *max == MAX_RECORD_BYTES
                )
            },
        ),
    ]
}

#[test]
fn every_invalid_event_is_refused_with_its_error_and_changes_nothing() {
    let (_dir, store, mut handle) = store_with_session();
    let export_before = store.export_dsh("s1").expect("export");
    let state_before = handle.state().clone();
    let records_before = store.log_reader().stats().records;
    let mut wrong = Vec::new();
    for (what, input, expect) in cases() {
        match handle.append(input) {
            Ok(event) => wrong.push(format!("{what}: accepted as seq {}", event.seq())),
            Err(e) if expect(&e) => {}
            Err(e) => wrong.push(format!("{what}: refused with the wrong error: {e:?}")),
        }
        assert_eq!(
            handle.state(),
            &state_before,
            "{what}: the session's state changed"
        );
        assert_eq!(
            store.log_reader().stats().records,
            records_before,
            "{what}: a record reached the log"
        );
        assert_eq!(
            store.export_dsh("s1").expect("export"),
            export_before,
            "{what}: the stored session changed"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The handle still works, and the refused events left no trace in the stored session.
    handle
        .append(EventInput::new(
            "turn/end",
            1000,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ))
        .expect("a valid event after the refusals");
    handle.commit().expect("commit");
    let after = store.export_dsh("s1").expect("export");
    assert!(after.starts_with(&export_before[..export_before.len() - 1]));
    assert_eq!(
        store.session_state("s1").expect("state").next_seq().get(),
        5
    );
}

#[test]
fn refusals_are_also_refusals_after_reopening_the_store() {
    let (dir, store, handle) = store_with_session();
    let export_before = store.export_dsh("s1").expect("export");
    drop(handle);
    store.close().expect("close");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("reopen");
    let (mut handle, closers) = store.open_session("s1").expect("open session");
    assert!(closers.is_empty() || handle.next_seq().get() > 4);
    let with_closers = store.export_dsh("s1").expect("export");
    assert!(with_closers.starts_with(&export_before[..export_before.len() - 1]));
    for (what, input, _) in cases()
        .into_iter()
        .filter(|(w, _, _)| !w.contains("max_record"))
    {
        assert!(
            handle.append(input).is_err(),
            "{what}: accepted after reopen"
        );
    }
    assert_eq!(store.export_dsh("s1").expect("export"), with_closers);
}

#[test]
fn invalid_utf8_in_an_imported_file_is_refused_and_the_store_is_unchanged() {
    let (_dir, store, _handle) = store_with_session();
    let names_before = store.session_names();
    let export_before = store.export_dsh("s1").expect("export");
    let mut file = br#"{"type":"session","version":0,"id":"bad","createdAt":1000}"#.to_vec();
    file.extend_from_slice(
        b"\n{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n",
    );
    file.extend_from_slice(b"{\"type\":\"vendor/x\",\"seq\":1,\"time\":1,\"data\":{\"s\":\"\xff\xfe\"},\"ignorable\":true}\n");
    file.extend_from_slice(b"{\"type\":\"turn/end\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n");
    match store.import_dsh(&file, None) {
        Err(Error::Session(e)) => assert!(
            e.to_string().to_lowercase().contains("utf-8") || e.is_corrupt(),
            "refused, but not for its UTF-8: {e}"
        ),
        other => panic!("a file with invalid UTF-8 was not refused: {other:?}"),
    }
    assert_eq!(store.session_names(), names_before);
    assert_eq!(store.export_dsh("s1").expect("export"), export_before);
}

#[test]
fn invalid_utf8_is_refused_by_the_lossless_json_validator() {
    let err = sessionlog::session::json::validate(b"{\"s\":\"\xc3\x28\"}").unwrap_err();
    assert_eq!(
        err.kind,
        sessionlog::session::json::JsonErrorKind::InvalidUtf8
    );
}

/// DSH's reader (dsh-session-format.md, load pipeline step 3 and §8) checks a tool result's
/// own shape but does not require a matching call, so an import accepts one without a call;
/// a native append refuses it (tool call pairing): a call that was never announced has no
/// result.
#[test]
fn a_tool_result_without_a_call_is_refused_by_a_native_append() {
    let (_dir, store, mut handle) = store_with_session();
    let export_before = store.export_dsh("s1").expect("export");
    let err = handle
        .append(tool_result("r9", "no-such-call", "out"))
        .expect_err("no call was announced");
    assert!(rule(&err, Rule::ToolPairing), "{err}");
    let mut file = export_before.clone();
    file.extend_from_slice(
        tool_result("r9", "no-such-call", "out")
            .into_event(4)
            .expect("renders")
            .raw()
            .as_bytes(),
    );
    file.push(b'\n');
    let imported = store
        .import_dsh(&file, Some("imported"))
        .expect("DSH accepts it");
    assert_eq!(imported.events, 5);
}

/// An input that states its seq must be refused when the seq is not the session's next one
/// (a writer working from a stale view would otherwise append out of place).
/// `Session::try_append` does this; `SessionHandle::append` (crates/sessionlog/src/store.rs)
/// ignores `EventInput::seq` and appends at the next seq whatever the input says.
#[test]
fn an_event_stating_a_seq_gap_is_refused() {
    let (_dir, store, mut handle) = store_with_session();
    let export_before = store.export_dsh("s1").expect("export");
    let input = EventInput {
        seq: Some(Seq(7)),
        ..EventInput::new("turn/end", 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#)
    };
    match handle.append(input) {
        Err(Error::Session(SessionError::SeqMismatch {
            expected: Seq(4),
            got: Seq(7),
        })) => {}
        other => panic!("a seq gap was not refused: {other:?}"),
    }
    assert_eq!(store.export_dsh("s1").expect("export"), export_before);
}

#[test]
fn an_event_stating_the_next_seq_is_accepted() {
    let (_dir, _store, mut handle) = store_with_session();
    let input = EventInput {
        seq: Some(Seq(4)),
        ..EventInput::new("turn/end", 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#)
    };
    assert_eq!(handle.append(input).expect("accepted").seq().get(), 4);
}

#[test]
fn a_batch_refused_part_way_leaves_nothing_and_the_handle_keeps_working() {
    use sessionlog::session::tokens::HeuristicCounter;
    use std::sync::Arc;

    let (_dir, store, mut handle) = store_with_session();
    let export_before = store.export_dsh("s1").expect("export");
    let state_before = handle.state().clone();
    let pressure_before = handle.pressure();
    let records_before = store.log_reader().stats().records;
    let valid = || {
        vec![
            user("u3", "more"),
            // Replaces u1 and a2 (seqs 2 and 3) with one message.
            replacing(user("u4", "summary"), 2, 3, &[2, 3]),
        ]
    };
    let mut batch = valid();
    // Seq 2 is no longer on the surface once the replacement above is applied.
    batch.push(replacing(user("u5", "x"), 2, 2, &[2]));
    let refused = handle.append_atomic(batch);
    assert!(
        matches!(&refused, Err(e) if rule(e, Rule::ReplaceRange)),
        "{refused:?}"
    );
    assert_eq!(handle.state(), &state_before);
    assert_eq!(handle.pressure(), pressure_before);
    assert_eq!(store.log_reader().stats().records, records_before);
    assert_eq!(store.export_dsh("s1").expect("export"), export_before);

    let seqs = handle.append_atomic(valid()).expect("the valid part alone");
    assert_eq!(seqs.iter().map(|s| s.get()).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(handle.state().surface(), vec![5, 4]);
    let folded = store
        .tokens("s1", Arc::new(HeuristicCounter))
        .expect("fold");
    assert_eq!(handle.pressure(), folded.pressure());
    assert_eq!(handle.token_view(), Some(folded.view()));
}
