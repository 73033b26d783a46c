//! `verify` checks sessions as well as checksums: a record that passes every checksum but is
//! not a valid event of its session is damage (exit 1) named by session, seq and rule;
//! `--fast` checks only the structure.

mod common;

use common::{describe, sessionlog, text, turn_lines};
use sessionlog_log::{Append, Durability, Log, LogOptions};

/// A store whose session `a` holds one complete turn (events 0..=4), then `record`
/// (kind, payload) committed straight through the log, as a buggy writer could.
fn damaged_store(kind: u8, payload: &[u8]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let made = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        turn_lines(1).as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let log = Log::open(&store, LogOptions::default()).expect("open log");
    let id = log.stream_id("a").expect("session stream");
    log.commit(&[Append::new(id, kind, payload)], Durability::Sync)
        .expect("commit");
    log.close().expect("close");
    (dir, store)
}

fn verify(store: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["verify", "--store", store];
    args.extend_from_slice(extra);
    sessionlog(&args, b"")
}

fn assert_session_damage(store: &str, seq: u64, rule: &str) {
    let out = verify(store, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let report = text(&out.stdout);
    let line = report
        .lines()
        .find(|l| l.starts_with("DAMAGE session"))
        .unwrap_or_else(|| panic!("a session damage line: {report}"));
    assert!(
        line.starts_with(&format!("DAMAGE session \"a\" seq {seq}: {rule} rule")),
        "{line}"
    );
    assert!(report.ends_with("1 damaged places\n"), "{report}");

    let json = verify(store, &["--json"]);
    assert_eq!(json.status.code(), Some(1), "{}", describe(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["intact"], false);
    let damage = &v["sessions"]["damages"][0];
    assert_eq!(damage["session"], "a");
    assert_eq!(damage["seq"], seq);
    assert_eq!(damage["rule"], rule);

    let fast = verify(store, &["--fast"]);
    assert_eq!(fast.status.code(), Some(0), "{}", describe(&fast));
    assert!(text(&fast.stdout).contains("not checked (--fast)"));
}

#[test]
fn a_record_that_does_not_decode_is_named() {
    let (_dir, store) = damaged_store(0x00, b"x");
    assert_session_damage(&store, 5, "decode");
}

#[test]
fn an_event_with_the_wrong_seq_breaks_the_gap_free_rule() {
    let mut payload = vec![0x01];
    payload.extend_from_slice(br#"{"type":"turn/start","seq":7,"time":1,"data":{"turn":2}}"#);
    let (_dir, store) = damaged_store(0x10, &payload);
    assert_session_damage(&store, 5, "gap-free seq");
}

#[test]
fn an_event_with_another_kind_tag_is_named() {
    let mut payload = vec![0x01];
    payload.extend_from_slice(br#"{"type":"turn/start","seq":5,"time":1,"data":{"turn":2}}"#);
    let (_dir, store) = damaged_store(0x01, &payload);
    assert_session_damage(&store, 5, "kind tag");
}

#[test]
fn an_event_the_session_rules_refuse_is_named_with_its_rule() {
    let mut payload = vec![0x01];
    payload.extend_from_slice(
        br#"{"type":"user/message","seq":5,"time":1,"data":{"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"u9"}}"#,
    );
    let (_dir, store) = damaged_store(0x01, &payload);
    assert_session_damage(&store, 5, "surfaceOp");
}

#[test]
fn an_intact_store_with_an_open_turn_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let input = turn_lines(1) + "{\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n";
    let made = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        input.as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let out = verify(&store, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("sessions: 1 checked, 6 events decoded and folded"),
        "{}",
        describe(&out)
    );
}
