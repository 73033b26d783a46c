//! `show` prints a transcript: one block per surface message with its role, tool calls and
//! results summarised, streamed chunks collapsed into the settlement they became, shadowed
//! messages and replacements marked with each other's seq, structural events marked, and the
//! columns aligned. `--raw` keeps the one-line-per-event listing.

use std::path::Path;
use std::process::Command;

fn sessionlog(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(args)
        .output()
        .expect("run sessionlog");
    assert!(
        out.stderr.is_empty() || !out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A row: mark, seq, kind and text. Continuation rows have no seq.
struct Row<'a> {
    mark: char,
    seq: Option<u64>,
    kind: &'a str,
    text: &'a str,
    /// Character column where the text starts.
    text_at: usize,
}

/// Parses the rows after the two heading lines and the blank line.
fn rows(transcript: &str) -> Vec<Row<'_>> {
    // The first row is an event's; a continuation row is blank at least up to just past
    // where that row's kind word ends.
    let first = transcript.lines().nth(3).expect("a first row");
    let kind_end = first
        .char_indices()
        .skip(2)
        .skip_while(|(_, c)| *c == ' ' || c.is_ascii_digit())
        .find(|(_, c)| *c == ' ')
        .map(|(i, _)| i)
        .expect("kind");
    let text_column = first[..kind_end].chars().count() + 2;
    transcript
        .lines()
        .skip(3)
        .map(|line| {
            let mark = line.chars().next().expect("mark");
            let rest = &line[mark.len_utf8()..];
            // A continuation row is blank up to the text column (its text may start with
            // a number, so that is not a seq).
            let continuation = line.chars().take(text_column).all(|c| c == ' ');
            let seq: Option<u64> = if continuation {
                None
            } else {
                rest.split_whitespace().next().and_then(|w| w.parse().ok())
            };
            let (kind, text, text_at) = match seq {
                Some(seq) => {
                    let after_seq =
                        rest.find(&seq.to_string()).expect("seq") + seq.to_string().len();
                    let tail = &rest[after_seq..];
                    let kind = tail.split_whitespace().next().expect("kind");
                    let kind_at = tail.find(kind).expect("kind");
                    let text_rel = tail[kind_at + kind.len()..]
                        .find(|c: char| c != ' ')
                        .map_or(tail.len(), |t| kind_at + kind.len() + t);
                    (
                        kind,
                        &tail[text_rel..],
                        line[..mark.len_utf8() + after_seq + text_rel]
                            .chars()
                            .count(),
                    )
                }
                None => {
                    let at = line.find(|c: char| c != ' ').expect("text");
                    ("", &line[at..], at)
                }
            };
            Row {
                mark,
                seq,
                kind,
                text,
                text_at,
            }
        })
        .collect()
}

fn demo_store(dir: &Path) -> String {
    let store = dir.join("demo");
    let store = store.to_str().expect("utf8").to_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args([
            "demo",
            "--sessions",
            "1",
            "--turns",
            "12",
            "--crash-sessions",
            "0",
            "--dir",
            &store,
        ])
        .output()
        .expect("run demo");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    store
}

