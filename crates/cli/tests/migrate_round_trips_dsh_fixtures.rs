//! `sessionlog migrate` is lossless: every DSH fixture that DSH accepts goes DSH → store →
//! SQLite → DSH and comes back byte for byte (its committed bytes: a torn tail is
//! cut on the way, as DSH's own load cuts it). A fixture DSH refuses makes the migration fail
//! with an error that names it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sessionlog_adapters::{encode_session_dir, SESSION_FILE};

fn logs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("fixture dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            logs(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

fn migrate(from: &str, to: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(["migrate", "--from", from, "--to", to])
        .output()
        .expect("run sessionlog")
}

fn put(root: &Path, name: &str, bytes: &[u8]) {
    let dir = root.join(encode_session_dir(name));
    std::fs::create_dir_all(&dir).expect("session dir");
    std::fs::write(dir.join(SESSION_FILE), bytes).expect("write fixture");
}

struct Fixture {
    name: String,
    bytes: Vec<u8>,
    committed: usize,
    refused: bool,
}

/// The fixtures, or `None` when the DSH corpus is absent (`test` is then skipped, said once).
fn fixtures(test: &str) -> Option<Vec<Fixture>> {
    let root = sessionlog_testkit::dsh_corpus(test)?;
    let mut files = Vec::new();
    logs(&root.join("logs"), &mut files);
    files.sort();
    assert!(
        files.len() >= 100,
        "expected the DSH corpus, found {} logs",
        files.len()
    );
    let all = files
        .iter()
        .map(|file| {
            let rel = file.strip_prefix(root.join("logs")).expect("under logs");
            let golden: Value = serde_json::from_slice(
                &std::fs::read(
                    root.join("golden")
                        .join(format!("{}.golden.json", rel.display())),
                )
                .expect("golden"),
            )
            .expect("golden json");
            Fixture {
                name: rel.display().to_string(),
                bytes: std::fs::read(file).expect("fixture"),
                committed: golden["committedBytes"].as_u64().unwrap_or(0) as usize,
                refused: golden["error"].is_string(),
            }
        })
        .collect();
    Some(all)
}

#[test]
fn every_accepted_fixture_survives_dsh_to_store_to_sqlite_to_dsh_byte_for_byte() {
    let Some(all) =
        fixtures("every_accepted_fixture_survives_dsh_to_store_to_sqlite_to_dsh_byte_for_byte")
    else {
        return;
    };
    let accepted: Vec<&Fixture> = all.iter().filter(|f| !f.refused).collect();
    assert!(
        accepted.len() > 90,
        "only {} accepted fixtures",
        accepted.len()
    );
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("dsh-in");
    for fixture in &accepted {
        put(&source, &fixture.name, &fixture.bytes);
    }
    let hops = [
        format!("dsh:{}", source.display()),
        format!("store:{}", temp.path().join("store").display()),
        format!("sqlite:{}", temp.path().join("sessions.db").display()),
        format!("dsh:{}", temp.path().join("dsh-out").display()),
    ];
    for pair in hops.windows(2) {
        let out = migrate(&pair[0], &pair[1]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "migrate {} -> {} failed: {}",
            pair[0],
            pair[1],
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("migrated {} sessions, ", accepted.len()))),
            "count line: {stdout}"
        );
    }
    let mut differing = Vec::new();
    for fixture in &accepted {
        let path = temp
            .path()
            .join("dsh-out")
            .join(encode_session_dir(&fixture.name))
            .join(SESSION_FILE);
        let back = std::fs::read(&path).expect("migrated file");
        if back[..] != fixture.bytes[..fixture.committed] {
            differing.push(fixture.name.clone());
        }
    }
    assert!(differing.is_empty(), "changed by migration: {differing:#?}");
}

#[test]
fn a_fixture_dsh_refuses_fails_the_migration_and_is_named() {
    let Some(all) = fixtures("a_fixture_dsh_refuses_fails_the_migration_and_is_named") else {
        return;
    };
    let refused = all.iter().find(|f| f.refused).expect("a refused fixture");
    let ok = all
        .iter()
        .find(|f| !f.refused)
        .expect("an accepted fixture");
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("dsh-in");
    put(&source, "a-good", &ok.bytes);
    put(&source, "b-refused", &refused.bytes);
    let target = temp.path().join("sessions.db");
    let out = migrate(
        &format!("dsh:{}", source.display()),
        &format!("sqlite:{}", target.display()),
    );
    assert!(!out.status.success(), "a refused fixture was migrated");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("b-refused"),
        "the error names the session: {stderr}"
    );
    assert!(
        !target.exists(),
        "the destination was created before the refusal"
    );
}
