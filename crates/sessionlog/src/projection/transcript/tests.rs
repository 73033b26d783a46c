//! Tests of the transcript projection: its fold, its checkpoint and what it writes.

use std::collections::BTreeMap;

use sessionlog_session::json::JsonRef;
use sessionlog_session::{kind_tag, EventInput, FormatVersion};

use super::kept::RECENT_CALLS;
use super::lines::tool_result;
use super::rows::ROWS_PER_CHUNK;
use super::text::{abbreviate_value, drawn_texts};
use super::{abbreviate, SessionTranscript, ShadowedBy, StoredEvent, Transcript, TEXT_CHARS};
use crate::projection::Projection;

/// `event` as a writer hands it to a fold, without the writer's figures.
fn stored<'a>(event: &'a sessionlog_session::Event, version: &'a FormatVersion) -> StoredEvent<'a> {
    StoredEvent {
        kind: kind_tag(event),
        record_bytes: 0,
        event,
        version,
        message_estimate: None,
        usage: None,
        message: None,
    }
}

/// The transcript as `show` writes it.
fn written(t: &SessionTranscript) -> String {
    let mut out = Vec::new();
    t.write("s", &mut out).expect("writes");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn a_json_string_abbreviates_undecoded_as_its_decoded_text_does() {
    let pieces = [
        "a",
        "word",
        " ",
        "  ",
        "\n",
        "\t",
        "\\",
        "\"",
        "é",
        "\u{2003}",
        "x.y",
        "0123456789",
        "/",
        "\u{1f600}",
    ];
    for text in drawn_texts(&pieces, 0x9e37_79b9_7f4a_7c15, 70) {
        let literal = serde_json::to_string(&text).expect("a JSON string");
        let value = JsonRef::new(&literal);
        for max in [0, 1, 2, 5, 10, 60, 100] {
            let mut undecoded = String::new();
            abbreviate_value(&mut undecoded, Some(value), max);
            assert_eq!(undecoded, abbreviate(&text, max), "{literal} at {max}");
        }
        // A tool result's texts, joined: the first alone decides a long line.
        let second = format!("{{\"text\":{literal}}}");
        let items = format!("[{{\"text\":{literal}}},{{\"type\":\"image\"}},{second}]");
        let mut line = String::new();
        tool_result(&mut line, "?", "?", [None, Some(JsonRef::new(&items))]);
        let joined = abbreviate(&format!("{text} {text}"), TEXT_CHARS);
        assert_eq!(line, format!("← ? [?] ok: {joined}"), "{items}");
    }
    // Plain texts around a line's length, first in items of several shapes: the line
    // read from the first item's start is the line of the texts found and joined.
    for (len, pattern) in (90..130).flat_map(|len| {
        ["tool output ", "abcdefghij", "a b c ", r"ls -la /tmp\n"].map(|p| (len, p))
    }) {
        let text: String = pattern.chars().cycle().take(len).collect();
        let text = text.trim_end_matches([' ', '\\']);
        for items in [
            format!(r#"[{{"type":"text","text":"{text}"}},{{"text":"more"}}]"#),
            format!(r#"[ {{ "text" : "{text}" , "type" : "text" }} ]"#),
            format!(r#"[{{"type":"image"}},{{"text":"{text}"}}]"#),
            format!(r#"[{{"text":1,"type":"text"}},{{"text":"{text}"}}]"#),
            format!(r#"[{{"type":"text","text":"{text}\"q"}}]"#),
            format!(r#"[{{"type":"text","text":"{text}"}}]"#).replace("tool o", "tool é"),
        ] {
            let mut line = String::new();
            tool_result(&mut line, "?", "?", [None, Some(JsonRef::new(&items))]);
            let value: serde_json::Value = serde_json::from_str(&items).expect("JSON");
            let texts: Vec<&str> = value
                .as_array()
                .expect("an array")
                .iter()
                .filter_map(|item| item.get("text").and_then(|t| t.as_str()))
                .collect();
            let joined = abbreviate(&texts.join(" "), TEXT_CHARS);
            assert_eq!(line, format!("← ? [?] ok: {joined}"), "{items}");
        }
    }
}

#[test]
fn shadowed_pairs_are_kept_as_a_map_by_seq_keeps_them() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for case in 0..200u64 {
        let mut kept = ShadowedBy::default();
        let mut model = BTreeMap::new();
        let mut next = 0u64;
        for by in 0..300u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Mostly above every seq so far, as summaries shadow; sometimes an older
            // one again, or one below that was never shadowed (in a case of its own,
            // always).
            let seq = match rng % 8 {
                _ if case % 5 == 4 => rng % 600,
                0 | 1 => rng % (next + 1),
                _ => {
                    next += 1 + rng % 3;
                    next
                }
            };
            assert_eq!(kept.insert(seq, by), model.insert(seq, by).is_none());
            assert_eq!(kept.get(seq), Some(by));
            let probe = rng % (next + 2);
            assert_eq!(kept.get(probe), model.get(&probe).copied());
        }
        let pairs: Vec<(u64, u64)> = model.iter().map(|(&s, &b)| (s, b)).collect();
        // The list and the tree hold no seq in common: every pair, by seq.
        let mut held: Vec<(u64, u64)> = kept.appended.clone();
        held.extend(kept.others.iter().map(|(&s, &by)| (s, by)));
        held.sort_unstable();
        assert_eq!(held, pairs, "case {case}");
    }
}

#[test]
fn chunks_skipped_by_kind_fold_to_the_transcript_of_every_event() {
    use crate::workload::{Workload, WorkloadConfig};
    let version = FormatVersion::dsh_v0();
    let mut w = Workload::new(9, WorkloadConfig::default());
    let mut events = Vec::new();
    for turn in 0..12 {
        let next = events.len() as u64;
        // Some turns stop mid-stream, so that runs of chunks end a session too.
        let interrupt = (turn % 4 == 3).then_some(7);
        for input in w.turn(next, 1, interrupt) {
            let seq = events.len() as u64;
            events.push(input.into_event(seq).expect("an event"));
        }
    }
    let chunks = events
        .iter()
        .filter(|e| !Transcript.wants(kind_tag(e)))
        .count();
    assert!(chunks > 0, "the session streams chunks");
    // Every prefix: each event handed over, against the wanted ones and a catch-up.
    let mut every = SessionTranscript::default();
    let mut wanted = SessionTranscript::default();
    for (i, event) in events.iter().enumerate() {
        let e = stored(event, &version);
        Transcript.apply(&mut every, &e).expect("folds");
        if Transcript.wants(e.kind) {
            Transcript.apply(&mut wanted, &e).expect("folds");
        }
        let mut caught_up = wanted.clone();
        Transcript.skipped(&mut caught_up, i as u64 + 1);
        assert!(caught_up == every, "after event {i}");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        caught_up.write("s", &mut a).expect("writes");
        every.write("s", &mut b).expect("writes");
        assert_eq!(a, b, "after event {i}");
    }
}

#[test]
fn a_transcript_over_many_chunks_writes_and_checkpoints_as_one_buffer_would() {
    use crate::workload::{Workload, WorkloadConfig};
    let version = FormatVersion::dsh_v0();
    let mut w = Workload::new(
        3,
        WorkloadConfig::default().with_compact_every_turns(Some(3)),
    );
    let mut t = SessionTranscript::default();
    // Checkpoints taken as the fold goes, each decoded and folded on from.
    let mut resumed: Vec<(SessionTranscript, u64)> = Vec::new();
    let mut seq = 0u64;
    for turn in 0..60 {
        for input in w.turn(seq, 1, None) {
            let event = input.into_event(seq).expect("an event");
            let e = stored(&event, &version);
            if Transcript.wants(e.kind) {
                Transcript.apply(&mut t, &e).expect("folds");
                for (r, _) in &mut resumed {
                    Transcript.apply(r, &e).expect("folds");
                }
            }
            seq += 1;
        }
        if turn % 20 == 10 {
            let mut bytes = Vec::new();
            Transcript.encode(&t, &mut bytes);
            resumed.push((Transcript.decode(&bytes).expect("decodes"), seq));
        }
    }
    Transcript.skipped(&mut t, seq);
    let text_chunks = t.text.pieces().count();
    assert!(text_chunks > 4, "{text_chunks} text chunks");
    assert!(t.rows.len() > 4 * ROWS_PER_CHUNK, "{} rows", t.rows.len());
    let shown = written(&t);
    // Its checkpoint holds the text and rows in one buffer each, read in place: what the
    // chunks hold, row for row.
    let mut bytes = Vec::new();
    Transcript.encode(&t, &mut bytes);
    let decoded = Transcript.decode(&bytes).expect("decodes");
    assert_eq!(decoded.text.len(), 0, "nothing folded past the checkpoint");
    assert_eq!(written(&decoded), shown);
    // The appended parts, as the store writes them, are the checkpoint's parts.
    let mut parts = Vec::new();
    Transcript.appended(&t, &mut parts);
    let mut rest = Vec::new();
    Transcript.encode_pieces(&t, &mut rest);
    let parts: Vec<bytes::Bytes> = parts.iter().map(|p| p.concat().into()).collect();
    let rest: Vec<u8> = rest.concat();
    let from_parts = Transcript
        .decode_appended(rest.into(), parts)
        .expect("decodes");
    assert!(from_parts == t);
    assert_eq!(written(&from_parts), shown);
    // Folded on from checkpoints taken mid-way, over chunks of their own.
    assert_eq!(resumed.len(), 3);
    for (mut r, at) in resumed {
        Transcript.skipped(&mut r, seq);
        assert!(r == t, "from the checkpoint at seq {at}");
        assert_eq!(written(&r), shown, "from the checkpoint at seq {at}");
    }
}

/// The size a writer's checkpoint interval is chosen by is the size of the rest it
/// writes: after every event of a session that streams, stops mid-stream and compacts,
/// folded from the start and from checkpoints decoded from their appended parts.
#[test]
fn the_rest_a_checkpoint_rewrites_is_as_long_as_rest_len_says() {
    use crate::workload::{Workload, WorkloadConfig};
    let version = FormatVersion::dsh_v0();
    let mut w = Workload::new(
        11,
        WorkloadConfig::default().with_compact_every_turns(Some(4)),
    );
    let rest_bytes = |t: &SessionTranscript| {
        let mut rest = Vec::new();
        Transcript.encode_pieces(t, &mut rest);
        rest.iter().map(|p| p.len() as u64).sum::<u64>()
    };
    let mut states = vec![SessionTranscript::default()];
    let mut seq = 0u64;
    let mut checked = 0;
    for turn in 0..40 {
        let interrupt = (turn % 5 == 4).then_some(5);
        for input in w.turn(seq, 1, interrupt) {
            let event = input.into_event(seq).expect("an event");
            let e = stored(&event, &version);
            seq += 1;
            for t in &mut states {
                if Transcript.wants(e.kind) {
                    Transcript.apply(t, &e).expect("folds");
                }
                assert_eq!(t.rest_len(), rest_bytes(t), "at seq {seq}");
                let mut caught_up = t.clone();
                Transcript.skipped(&mut caught_up, seq);
                assert_eq!(caught_up.rest_len(), rest_bytes(&caught_up), "at seq {seq}");
                checked += 1;
            }
        }
        if turn % 10 == 5 {
            let mut t = states[0].clone();
            Transcript.skipped(&mut t, seq);
            let mut parts = Vec::new();
            Transcript.appended(&t, &mut parts);
            let parts = parts.iter().map(|p| p.concat().into()).collect();
            let mut rest = Vec::new();
            Transcript.encode_pieces(&t, &mut rest);
            let rest: Vec<u8> = rest.concat();
            let resumed = Transcript
                .decode_appended(rest.into(), parts)
                .expect("decodes");
            assert_eq!(resumed.rest_len(), rest_bytes(&resumed));
            states.push(resumed);
        }
    }
    assert!(
        states.len() > 3 && checked > 1000,
        "{checked} states checked"
    );
}

/// A tool call's arguments on its line: a string's text (plain, JSON held in a string,
/// escapes of every kind, longer than the line), or any other value's compact JSON,
/// abbreviated as the decoded text is.
#[test]
fn a_calls_arguments_read_on_its_line_as_their_text_abbreviates() {
    let version = FormatVersion::current();
    let long = "x".repeat(70);
    let cases = [
        (r#""ls""#.to_owned(), "ls".to_owned()),
        (
            r#""{\"command\": \"cargo test\"}""#.to_owned(),
            r#"{"command": "cargo test"}"#.to_owned(),
        ),
        (
            format!(r#""{{\"a\":\"{long}\"}}""#),
            format!(r#"{{"a":"{long}"}}"#),
        ),
        (
            r#""a\nb\\c\/d \u00e9""#.to_owned(),
            "a\nb\\c/d é".to_owned(),
        ),
        (
            r#""{\"k\": \"v  w\"}""#.to_owned(),
            r#"{"k": "v  w"}"#.to_owned(),
        ),
        (
            r#"{"command": "cargo   test"}"#.to_owned(),
            r#"{"command":"cargo   test"}"#.to_owned(),
        ),
        ("null".to_owned(), String::new()),
    ];
    for (arguments, text) in cases {
        let input = EventInput::new(
            "assistant/message",
            0,
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"m","role":"assistant","content":[{{"type":"tool-call","id":"c1","name":"bash","arguments":{arguments}}}]}}}}"#
            ),
        );
        let event = input.into_event(0).expect("an event");
        let mut t = SessionTranscript::default();
        t.fold(&stored(&event, &version)).expect("folds");
        let line = format!(
            "→ calls bash({}) [c1]",
            abbreviate(&text, super::ARGUMENT_CHARS)
        );
        assert!(written(&t).contains(&line), "{arguments}: {}", written(&t));
    }
}

#[test]
fn a_result_names_the_tool_of_the_latest_call_with_its_id_however_far_back() {
    let version = FormatVersion::current();
    let result = |id: &str| {
        EventInput::new(
            "tool/result",
            0,
            format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"out"}}],"isError":false}}]}}}}"#
            ),
        )
    };
    let call = |id: &str, tool: &str| {
        EventInput::new(
            "tool/call",
            0,
            format!(r#"{{"turn":1,"step":1,"callId":"{id}","name":"{tool}","arguments":"{{}}"}}"#),
        )
    };
    let mut calls = vec![
        EventInput::new("turn/start", 0, r#"{"turn":1}"#),
        EventInput::new("step/start", 0, r#"{"turn":1,"step":1}"#),
    ];
    // More calls than are looked through before the map, one id called twice.
    calls.extend((0..2 * RECENT_CALLS).map(|k| call(&format!("c{k}"), &format!("t{k}"))));
    calls.push(call("c3", "again"));
    let results = ["c0", "c3", "c40", "c63", "nobody", "c1"].map(result);
    let fold = |t: &mut SessionTranscript, inputs: &[EventInput], from: usize| {
        for (i, input) in inputs.iter().enumerate() {
            let event = input
                .clone()
                .into_event((from + i) as u64)
                .expect("an event");
            t.fold(&stored(&event, &version)).expect("folds");
        }
    };
    let mut t = SessionTranscript::default();
    fold(&mut t, &calls, 0);
    // The same calls from a checkpoint: the results look them up among the stored ones.
    let mut bytes = Vec::new();
    Transcript.encode(&t, &mut bytes);
    let mut resumed = Transcript.decode(&bytes).expect("decodes");
    fold(&mut t, &results, calls.len());
    fold(&mut resumed, &results, calls.len());
    let shown = written(&t);
    for line in [
        "← t0 [c0] ok: out",
        "← again [c3] ok: out",
        "← t40 [c40] ok: out",
        "← t63 [c63] ok: out",
        "← ? [nobody] ok: out",
        "← t1 [c1] ok: out",
    ] {
        assert!(shown.contains(line), "{line} missing from\n{shown}");
    }
    assert!(!shown.contains("← t3 [c3]"), "{shown}");
    assert_eq!(written(&resumed), shown);
}

/// A transcript of a turn's start and a step's start, its checkpoint's bytes.
fn two_rows() -> Vec<u8> {
    let version = FormatVersion::dsh_v0();
    let mut t = SessionTranscript::default();
    let inputs = [
        EventInput::new("turn/start", 0, r#"{"turn":1}"#),
        EventInput::new("step/start", 0, r#"{"turn":1,"step":1}"#),
    ];
    for (seq, input) in inputs.into_iter().enumerate() {
        let event = input.into_event(seq as u64).expect("an event");
        t.fold(&stored(&event, &version)).expect("folds");
    }
    let mut bytes = Vec::new();
    Transcript.encode(&t, &mut bytes);
    bytes
}

#[test]
fn a_stored_row_that_is_not_utf8_fails_the_write_and_is_named() {
    // The row text, the first appended part, follows its length; the first row's is
    // "turn\nturn 1 starts\n".
    const TEXT: usize = 8;
    let rows = two_rows();
    let first_row_end = TEXT + "turn\nturn 1 starts\n".len();
    for (at, seq) in [(TEXT + 1, 0), (first_row_end + 1, 1)] {
        let mut bytes = rows.clone();
        bytes[at] = 0xFF;
        let t = Transcript.decode(&bytes).expect("its structure decodes");
        let err = t.write("s", &mut Vec::new()).expect_err("not UTF-8");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            err.to_string().contains(&format!("row of seq {seq} ")),
            "{err}"
        );
    }
    let t = Transcript.decode(&rows).expect("decodes");
    let mut out = Vec::new();
    t.write("s", &mut out).expect("writes");
    assert!(String::from_utf8_lossy(&out).contains("turn 1 starts"));
}