#[test]
fn a_compacted_demo_session_reads_as_a_transcript() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = demo_store(dir.path());
    let (code, transcript) = sessionlog(&["show", "--store", &store, "--session", "agent-000"]);
    assert_eq!(code, 0);
    let (_, events) = sessionlog(&["events", "--store", &store, "--session", "agent-000"]);
    let event_count = events.lines().count();
    assert!(
        transcript.starts_with(&format!("session agent-000: {event_count} events, ")),
        "{transcript}"
    );
    let rows = rows(&transcript);
    // Aligned: every row's text starts in the same column.
    let column = rows[0].text_at;
    for r in &rows {
        assert_eq!(r.text_at, column, "misaligned row: {:?}", r.text);
    }
    // Chunks never get a row of their own; each run names its settlement.
    assert!(!transcript.contains("assistant/chunk"), "{transcript}");
    let streams: Vec<&Row> = rows.iter().filter(|r| r.kind == "stream").collect();
    assert!(!streams.is_empty());
    for s in &streams {
        assert_eq!(s.mark, '·');
        let settled: u64 = s
            .text
            .rsplit("settled in seq ")
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", s.text));
        assert!(
            rows.iter()
                .any(|r| r.seq == Some(settled) && r.kind == "assistant"),
            "seq {settled} is not an assistant block"
        );
    }
    // Structural rows for turn and step boundaries and requests.
    for (kind, words) in [
        ("turn", "turn 1 starts"),
        ("step", "step 1.1 ends"),
        ("request", "request to demo/"),
    ] {
        assert!(
            rows.iter()
                .any(|r| r.mark == '·' && r.kind == kind && r.text.starts_with(words)),
            "no {words:?} row"
        );
    }
    // Tool calls and their results.
    assert!(
        rows.iter().any(|r| r.text.starts_with("→ calls bash(")),
        "{transcript}"
    );
    assert!(
        rows.iter().any(|r| r.kind == "tool"
            && r.text.starts_with("← bash [call-")
            && r.text.contains("] ok: ")),
        "{transcript}"
    );
    // Each shadowed message names a replacement, which names the range it replaced.
    let replacements: Vec<u64> = rows
        .iter()
        .filter(|r| r.text.starts_with("[replaces seq "))
        .map(|r| {
            // The replacement's own row is the last row before this one that has a seq.
            let at = rows.iter().position(|x| std::ptr::eq(x, r)).expect("row");
            rows[..=at].iter().rev().find_map(|x| x.seq).expect("seq")
        })
        .collect();
    assert!(!replacements.is_empty(), "the demo compacts: {transcript}");
    let shadow_notes: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.text.strip_prefix("[shadowed by seq "))
        .map(|t| t.trim_end_matches(']').parse().expect("seq"))
        .collect();
    assert!(!shadow_notes.is_empty());
    for by in &shadow_notes {
        assert!(
            replacements.contains(by),
            "shadowed by {by}, not a replacement"
        );
    }
    assert!(rows.iter().any(|r| r.mark == '~' && r.seq.is_some()));
    assert!(rows.iter().any(|r| r.mark == '»' && r.seq.is_some()));
    // The surface rows are exactly the surface.
    let (_, surface) = sessionlog(&["surface", "--store", &store, "--session", "agent-000"]);
    let surface: Vec<u64> = serde_json::from_str(surface.trim()).expect("surface json");
    let shown: Vec<u64> = rows
        .iter()
        .filter(|r| (r.mark == ' ' || r.mark == '»') && r.seq.is_some())
        .filter_map(|r| r.seq)
        .collect();
    let mut sorted = surface.clone();
    sorted.sort_unstable();
    assert_eq!(shown, sorted);
}

#[test]
fn raw_keeps_one_line_per_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = demo_store(dir.path());
    let (code, raw) = sessionlog(&["show", "--store", &store, "--session", "agent-000", "--raw"]);
    assert_eq!(code, 0);
    let (_, events) = sessionlog(&["events", "--store", &store, "--session", "agent-000"]);
    // The heading, one line per event, and the legend.
    assert_eq!(raw.lines().count(), events.lines().count() + 2, "{raw}");
    assert!(raw.contains(" · assistant/chunk\n"), "{raw}");
}

#[test]
fn a_dsh_compaction_fixture_shows_its_summary_in_place_of_what_it_replaced() {
    let Some(corpus) = sessionlog_testkit::dsh_corpus(
        "a_dsh_compaction_fixture_shows_its_summary_in_place_of_what_it_replaced",
    ) else {
        return;
    };
    let file = corpus
        .join("logs/examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let store = store.to_str().expect("utf8");
    let (code, _) = sessionlog(&[
        "import",
        "--store",
        store,
        file.to_str().expect("utf8"),
        "--session",
        "cr",
    ]);
    assert_eq!(code, 0);
    let (code, transcript) = sessionlog(&["show", "--store", store, "--session", "cr"]);
    assert_eq!(code, 0);
    assert!(
        transcript.starts_with(
            "session cr: 31 events, 4 messages on the surface, 1 shadowed by 1 replacement\n"
        ),
        "{transcript}"
    );
    let rows = rows(&transcript);
    let row = |seq: u64| rows.iter().find(|r| r.seq == Some(seq)).expect("row");
    assert_eq!((row(4).mark, row(4).kind), ('~', "user"));
    assert_eq!((row(21).mark, row(21).kind), ('»', "user"));
    assert_eq!(row(21).text, "[replaces seq 4..=4; cites seq 19, 20, 4]");
    assert!(transcript.contains("[shadowed by seq 21]"));
    assert_eq!(row(19).text.split(' ').next(), Some("compaction/start"));
    assert_eq!(
        row(8).text,
        "5 streamed chunks (seq 8..=12), settled in seq 13"
    );
    assert_eq!(row(30).text, "turn 1 ends: completed");
}
