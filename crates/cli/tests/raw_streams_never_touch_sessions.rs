//! `log append` / `log read` work on raw streams in their own namespace: a session's name is
//! refused with nothing written, and no session listing shows a raw stream.

mod common;

use common::{describe, events, records, sessionlog, text, turn_lines};

#[test]
fn log_append_to_a_session_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let made = sessionlog(
        &["append", "--store", store, "--session", "a", "--create"],
        turn_lines(1).as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let before = events(store, "a");
    let records_before = records(store);

    let out = sessionlog(
        &["log", "append", "--store", store, "--stream", "a"],
        b"x\n",
    );
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "no receipt: {}", describe(&out));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("is a session"), "{err}");

    assert_eq!(records(store), records_before, "not one record was written");
    assert_eq!(events(store, "a"), before, "the session reads as before");
    let read = sessionlog(&["log", "read", "--store", store, "--stream", "a"], b"");
    assert_eq!(read.status.code(), Some(3), "{}", describe(&read));
    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}

#[test]
fn raw_streams_round_trip_and_stay_out_of_session_listings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let made = sessionlog(
        &["append", "--store", store, "--session", "a", "--create"],
        turn_lines(1).as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let out = sessionlog(
        &["log", "append", "--store", store, "--stream", "b"],
        b"first\nsecond\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        text(&out.stdout),
        "{\"stream\":\"b\",\"seq\":0}\n{\"stream\":\"b\",\"seq\":1}\n"
    );
    let read = sessionlog(&["log", "read", "--store", store, "--stream", "b"], b"");
    assert_eq!(read.status.code(), Some(0), "{}", describe(&read));
    assert_eq!(text(&read.stdout), "first\nsecond\n");

    let listed = sessionlog(&["sessions", "--store", store, "--json"], b"");
    assert_eq!(listed.status.code(), Some(0), "{}", describe(&listed));
    assert_eq!(text(&listed.stdout), "{\"session\":\"a\",\"events\":5}\n");
    let no_session = sessionlog(&["events", "--store", store, "--session", "b"], b"");
    assert_eq!(
        no_session.status.code(),
        Some(2),
        "{}",
        describe(&no_session)
    );
    assert!(text(&no_session.stderr).contains("no session named \"b\""));

    let stats = sessionlog(&["stats", "--store", store], b"");
    assert_eq!(stats.status.code(), Some(0), "{}", describe(&stats));
    let stats = text(&stats.stdout);
    assert!(stats.contains("\nsessions: 1\n"), "{stats}");
    assert!(stats.contains("\nraw streams: 1\n"), "{stats}");
    let stats = sessionlog(&["stats", "--store", store, "--json"], b"");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats JSON");
    assert_eq!(stats["sessions"], 1, "{stats}");
    assert_eq!(stats["rawStreams"], 1, "{stats}");

    let verify = sessionlog(&["verify", "--store", store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
    let missing = sessionlog(&["log", "read", "--store", store, "--stream", "c"], b"");
    assert_eq!(missing.status.code(), Some(2), "{}", describe(&missing));
}
