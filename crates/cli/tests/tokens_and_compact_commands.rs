//! `tokens` labels every figure exact or estimated; `compact` shrinks what the model sees
//! while every original event stays in the log.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(args)
        .output()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn compact_shrinks_the_surface_and_keeps_every_event() {
    let Some(corpus) =
        sessionlog_testkit::dsh_corpus("compact_shrinks_the_surface_and_keeps_every_event")
    else {
        return;
    };
    let file = corpus.join("logs/apps/web/tests/snapshots/approval-composer/session.jsonl");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    let (s, f) = (store.to_str().expect("utf8"), file.to_str().expect("utf8"));
    assert_eq!(run(&["import", "--store", s, f, "--session", "a"]).0, 0);
    let (code, before) = run(&["tokens", "--store", s, "--session", "a", "--json"]);
    assert_eq!(code, 0, "{before}");
    let before: serde_json::Value = serde_json::from_str(before.trim()).expect("json");
    assert_eq!(before["cumulative"]["total"]["label"], "exact");
    assert!(before["surface"]["estimate"]["label"]
        .as_str()
        .expect("label")
        .starts_with("estimated"));
    let events_before = run(&["events", "--store", s, "--session", "a"]).1;
    let (code, said) = run(&["compact", "--store", s, "--session", "a"]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("compacted"), "{said}");
    let after: serde_json::Value = serde_json::from_str(
        run(&["tokens", "--store", s, "--session", "a", "--json"])
            .1
            .trim(),
    )
    .expect("json");
    assert!(after["surface"]["nodes"].as_u64() < before["surface"]["nodes"].as_u64());
    assert!(
        after["surface"]["estimate"]["tokens"].as_u64()
            < before["surface"]["estimate"]["tokens"].as_u64()
    );
    assert_eq!(
        after["cumulative"], before["cumulative"],
        "compaction never rewrites the accounting"
    );
    let events_after = run(&["events", "--store", s, "--session", "a"]).1;
    assert!(
        events_after.starts_with(&events_before),
        "every original event is still there, unchanged"
    );
    assert_eq!(
        events_after.lines().count(),
        events_before.lines().count() + 4,
        "lock, summary, replacement, end"
    );
    assert_eq!(run(&["verify", "--store", s]).0, 0);
}
