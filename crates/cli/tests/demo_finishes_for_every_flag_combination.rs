//! The demo finishes for every combination of empty and small sizes (no agents, no turns, no
//! killed writer), says where its store is and whether it is kept, removes its temporary
//! store unless told to keep it, and accounts for every session of the killed writer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far more than a small demo needs; a run still going then is hung.
const DEADLINE: Duration = Duration::from_secs(120);

struct Run {
    code: Option<i32>,
    stdout: String,
}

/// Runs `sessionlog demo ARGS` with its temporary directory in `tmp`, killing it at the
/// deadline.
fn demo(tmp: &Path, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .arg("demo")
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn demo");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > DEADLINE {
            child.kill().expect("kill");
            let _ = child.wait();
            panic!("demo {args:?} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn row<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name:?} row in:\n{stdout}"))
}

/// The store path from the first line, `sessionlog demo: store PATH (...)`.
fn store_path(stdout: &str) -> PathBuf {
    let first = stdout.lines().next().expect("first line");
    let rest = first
        .strip_prefix("sessionlog demo: store ")
        .unwrap_or_else(|| panic!("first line: {first}"));
    PathBuf::from(rest.split(" (").next().expect("path"))
}

/// The numbers of `sessions repaired` add up to the killed writer's sessions.
fn assert_killed_sessions_accounted_for(stdout: &str, crash_sessions: usize) {
    let line = row(stdout, "sessions repaired");
    if crash_sessions == 0 {
        assert!(line.contains("none (no writer killed)"), "{line}");
        return;
    }
    // Each later clause reads `N killed ...`.
    let count_of = |marker: &str| -> usize {
        line.split("; ")
            .find(|part| part.contains(marker))
            .map_or(0, |part| {
                let first = part.split_whitespace().next().expect("a word");
                first
                    .parse()
                    .unwrap_or_else(|_| panic!("{part:?} in {line}"))
            })
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let repaired: usize = words[2].parse().expect("repaired count");
    assert_eq!(words[3], "of", "{line}");
    let of: usize = words[4].parse().expect("killed count");
    assert_eq!(of, crash_sessions, "{line}");
    let between = count_of("killed between");
    let never = count_of("killed before");
    assert_eq!(repaired + between + never, crash_sessions, "{line}");
}

#[test]
fn every_combination_of_empty_sizes_finishes_and_verifies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (sessions, turns, crash) in [
        (0, 2, 0),
        (2, 0, 0),
        (0, 0, 0),
        (2, 2, 0),
        (0, 2, 2),
        (2, 0, 2),
        (0, 0, 1),
        (1, 1, 1),
    ] {
        let (s, t, c) = (sessions.to_string(), turns.to_string(), crash.to_string());
        let args = ["--sessions", &s, "--turns", &t, "--crash-sessions", &c];
        let run = demo(tmp.path(), &args);
        assert_eq!(run.code, Some(0), "demo {args:?}:\n{}", run.stdout);
        assert!(
            row(&run.stdout, "verification").contains("PASS"),
            "{}",
            run.stdout
        );
        assert_killed_sessions_accounted_for(&run.stdout, crash);
        let store = store_path(&run.stdout);
        assert!(store.starts_with(tmp.path()), "{}", store.display());
        assert!(
            !store.exists(),
            "the temporary store was left at {}",
            store.display()
        );
        assert!(
            run.stdout
                .contains(&format!("store removed: {}", store.display())),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn the_demo_says_where_its_store_is_and_keeps_it_when_asked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let small = ["--sessions", "1", "--turns", "1", "--crash-sessions", "0"];
    let kept = demo(tmp.path(), &[&small[..], &["--keep"]].concat());
    assert_eq!(kept.code, Some(0), "{}", kept.stdout);
    let store = store_path(&kept.stdout);
    assert!(kept
        .stdout
        .lines()
        .next()
        .expect("line")
        .contains("kept after the run"));
    assert!(
        store.join("LOCK").exists() || store.is_dir(),
        "{}",
        store.display()
    );
    assert!(kept
        .stdout
        .contains(&format!("store kept: {}", store.display())));
    std::fs::remove_dir_all(&store).expect("remove kept store");

    let dir = tmp.path().join("given");
    let given = demo(
        tmp.path(),
        &[&small[..], &["--dir", dir.to_str().expect("utf8")]].concat(),
    );
    assert_eq!(given.code, Some(0), "{}", given.stdout);
    assert_eq!(store_path(&given.stdout), dir);
    assert!(dir.is_dir(), "a --dir store is kept");
    assert!(given
        .stdout
        .contains(&format!("store kept: {}", dir.display())));

    let default = demo(tmp.path(), &small);
    assert!(default
        .stdout
        .lines()
        .next()
        .expect("line")
        .contains("removed at the end; --keep keeps it"));
}

#[test]
fn the_hidden_child_writer_refuses_zero_sessions_instead_of_spinning() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(["demo-child", "--sessions", "0", "--seed", "1", "--store"])
        .arg(tmp.path().join("s"))
        .output()
        .expect("run demo-child");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sessions 1 or more"));
}
