//! Error and status messages name the right thing and the right place: the event's type
//! without a seq it does not have yet, "not JSON" for text that is none, the file's own line
//! number, a readable segment-header state, the seq that is actually missing, what `stats` and
//! `verify` each count, and how to get the next page of `sessions`.

use std::path::Path;

mod common;

use common::{sessionlog, text};

const TURN_START: &str = r#"{"type":"turn/start","data":{"turn":1}}"#;
const STEP_START: &str = r#"{"type":"step/start","data":{"turn":1,"step":1}}"#;
const USER: &str = r#"{"type":"user/message","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#;

/// A store `s` holding session `a` with three events (a turn, its step, a user message).
fn store_with_session(dir: &Path) -> String {
    let store = dir.join("s").to_str().expect("utf8").to_owned();
    let input = format!("{TURN_START}\n{STEP_START}\n{USER}\n");
    let out = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        input.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    store
}

#[test]
fn a_malformed_envelope_names_its_type_and_no_made_up_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(dir.path());
    let line = r#"{"type":"user/message","data":{},"bogus":1}"#;
    let out = sessionlog(
        &["append", "--store", &store, "--session", "a"],
        format!("{line}\n").as_bytes(),
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        r#"sessionlog: line 1: event (user/message) rejected by the envelope rule: unknown envelope key "bogus""#
    );
    let untyped = sessionlog(
        &["append", "--store", &store, "--session", "a"],
        b"{\"data\":{}}\n",
    );
    assert!(
        text(&untyped.stderr).contains("event (type unknown) rejected by the envelope rule"),
        "{}",
        text(&untyped.stderr)
    );
}

#[test]
fn text_that_is_not_json_is_called_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(dir.path());
    for input in ["not json", "nul", "}"] {
        let out = sessionlog(
            &["append", "--store", &store, "--session", "a"],
            format!("{input}\n").as_bytes(),
        );
        assert_eq!(out.status.code(), Some(3));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("invalid JSON at byte 0: syntax error: expected a JSON value"),
            "{input:?}: {stderr}"
        );
        assert!(!stderr.contains("expected null"), "{stderr}");
    }
}

#[test]
fn an_import_line_that_is_json_null_is_named_without_a_placeholder_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("null.jsonl");
    let header = r#"{"type":"session","version":0,"id":"n","createdAt":1,"delegationDepth":0}"#;
    std::fs::write(&file, format!("{header}\nnull\n")).expect("write");
    let store = dir.path().join("s");
    let out = sessionlog(
        &[
            "import",
            "--store",
            store.to_str().expect("utf8"),
            file.to_str().expect("utf8"),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("event 0 (no type) rejected by the envelope rule: line 1 is JSON null"),
        "{stderr}"
    );
    assert!(!stderr.contains("(?)"), "{stderr}");
}

#[test]
fn an_import_names_the_line_of_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("gap.jsonl");
    let lines = [
        r#"{"type":"session","version":0,"id":"g","createdAt":1,"delegationDepth":0}"#,
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        r#"{"type":"user/message","seq":2,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        r#"{"type":"turn/end","seq":3,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    let store = dir.path().join("s");
    let out = sessionlog(
        &[
            "import",
            "--store",
            store.to_str().expect("utf8"),
            file.to_str().expect("utf8"),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    // The gap is on the file's third line, which DSH's own message (kept word for word)
    // calls line 2.
    assert!(
        stderr.contains(
            "seq gap in committed region at line 2 (expected 1, got 2); that is line 3 of the file (DSH counts the lines after the header), yet line 4 of the file holds a later turn/end"
        ),
        "{stderr}"
    );
}

/// A raw stream `x` with seqs 0..=6, one record per batch; returns the store path.
fn raw_store(dir: &Path) -> String {
    let store = dir.join("raw").to_str().expect("utf8").to_owned();
    let out = sessionlog(
        &["log", "append", "--store", &store, "--stream", "x"],
        b"0\n1\n2\n3\n4\n5\n6\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    store
}

fn segment_file(store: &str) -> std::path::PathBuf {
    std::fs::read_dir(store)
        .expect("store dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .expect("a segment")
}

fn flip_byte(file: &Path, at: u64) {
    let mut bytes = std::fs::read(file).expect("read");
    bytes[at as usize] ^= 0xff;
    std::fs::write(file, bytes).expect("write");
}

#[test]
fn a_damaged_segment_header_is_described_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = raw_store(dir.path());
    flip_byte(&segment_file(&store), 10);
    let out = sessionlog(&["log", "read", "--store", &store, "--stream", "x"], b"");
    assert_eq!(out.status.code(), Some(1), "damage exits 1");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("segment header is damaged (bytes that do not verify"),
        "{stderr}"
    );
    assert!(!stderr.contains("Damaged"), "{stderr}");
}

#[test]
fn verify_names_the_seq_that_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = raw_store(dir.path());
    let dump = text(&sessionlog(&["dump", "--store", &store], b"").stdout);
    // `record @OFFSET stream=1 seq=4 ...`: damage that record's payload.
    let offset: u64 = dump
        .lines()
        .find(|l| l.contains("stream=1 seq=4 "))
        .and_then(|l| l.trim().strip_prefix("record @"))
        .and_then(|l| l.split(' ').next())
        .expect("record 4 in the dump")
        .parse()
        .expect("offset");
    flip_byte(
        &segment_file(&store),
        offset + sessionlog_format::RECORD_HEADER_LEN as u64,
    );
    let out = sessionlog(&["verify", "--store", &store], b"");
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("stream 1 is missing seq 4 (the next record found has seq 5)"),
        "{stdout}"
    );
}

#[test]
fn stats_and_verify_say_what_they_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = raw_store(dir.path());
    let stats = text(&sessionlog(&["stats", "--store", &store], b"").stdout);
    // Seven records in the stream; the segment also holds the catalog record creating it.
    assert!(
        stats.contains(
            "records: 7 (of live sessions and streams; `verify` counts every record in the segments, catalog records and deleted streams' included)"
        ),
        "{stats}"
    );
    let verify = text(&sessionlog(&["verify", "--store", &store], b"").stdout);
    assert!(verify.contains(", 8 batches, 8 records,"), "{verify}");
}

#[test]
fn a_full_page_of_sessions_says_how_to_get_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(dir.path());
    for name in ["b", "c"] {
        let out = sessionlog(
            &["append", "--store", &store, "--session", name, "--create"],
            format!("{TURN_START}\n").as_bytes(),
        );
        assert_eq!(out.status.code(), Some(0));
    }
    let first = sessionlog(&["sessions", "--store", &store, "--limit", "2"], b"");
    assert_eq!(text(&first.stdout), "a\t3 events\nb\t1 event\n");
    let hint = text(&first.stderr);
    let expected = format!(
        "more sessions follow; next page: sessionlog sessions --store {store} --limit 2 --after b\n"
    );
    assert_eq!(hint, expected);
    // Following the hint gives the rest, and the last page has no hint.
    let args: Vec<&str> = hint
        .trim_end()
        .split_once("next page: sessionlog ")
        .expect("command")
        .1
        .split(' ')
        .collect();
    let next = sessionlog(&args, b"");
    assert_eq!(text(&next.stdout), "c\t1 event\n");
    assert_eq!(text(&next.stderr), "");
}
