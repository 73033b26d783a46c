//! `compact` checks before it writes: a compaction that cannot help is refused (exit 3) with
//! nothing written, never a `compaction/start`/`end` pair for a foreseeable failure; with the
//! defaults, every fixture session either compacts or is refused that way.

mod common;

use common::{describe, events, sessionlog, text, turn_lines};

fn compact(store: &str, session: &str) -> std::process::Output {
    sessionlog(&["compact", "--store", store, "--session", session], b"")
}

#[test]
fn a_compaction_that_cannot_help_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let input = turn_lines(1) + &turn_lines(2);
    let made = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        input.as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let before = events(&store, "a");
    for extra in [&[][..], &["--keep-tokens", "0"][..]] {
        let mut args = vec!["compact", "--store", &store, "--session", "a"];
        args.extend_from_slice(extra);
        let out = sessionlog(&args, b"");
        assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains("nothing written"), "{err}");
        assert_eq!(events(&store, "a"), before, "no event written");
    }
}

#[test]
fn a_summary_file_not_smaller_than_the_span_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let long = "a question long enough to be worth summarizing ".repeat(10);
    let input: String = (1..=6)
        .map(|t| turn_lines(t).replace("question", &long))
        .collect();
    let made = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        input.as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let summary = dir.path().join("summary.txt");
    std::fs::write(&summary, "a summary far longer than the turns ".repeat(200)).expect("write");
    let before = events(&store, "a");
    let out = sessionlog(
        &[
            "compact",
            "--store",
            &store,
            "--session",
            "a",
            "--keep-tokens",
            "0",
            "--summary-file",
            summary.to_str().expect("utf8"),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("not smaller"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        events(&store, "a"),
        before,
        "no compaction/start or end written"
    );
}

#[test]
fn every_fixture_session_compacts_with_the_defaults_or_is_refused_without_a_trace() {
    let Some(root) = sessionlog_testkit::dsh_corpus(
        "every_fixture_session_compacts_with_the_defaults_or_is_refused_without_a_trace",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let mut files = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("fixture dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut sessions = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let name = format!("f{i:03}");
        let out = sessionlog(
            &[
                "import",
                "--store",
                &store,
                file.to_str().expect("utf8"),
                "--session",
                &name,
            ],
            b"",
        );
        if out.status.code() == Some(0) {
            sessions.push(name);
        }
    }
    assert!(
        sessions.len() >= 50,
        "the corpus imports: {}",
        sessions.len()
    );
    let (mut compacted, mut refused) = (0, 0);
    for name in &sessions {
        let (_, before) = events(&store, name);
        let out = compact(&store, name);
        let (_, after) = events(&store, name);
        match out.status.code() {
            Some(0) => {
                compacted += 1;
                assert!(after.starts_with(&before), "{name}: originals kept");
                let added = text(&after[before.len()..]);
                let types: Vec<&str> = added
                    .lines()
                    .map(|l| {
                        let start = l.find("\"type\":\"").expect("type") + 8;
                        &l[start..start + l[start..].find('"').expect("end")]
                    })
                    .collect();
                assert_eq!(
                    types,
                    [
                        "compaction/start",
                        "compaction/summary",
                        "user/message",
                        "compaction/end"
                    ],
                    "{name}"
                );
            }
            Some(3) => {
                refused += 1;
                assert_eq!(after, before, "{name}: a refusal writes nothing");
                assert!(
                    text(&out.stderr).contains("nothing written"),
                    "{name}: {}",
                    describe(&out)
                );
            }
            _ => panic!("{name}: {}", describe(&out)),
        }
    }
    assert!(
        compacted > sessions.len() / 2,
        "{compacted} of {} compacted ({refused} refused)",
        sessions.len()
    );
    let verify = sessionlog(&["verify", "--store", &store], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}
