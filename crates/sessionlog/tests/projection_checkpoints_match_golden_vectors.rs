//! The golden projection checkpoints in `format-spec/vectors/` (`stats` version 1, `tool-audit`
//! version 2, `transcript` version 4) are what the shipped folds encode for the session below, and decode to the
//! states `format-spec/vectors/README.md` describes, so `format-spec/cache.md#projections`
//! cannot drift from the code.
//!
//! The files are made once (`SESSIONLOG_REGENERATE_VECTORS=1 cargo test -p sessionlog
//! --test projection_checkpoints_match_golden_vectors`, which writes only missing files) and
//! then only read. A change of an encoding bumps that projection's version; the old files
//! then stay as fixtures of a version this build rebuilds.

use std::path::PathBuf;

use sessionlog::projection::{
    SessionStats, SessionTranscript, Stats, ToolAudit, ToolCalls, Transcript,
};
use sessionlog::session::{
    encode_event, kind_tag, Event, EventInput, FormatVersion, Seq, SessionHeader, SurfaceOp,
};
use sessionlog::{Projection, StoredEvent};

const REGENERATE_ENV: &str = "SESSIONLOG_REGENERATE_VECTORS";
const STATS_FILE: &str = "projection_stats_v1.bin";
const AUDIT_FILE: &str = "projection_tool_audit_v2.bin";
const TRANSCRIPT_FILE: &str = "projection_transcript_v4.bin";
/// The transcript of [`longer_events`], whose last chunk run is never settled: its rows
/// from that run on are held in the rest, not in the row table.
const TRANSCRIPT_HELD_FILE: &str = "projection_transcript_v4_held.bin";

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../format-spec/vectors")
}

/// One turn: a prompt, a settlement calling two tools (usage 120 in, 9 out), the two calls
/// and their results (the second an error, 250 ms after its call), a replacement that
/// shortens the first result, and the turn's end.
fn golden_events() -> Vec<Event> {
    let t = 1_700_000_000_000i64;
    let append = SurfaceOp::Append;
    let result = |id: &str, error: bool| {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"out"}}],"isError":{error}}}]}}}}"#
        )
    };
    let inputs = [
        EventInput::new("turn/start", t, r#"{"turn":1}"#),
        EventInput::new("step/start", t, r#"{"turn":1,"step":1}"#),
        EventInput::new(
            "user/message",
            t,
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"list the files"}],"source":{"kind":"user"}}"#,
        )
        .with_surface_op(append),
        EventInput::new(
            "assistant/message",
            t + 10,
            r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"cmd\":\"ls\"}"},{"type":"tool-call","id":"c2","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":120,"outputTokens":9}}"#,
        )
        .with_surface_op(append),
        EventInput::new(
            "tool/call",
            t + 20,
            r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{\"cmd\":\"ls\"}"}"#,
        ),
        EventInput::new("tool/result", t + 30, result("c1", false))
            .with_surface_op(append)
            .with_sources(vec![Seq(4)]),
        EventInput::new(
            "tool/call",
            t + 40,
            r#"{"turn":1,"step":1,"callId":"c2","name":"read","arguments":"{}"}"#,
        ),
        EventInput::new("tool/result", t + 290, result("c2", true))
            .with_surface_op(append)
            .with_sources(vec![Seq(6)]),
        EventInput::new("tool/result", t + 300, result("c1", false))
            .with_surface_op(SurfaceOp::Replace { start: Seq(5), end: Seq(5) })
            .with_sources(vec![Seq(5)]),
        EventInput::new("step/end", t + 310, r#"{"turn":1,"step":1}"#),
        EventInput::new(
            "turn/end",
            t + 320,
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ),
    ];
    inputs
        .into_iter()
        .enumerate()
        .map(|(seq, input)| input.into_event(seq as u64).expect("a golden event"))
        .collect()
}

/// Folds the golden events into `p` as the store feeds them: kind tag and record size of
/// each event's log record.
fn fold<P: Projection>(p: &P) -> P::State {
    fold_events(p, &golden_events())
}

/// `events` folded from the start of the golden session.
fn fold_events<P: Projection>(p: &P, events: &[Event]) -> P::State {
    let header = SessionHeader::new("golden", 1_700_000_000_000, Some("/work"));
    let mut state = p.init(&header);
    feed(p, &mut state, events);
    state
}

/// Folds `events` into `state` as the store hands them over: with each event's record
/// kind tag and payload size.
fn feed<P: Projection>(p: &P, state: &mut P::State, events: &[Event]) {
    let version = FormatVersion::dsh_v0();
    for event in events {
        let stored = StoredEvent {
            kind: kind_tag(event),
            record_bytes: encode_event(event).len() as u64,
            event,
            version: &version,
            message_estimate: None,
            usage: None,
            message: None,
        };
        p.apply(state, &stored).expect("the fold takes every event");
    }
}

