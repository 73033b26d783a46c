//! The main job runs end to end on a small scale: concurrent sessions, compaction, a writer
//! killed mid-turn and repaired, and a verification that passes.

use std::process::Command;

#[test]
fn a_small_demo_verifies_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args([
            "demo",
            "--sessions",
            "6",
            "--turns",
            "10",
            "--crash-sessions",
            "3",
            "--dir",
        ])
        .arg(&store)
        .output()
        .expect("run demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("verification") && stdout.contains("PASS"),
        "{stdout}"
    );
    let repaired = stdout
        .lines()
        .find(|l| l.contains("sessions repaired"))
        .expect("repaired row");
    assert!(
        repaired.contains(" of 3 in the killed writer") && !repaired.contains("repaired  0 of"),
        "the killed writer leaves open turns to repair: {repaired}"
    );
    let compactions = stdout
        .lines()
        .find(|l| l.contains("compactions"))
        .expect("compactions row");
    assert!(
        !compactions.trim().ends_with(" 0"),
        "sessions cross their threshold: {compactions}"
    );
}
