//! Helpers shared by the CLI scenario tests: run the binary, build a small store, take a
//! byte-exact picture of a store directory, and pin a session's events.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `sessionlog` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sessionlog")
}

/// What a finished command said and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs `sessionlog ARGS` with `stdin` as its input.
pub fn run(args: &[&str], stdin: &str) -> Run {
    sessionlog(args, stdin.as_bytes()).into()
}

/// Event line `i` of a session made of complete turns: even lines start a turn, odd lines
/// end it.
pub fn event_line(i: u64) -> String {
    let turn = i / 2 + 1;
    if i % 2 == 0 {
        format!(r#"{{"type":"turn/start","time":{i},"data":{{"turn":{turn}}}}}"#)
    } else {
        format!(
            r#"{{"type":"turn/end","time":{i},"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#
        )
    }
}

/// Creates `store` with session `name` holding `events` events, each committed durably.
pub fn make_store(store: &Path, name: &str, events: u64) {
    let input: String = (0..events).map(|i| event_line(i) + "\n").collect();
    let r = run(
        &[
            "append",
            "--store",
            store.to_str().expect("utf-8 path"),
            "--session",
            name,
            "--create",
        ],
        &input,
    );
    assert_eq!(r.code, 0, "building the store failed: {r:?}");
}

/// Every entry of `dir` (recursively) with its bytes: equal pictures mean nothing was
/// created, removed, resized or written.
pub fn picture(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let e = e.expect("dir entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if path.is_dir() {
            out.insert(format!("{name}/"), Vec::new());
            for (k, v) in picture(&path) {
                out.insert(format!("{name}/{k}"), v);
            }
        } else {
            out.insert(name, std::fs::read(&path).expect("read store file"));
        }
    }
    out
}

/// The only segment file of a store made by [`make_store`].
pub fn first_segment(store: &Path) -> std::path::PathBuf {
    store.join("00000000000000000001.seg")
}

/// The seqs printed by `sessionlog events`, checked to be 0, 1, 2, ... in order.
pub fn gap_free_seqs(events_stdout: &str) -> u64 {
    let mut n = 0;
    for line in events_stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("event line is JSON");
        assert_eq!(
            v["seq"].as_u64(),
            Some(n),
            "events are not gap-free: {line}"
        );
        n += 1;
    }
    n
}

/// Runs `sessionlog ARGS` with `stdin` bytes (possibly not UTF-8) and waits for it.
pub fn sessionlog(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A command that refuses early may close stdin before reading it all.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("wait")
}

/// Lossy text of a byte output.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The exit code, stdout and stderr of a run, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// `events` of a session: exit code and the exact stdout bytes.
pub fn events(store: &str, session: &str) -> (Option<i32>, Vec<u8>) {
    let out = sessionlog(&["events", "--store", store, "--session", session], b"");
    (out.status.code(), out.stdout)
}

/// Record count of the whole store, as `stats --json` reports it.
pub fn records(store: &str) -> u64 {
    let out = sessionlog(&["stats", "--store", store, "--json"], b"");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats json");
    v["records"].as_u64().expect("records")
}

/// A complete turn of five events, in native order: turn start, step start, user message,
/// step end, turn end.
pub fn turn_lines(turn: u32) -> String {
    format!(
        concat!(
            r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#,
            "\n",
            r#"{{"type":"step/start","data":{{"turn":{t},"step":1}}}}"#,
            "\n",
            r#"{{"type":"user/message","data":{{"content":[{{"type":"text","text":"question {t}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{t}"}},"surfaceOp":"append"}}"#,
            "\n",
            r#"{{"type":"step/end","data":{{"turn":{t},"step":1}}}}"#,
            "\n",
            r#"{{"type":"turn/end","data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#,
            "\n",
        ),
        t = turn
    )
}
