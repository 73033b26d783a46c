//! The session commands keep their contract: output lines, exit codes, and refusals that
//! leave the store unchanged.

mod common;

use common::{sessionlog, text};

/// A fixture log, or `None` when the DSH corpus is absent (`test` is then skipped, said once).
fn fixture(test: &str, rel: &str) -> Option<std::path::PathBuf> {
    Some(sessionlog_testkit::dsh_corpus(test)?.join("logs").join(rel))
}

#[test]
fn append_commits_every_valid_line_and_stops_at_the_first_invalid_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let input = concat!(
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        "\n",
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        "\n",
        r#"{"type":"user/message","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"user/message","data":{"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"u2","n":-0},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        "\n",
    );
    let out = sessionlog(
        &["append", "--store", store, "--session", "s1", "--create"],
        input.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("line 4"), "names the line: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let acks: Vec<&str> = std::str::from_utf8(&out.stdout)
        .expect("utf8")
        .lines()
        .collect();
    assert_eq!(
        acks,
        vec![
            r#"{"session":"s1","seq":0}"#,
            r#"{"session":"s1","seq":1}"#,
            r#"{"session":"s1","seq":2}"#
        ]
    );
    let events = sessionlog(&["events", "--store", store, "--session", "s1"], b"");
    assert_eq!(events.status.code(), Some(0));
    assert_eq!(
        text(&events.stdout).lines().count(),
        3,
        "nothing of the invalid event is stored"
    );
    let surface = sessionlog(&["surface", "--store", store, "--session", "s1"], b"");
    assert_eq!(text(&surface.stdout).trim(), "[2]");
    let derive = sessionlog(&["derive", "--store", store, "--session", "s1"], b"");
    assert_eq!(
        text(&derive.stdout).trim(),
        r#"[{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"}]"#
    );
}

#[test]
fn a_refused_import_exits_3_and_leaves_the_store_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let Some(corrupt) = fixture(
        "a_refused_import_exits_3_and_leaves_the_store_unchanged",
        "apps/web/tests/snapshots/cordis-tool-round/session.jsonl",
    ) else {
        return;
    };
    let out = sessionlog(
        &["import", "--store", store, corrupt.to_str().expect("utf8")],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("corrupt session log"));
    assert!(
        !std::path::Path::new(store).exists(),
        "a refused import into an absent directory creates no store"
    );

    // Into an existing store: refused again, and not one byte of the store changes.
    common::make_store(std::path::Path::new(store), "a", 4);
    let before = common::picture(std::path::Path::new(store));
    let out = sessionlog(
        &["import", "--store", store, corrupt.to_str().expect("utf8")],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    assert_eq!(common::picture(std::path::Path::new(store)), before);
    let stats = sessionlog(&["stats", "--store", store, "--json"], b"");
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("json");
    assert_eq!(v["sessions"], 1);
}

#[test]
fn import_then_export_reproduces_the_file_and_open_appends_closers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let Some(file) = fixture(
        "import_then_export_reproduces_the_file_and_open_appends_closers",
        "apps/web/tests/snapshots/approval-composer/session.jsonl",
    ) else {
        return;
    };
    let out = sessionlog(
        &[
            "import",
            "--store",
            store,
            file.to_str().expect("utf8"),
            "--session",
            "ac",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["session"], "ac");
    assert_eq!(v["tailDiscarded"], false);
    let exported = sessionlog(&["export", "--store", store, "--session", "ac"], b"");
    assert_eq!(exported.stdout, std::fs::read(&file).expect("fixture"));
    let opened = sessionlog(&["open", "--store", store, "--session", "ac"], b"");
    assert_eq!(opened.status.code(), Some(0));
    assert_eq!(
        text(&opened.stdout).lines().count() as u64,
        v["closers"].as_u64().expect("closers")
    );
    assert_eq!(
        text(&opened.stderr).contains("repaired session \"ac\""),
        v["closers"].as_u64() > Some(0),
        "the repair is reported on stderr exactly when closers were appended: {}",
        text(&opened.stderr)
    );
    let again = sessionlog(&["open", "--store", store, "--session", "ac"], b"");
    assert_eq!(text(&again.stdout), "", "a closed turn needs no closers");
    assert_eq!(text(&again.stderr), "", "nothing was repaired");
}

#[test]
fn unknown_sessions_and_stores_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let out = sessionlog(
        &[
            "export",
            "--store",
            missing.to_str().expect("utf8"),
            "--session",
            "x",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr).lines().count(), 1);
    let store = dir.path().join("s");
    sessionlog(
        &[
            "log",
            "append",
            "--store",
            store.to_str().expect("utf8"),
            "--stream",
            "other",
        ],
        b"x\n",
    );
    let out = sessionlog(
        &[
            "derive",
            "--store",
            store.to_str().expect("utf8"),
            "--session",
            "x",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no session named"),
        "{}",
        text(&out.stderr)
    );
}
