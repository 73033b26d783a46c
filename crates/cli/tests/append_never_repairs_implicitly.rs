//! `sessionlog append` never repairs behind the caller's back: events that continue an open
//! turn are accepted, events that cannot are refused (exit 3) with a hint, and a refused
//! line changes nothing at all. Restart repair happens only through `open` or `--repair`,
//! which print the closers they write.

mod common;

use common::{describe, events, sessionlog, text, turn_lines};

const TURN_2_START: &str = r#"{"type":"turn/start","data":{"turn":2}}"#;
const TURN_2_MESSAGE: &str = r#"{"type":"user/message","data":{"content":[{"type":"text","text":"more"}],"source":{"kind":"user"},"role":"user","id":"u2"},"surfaceOp":"append"}"#;
const TURN_2_END: &str = r#"{"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}"#;

fn append(store: &str, input: &[u8], extra: &[&str]) -> std::process::Output {
    let mut args = vec!["append", "--store", store, "--session", "a"];
    args.extend_from_slice(extra);
    sessionlog(&args, input)
}

/// A store whose session `a` has one complete turn (events 0..=4), then (if `open_turn`)
/// turn 2 started with a user message (events 5 and 6).
fn store_with(open_turn: bool) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let mut input = turn_lines(1);
    if open_turn {
        input += &format!("{TURN_2_START}\n{TURN_2_MESSAGE}\n");
    }
    let made = append(&store, input.as_bytes(), &["--create"]);
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    (dir, store)
}

fn assert_refused_and_unchanged(store: &str, input: &[u8], expected: &[&str]) {
    let before = events(store, "a");
    assert_eq!(before.0, Some(0));
    let out = append(store, input, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(
        out.stdout.is_empty(),
        "nothing acknowledged: {}",
        describe(&out)
    );
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    for word in expected {
        assert!(err.contains(word), "{word:?} in {err}");
    }
    assert_eq!(
        events(store, "a"),
        before,
        "events byte-identical after {err}"
    );
}

#[test]
fn refusals_without_an_open_turn_change_nothing() {
    let (_dir, store) = store_with(false);
    assert_refused_and_unchanged(&store, b"garbage\n", &["line 1"]);
    assert_refused_and_unchanged(&store, b"\xff\xfe{}\n", &["line 1", "UTF-8"]);
    assert_refused_and_unchanged(
        &store,
        b"{\"type\":\"turn/start\",\"seq\":99,\"data\":{\"turn\":2}}\n",
        &["line 1", "seq"],
    );
}

#[test]
fn refusals_with_an_open_turn_change_nothing_and_point_at_repair() {
    let (_dir, store) = store_with(true);
    assert_refused_and_unchanged(&store, b"garbage\n", &["line 1"]);
    assert_refused_and_unchanged(&store, b"{\"type\":\"a\xc3\x28\"}\n", &["line 1", "UTF-8"]);
    assert_refused_and_unchanged(
        &store,
        b"{\"type\":\"turn/start\",\"data\":{\"turn\":3}}\n",
        &["line 1", "turn/start", "sessionlog open", "--repair"],
    );
    let report = sessionlog(&["verify", "--store", &store], b"");
    assert_eq!(report.status.code(), Some(0), "{}", describe(&report));
}

/// With a turn left open, a line refused for its own shape says what is wrong with it and
/// no more; a line refused because of where the open turn stands points at repair.
#[test]
fn only_refusals_the_open_turn_explains_point_at_repair() {
    let (_dir, store) = store_with(true);
    let no_id = r#"{"type":"user/message","data":{"content":[],"source":{"kind":"user"},"role":"user","id":""},"surfaceOp":"append"}"#;
    let no_turn_number = r#"{"type":"step/start","data":{"step":1}}"#;
    for line in [no_id, no_turn_number] {
        assert_refused_and_unchanged(&store, format!("{line}\n").as_bytes(), &["line 1"]);
        let err = text(&append(&store, format!("{line}\n").as_bytes(), &[]).stderr);
        assert!(!err.contains("--repair"), "no repair hint: {err}");
    }
    let other_turn = r#"{"type":"turn/end","data":{"turn":3,"reason":{"kind":"completed"}}}"#;
    assert_refused_and_unchanged(
        &store,
        format!("{other_turn}\n").as_bytes(),
        &["line 1", "nesting", "sessionlog open", "--repair"],
    );
}

#[test]
fn a_turn_fed_through_several_appends_gets_no_closer_in_its_middle() {
    let (_dir, store) = store_with(true);
    let before = events(&store, "a").1;
    let out = append(&store, format!("{TURN_2_END}\n").as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(text(&out.stdout), "{\"session\":\"a\",\"seq\":7}\n");
    let after = events(&store, "a").1;
    assert!(after.starts_with(&before), "nothing before it changed");
    let added = text(&after[before.len()..]);
    assert_eq!(added.lines().count(), 1, "only the line given: {added}");
    assert!(added.contains("\"completed\""), "{added}");
    assert!(!text(&after).contains("interrupted"), "no closer anywhere");
}

#[test]
fn invalid_utf8_after_a_valid_line_names_its_line_and_keeps_the_line_before() {
    let (_dir, store) = store_with(false);
    let mut input = format!("{TURN_2_START}\n").into_bytes();
    input.extend_from_slice(b"{\"x\":\"\xff\"}\n");
    let out = append(&store, &input, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(text(&out.stderr).contains("line 2"), "{}", describe(&out));
    assert_eq!(text(&out.stdout), "{\"session\":\"a\",\"seq\":5}\n");
    let (_, all) = events(&store, "a");
    assert_eq!(
        text(&all).lines().count(),
        6,
        "the acknowledged line is kept"
    );
}

#[test]
fn repair_flag_closes_the_open_turn_first_and_prints_the_closers() {
    let (_dir, store) = store_with(true);
    let before = events(&store, "a").1;
    let out = append(
        &store,
        b"{\"type\":\"turn/start\",\"data\":{\"turn\":3}}\n",
        &["--repair"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one closer: {err}");
    assert!(
        err.contains("\"turn/end\"") && err.contains("\"interrupted\""),
        "{err}"
    );
    assert_eq!(text(&out.stdout), "{\"session\":\"a\",\"seq\":8}\n");
    let after = events(&store, "a").1;
    let added: Vec<String> = text(&after[before.len()..])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(added.len(), 2, "{added:?}");
    assert!(
        err.contains(&added[0]),
        "the closer printed is the one written"
    );
    assert!(added[1].contains("\"turn\":3"), "{added:?}");
}

#[test]
fn open_repairs_and_prints_the_closers_then_append_continues() {
    let (_dir, store) = store_with(true);
    let out = sessionlog(&["open", "--store", &store, "--session", "a"], b"");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let closers = text(&out.stdout);
    assert_eq!(closers.lines().count(), 1, "{closers}");
    assert!(closers.contains("\"interrupted\""), "{closers}");
    let next = append(
        &store,
        b"{\"type\":\"turn/start\",\"data\":{\"turn\":3}}\n",
        &[],
    );
    assert_eq!(next.status.code(), Some(0), "{}", describe(&next));
    assert!(
        next.stderr.is_empty(),
        "nothing repaired: {}",
        describe(&next)
    );
}