/// The golden file `name`: compared with `encoded`, or written when missing and the
/// regeneration variable is set.
fn golden(name: &str, encoded: &[u8]) -> Vec<u8> {
    let path = vectors_dir().join(name);
    if !path.exists() && std::env::var_os(REGENERATE_ENV).is_some() {
        std::fs::write(&path, encoded).expect("write vector");
    }
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        bytes, encoded,
        "{name}: the fold no longer encodes to the vector"
    );
    bytes
}

#[test]
fn the_stats_vector_decodes_to_the_documented_counts() {
    let state = fold(&Stats);
    let mut encoded = Vec::new();
    Stats.encode(&state, &mut encoded);
    let bytes = golden(STATS_FILE, &encoded);
    let s: SessionStats = Stats.decode(&bytes).expect("decodes");
    assert_eq!(s, state);
    assert_eq!((s.events, s.turns, s.steps, s.replacements), (11, 1, 1, 1));
    assert_eq!(s.by_type["tool/result"].events, 3);
    assert_eq!(s.turn_ends["completed"], 1);
    let bash = s.tools["bash"];
    let read = s.tools["read"];
    assert_eq!((bash.calls, bash.results, bash.errors), (1, 1, 0));
    assert_eq!((read.calls, read.results, read.errors), (1, 1, 1));
    assert_eq!(s.usage.requests, 1);
    assert_eq!((s.usage.usage.input, s.usage.usage.output), (120, 9));
    assert_eq!(s.first_time, Some(1_700_000_000_000));
    assert_eq!(s.last_time, Some(1_700_000_000_320));
    assert!(s.open_calls.is_empty());
    assert_eq!(
        s.bytes,
        s.by_type.values().map(|c| c.bytes).sum::<u64>(),
        "bytes by type add up"
    );
    // Every byte counts: a cut or an extra byte is refused, never misread.
    for cut in 0..bytes.len() {
        assert!(Stats.decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Stats.decode(&longer).is_err());
}

#[test]
fn the_tool_audit_vector_decodes_to_the_documented_calls() {
    let state = fold(&ToolAudit);
    let mut encoded = Vec::new();
    ToolAudit.encode(&state, &mut encoded);
    let bytes = golden(AUDIT_FILE, &encoded);
    let a: ToolCalls = ToolAudit.decode(&bytes).expect("decodes");
    assert_eq!(a, state);
    let [bash, read] = &a.calls[..] else {
        panic!("two calls: {:?}", a.calls)
    };
    assert_eq!((bash.seq, bash.name.as_str()), (4, "bash"));
    assert_eq!(bash.arguments, r#"{"cmd":"ls"}"#);
    assert_eq!(bash.duration_ms(), Some(10));
    assert_eq!(bash.shadowed_by, Some(8));
    assert!(!bash.result.as_ref().expect("answered").error);
    assert_eq!((read.seq, read.name.as_str()), (6, "read"));
    assert_eq!(read.duration_ms(), Some(250));
    assert!(read.result.as_ref().expect("answered").error);
    assert_eq!(read.shadowed_by, None);
    for cut in 0..bytes.len() {
        assert!(ToolAudit.decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn the_transcript_vector_decodes_to_the_documented_rows() {
    let state = fold(&Transcript);
    let mut encoded = Vec::new();
    Transcript.encode(&state, &mut encoded);
    let bytes = golden(TRANSCRIPT_FILE, &encoded);
    let t: SessionTranscript = Transcript.decode(&bytes).expect("decodes");
    assert_eq!(t, state);
    let mut out = Vec::new();
    t.write("golden", &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "session golden: 11 events, 4 messages on the surface, 1 shadowed by 1 replacement"
    );
    assert!(
        lines.contains(&"~   5  tool        ← bash [c1] ok: out"),
        "{text}"
    );
    assert!(
        lines.contains(&"                   [shadowed by seq 8]"),
        "{text}"
    );
    assert!(
        lines.contains(&"»   8  tool        [replaces seq 5..=5; cites seq 5]"),
        "{text}"
    );
    assert!(
        lines.contains(&"·  10  turn        turn 1 ends: completed"),
        "{text}"
    );
    for cut in 0..bytes.len() {
        assert!(Transcript.decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Transcript.decode(&longer).is_err(), "a longer file");
}

#[test]
fn the_transcript_vector_with_held_rows_decodes_to_the_documented_rows() {
    let state = fold_events(&Transcript, &longer_events());
    let mut encoded = Vec::new();
    Transcript.encode(&state, &mut encoded);
    let bytes = golden(TRANSCRIPT_HELD_FILE, &encoded);
    let t: SessionTranscript = Transcript.decode(&bytes).expect("decodes");
    assert_eq!(t, state);
    // The appended parts: the row text, the rows before the unsettled run at seq
    // 16 (15 rows: the golden session's 11, the turn's start, the run settled in seq 14,
    // that settlement, the replacement at 15), the tool names, the shadowings; the rest
    // holds the run's row and the turn's end after it.
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let text_len = u64_at(0) as usize;
    let rows_len = u64_at(8 + text_len) as usize;
    assert_eq!(rows_len, 15 * 33, "the row table");
    let names_len = u64_at(16 + text_len + rows_len) as usize;
    // "c1" "bash", "c2" "read": 8 bytes of length before each string.
    assert_eq!(names_len, 4 * 8 + 12, "the tool names");
    let shadowings_len = u64_at(24 + text_len + rows_len + names_len) as usize;
    // Seq 5 by 8, then 5 and 8 by 15, in the order they were folded.
    assert_eq!(shadowings_len, 3 * 16, "the shadowings");
    let shadowings = 32 + text_len + rows_len + names_len;
    let pairs: Vec<(u64, u64)> = (0..3)
        .map(|i| (u64_at(shadowings + 16 * i), u64_at(shadowings + 16 * i + 8)))
        .collect();
    assert_eq!(pairs, [(5, 8), (5, 15), (8, 15)]);
    let rest = shadowings + shadowings_len;
    assert_eq!(u64_at(rest), 18, "events");
    assert_eq!(u64_at(rest + 16), 17, "rows in all");
    let held = &bytes[rest + 24..rest + 24 + 33];
    assert_eq!(held[0], 3, "a chunk run");
    assert_eq!(u64::from_le_bytes(held[1..9].try_into().expect("8")), 16);
    assert_eq!(
        u64::from_le_bytes(held[17..25].try_into().expect("8")),
        u64::MAX,
        "not settled"
    );
    let mut out = Vec::new();
    t.write("golden", &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains("1 streamed chunk (seq 16), never settled"),
        "{text}"
    );
    // A seq shadowed twice shows the later replacement.
    assert_eq!(text.matches("[shadowed by seq 15]").count(), 2, "{text}");
    assert!(!text.contains("[shadowed by seq 8]"), "{text}");
    for cut in 0..bytes.len() {
        assert!(Transcript.decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

/// Folding on never changes what a transcript handed over of its appended parts, resumed
/// from a checkpoint or not: each call's parts begin with the bytes of the call before.
#[test]
fn a_transcripts_appended_parts_only_grow() {
    let header = SessionHeader::new("golden", 1_700_000_000_000, Some("/work"));
    // Then a settlement, which settles the run the turn's end left unsettled.
    let mut events = longer_events();
    let settlement = EventInput::new(
        "assistant/message",
        1_700_000_002_000,
        r#"{"turn":3,"step":1,"message":{"id":"a3","role":"assistant","content":[{"type":"text","text":"again"}],"source":{"kind":"model","provider":"p","model":"m"}}}"#,
    )
    .with_surface_op(SurfaceOp::Append);
    events.push(
        settlement
            .into_event(events.len() as u64)
            .expect("an event"),
    );
    let parts_of = |state: &SessionTranscript| -> Vec<Vec<u8>> {
        let mut parts = Vec::new();
        Transcript.appended(state, &mut parts);
        parts.into_iter().map(|pieces| pieces.concat()).collect()
    };
    for cut in 0..=events.len() {
        let mut state = Transcript.init(&header);
        for (i, event) in events.iter().enumerate() {
            if i == cut {
                let mut bytes = Vec::new();
                Transcript.encode(&state, &mut bytes);
                state = Transcript.decode(&bytes).expect("decodes");
            }
            let before = parts_of(&state);
            feed(&Transcript, &mut state, std::slice::from_ref(event));
            let after = parts_of(&state);
            assert_eq!(after.len(), 4);
            for (b, a) in before.iter().zip(&after) {
                assert!(a.starts_with(b), "after event {i}, resumed at {cut}");
            }
        }
    }
}

/// The golden session, then a streamed run settled by a message, a replacement of the
/// replacement at seq 8 (whose source, seq 5, was shadowed already), a run left unsettled
/// by the turn's end.
fn longer_events() -> Vec<Event> {
    let t = 1_700_000_001_000i64;
    let mut events = golden_events();
    let chunk = || EventInput::new("assistant/chunk", t, r#"{"turn":2,"step":1,"delta":"x"}"#);
    let more = [
        EventInput::new("turn/start", t, r#"{"turn":2,"kind":"user"}"#),
        chunk(),
        chunk(),
        EventInput::new(
            "assistant/message",
            t + 5,
            r#"{"turn":2,"step":1,"message":{"id":"a2","role":"assistant","content":[{"type":"text","text":"done"}],"source":{"kind":"model","provider":"p","model":"m"}}}"#,
        )
        .with_surface_op(SurfaceOp::Append),
        EventInput::new(
            "tool/result",
            t + 6,
            r#"{"turn":1,"step":1,"message":{"id":"r-c1b","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"o"}],"isError":false}]}}"#,
        )
        .with_surface_op(SurfaceOp::Replace { start: Seq(8), end: Seq(8) })
        .with_sources(vec![Seq(5), Seq(8)]),
        chunk(),
        EventInput::new(
            "turn/end",
            t + 7,
            r#"{"turn":2,"reason":{"kind":"interrupted"}}"#,
        ),
    ];
    let first = events.len() as u64;
    events.extend(
        more.into_iter()
            .enumerate()
            .map(|(i, input)| input.into_event(first + i as u64).expect("an event")),
    );
    events
}

#[test]
fn a_transcript_resumed_from_its_checkpoint_at_any_event_folds_on_as_a_whole_fold() {
    let header = SessionHeader::new("golden", 1_700_000_000_000, Some("/work"));
    let events = longer_events();
    let feed = |state: &mut SessionTranscript, events: &[Event]| feed(&Transcript, state, events);
    let written = |state: &SessionTranscript| {
        let mut out = Vec::new();
        state.write("golden", &mut out).expect("write");
        String::from_utf8(out).expect("utf-8")
    };
    let mut whole = Transcript.init(&header);
    feed(&mut whole, &events);
    let text = written(&whole);
    assert!(
        text.contains("~   8  tool        [replaces seq 5..=5; cites seq 5]"),
        "{text}"
    );
    assert!(text.contains("[shadowed by seq 15]"), "{text}");
    assert!(
        text.contains("2 streamed chunks (seq 12..=13), settled in seq 14"),
        "{text}"
    );
    assert!(
        text.contains("1 streamed chunk (seq 16), never settled"),
        "{text}"
    );
    for cut in 0..=events.len() {
        // Resumed once, and resumed again from a checkpoint of the resumed state.
        for again in [None, Some(cut + (events.len() - cut) / 2)] {
            let mut state = Transcript.init(&header);
            feed(&mut state, &events[..cut]);
            let mut bytes = Vec::new();
            Transcript.encode(&state, &mut bytes);
            let mut resumed = Transcript.decode_shared(bytes.into()).expect("decodes");
            let rest = &events[cut..];
            match again {
                None => feed(&mut resumed, rest),
                Some(at) => {
                    let (a, b) = rest.split_at(at - cut);
                    feed(&mut resumed, a);
                    let mut bytes = Vec::new();
                    Transcript.encode(&resumed, &mut bytes);
                    resumed = Transcript.decode(&bytes).expect("decodes");
                    feed(&mut resumed, b);
                }
            }
            assert_eq!(resumed, whole, "resumed at {cut}, again at {again:?}");
            assert_eq!(
                written(&resumed),
                text,
                "resumed at {cut}, again at {again:?}"
            );
        }
    }
}

/// A call id used again while its first call is open: the result answers the later call,
/// the earlier one stays unanswered and is no longer open under the id, so a second result
/// with the id answers nothing. A checkpoint taken after any prefix of such a session,
/// decoded and folded on, must be the state of the whole fold: the replay of the entries
/// recovers which call is open under the id, which the calls alone do not say.
#[test]
fn a_call_id_reused_while_open_is_checkpointed_as_the_fold_left_it() {
    let t = 1_700_000_000_000i64;
    let call = |at: i64, args: &str| {
        EventInput::new(
            "tool/call",
            t + at,
            format!(r#"{{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{args}"}}"#),
        )
    };
    let result = |at: i64| {
        EventInput::new(
            "tool/result",
            t + at,
            r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out"}],"isError":false}]}}"#,
        )
        .with_surface_op(SurfaceOp::Append)
    };
    let events: Vec<Event> = [call(0, "a"), call(10, "b"), result(20), result(30)]
        .into_iter()
        .enumerate()
        .map(|(seq, input)| input.into_event(seq as u64).expect("an event"))
        .collect();
    let whole = fold_events(&ToolAudit, &events);
    let [first, second] = &whole.calls[..] else {
        panic!("two calls: {:?}", whole.calls)
    };
    assert_eq!(first.result, None, "the first call is never answered");
    assert_eq!(second.result.as_ref().map(|r| r.seq), Some(2));
    for at in 0..=events.len() {
        let head = fold_events(&ToolAudit, &events[..at]);
        let mut bytes = Vec::new();
        ToolAudit.encode(&head, &mut bytes);
        let mut state = ToolAudit.decode(&bytes).expect("decodes");
        assert_eq!(state, head, "checkpoint after {at} events");
        feed(&ToolAudit, &mut state, &events[at..]);
        assert_eq!(state, whole, "checkpoint after {at} events, folded on");
    }
}
