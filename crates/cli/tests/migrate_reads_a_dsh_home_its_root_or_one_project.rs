//! `migrate --from dsh:DIR` finds sessions the way DSH lays them out,
//! `<home>/sessions/<projectKey>/<sessionDir>/session.jsonl`: pointed at the home, at its
//! `sessions/` root or at one project directory, it says what it found, migrates every session
//! under it with its DSH id as the name, reports per-session progress, and leaves the source
//! byte for byte as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small session log DSH accepts, with id `id`.
fn session_log(id: &str) -> String {
    format!(
        concat!(
            r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"delegationDepth":0}}"#,
            "\n",
            r#"{{"type":"turn/start","seq":0,"time":1,"data":{{"turn":1,"trigger":{{"kind":"message","source":{{"kind":"user"}}}}}}}}"#,
            "\n",
            r#"{{"type":"user/message","seq":1,"time":2,"data":{{"content":[{{"type":"text","text":"hi {id}"}}],"source":{{"kind":"user"}},"role":"user","id":"u1"}},"surfaceOp":"append"}}"#,
            "\n",
            r#"{{"type":"turn/end","seq":2,"time":3,"data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#,
            "\n"
        ),
        id = id
    )
}

/// A DSH home with two projects: `--work-a--` holding `s-1` and `s-2`, `_no-cwd` holding
/// `s:3` (its directory name escapes the colon as DSH does).
fn dsh_home(at: &Path) -> PathBuf {
    let home = at.join("dsh-home");
    for (project, id, dir) in [
        ("--work-a--", "s-1", "s-1"),
        ("--work-a--", "s-2", "s-2"),
        ("_no-cwd", "s:3", "s~003A3"),
    ] {
        let session = home.join("sessions").join(project).join(dir);
        std::fs::create_dir_all(&session).expect("session dir");
        std::fs::write(session.join("session.jsonl"), session_log(id)).expect("log");
    }
    home
}

fn sessionlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(args)
        .output()
        .expect("run sessionlog")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every file under `dir` with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("file");
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

fn migrate_into_store(from: &Path, store: &Path) -> Output {
    sessionlog(&[
        "migrate",
        "--from",
        &format!("dsh:{}", from.display()),
        "--to",
        &format!("store:{}", store.display()),
    ])
}

fn session_names(store: &Path) -> Vec<String> {
    let out = sessionlog(&[
        "sessions",
        "--store",
        store.to_str().expect("utf8"),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            v["session"].as_str().expect("name").to_owned()
        })
        .collect()
}

#[test]
fn a_dsh_home_and_its_sessions_root_migrate_every_project() {
    let temp = tempfile::tempdir().expect("tempdir");
    let home = dsh_home(temp.path());
    let before = snapshot(&home);
    for (from, found) in [
        (home.clone(), "found 3 sessions in DSH home"),
        (
            home.join("sessions"),
            "found 3 sessions in DSH sessions root",
        ),
    ] {
        let store = temp
            .path()
            .join(format!("store-{}", found.len() + from.as_os_str().len()));
        let out = migrate_into_store(&from, &store);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        let first = stdout.lines().next().expect("found line");
        assert!(first.starts_with(found), "{first}");
        assert!(first.ends_with("(2 projects)"), "{first}");
        assert!(
            stdout.contains("migrated 3 sessions, 9 events, from "),
            "{stdout}"
        );
        // Not a terminal: one plain progress line per session on stderr.
        let stderr = text(&out.stderr);
        for (k, name) in ["s-1", "s-2", "s:3"].iter().enumerate() {
            let line = format!("[{}/3] {name}: 3 events", k + 1);
            assert!(stderr.contains(&line), "no {line:?} in {stderr}");
        }
        assert_eq!(session_names(&store), ["s-1", "s-2", "s:3"]);
        let exported = sessionlog(&[
            "export",
            "--store",
            store.to_str().expect("utf8"),
            "--session",
            "s:3",
        ]);
        assert_eq!(text(&exported.stdout), session_log("s:3"));
    }
    assert!(snapshot(&home) == before, "migrate changed its source");
}

#[test]
fn one_project_directory_migrates_only_its_sessions() {
    let temp = tempfile::tempdir().expect("tempdir");
    let home = dsh_home(temp.path());
    let store = temp.path().join("store");
    let out = migrate_into_store(&home.join("sessions/--work-a--"), &store);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("found 2 sessions in DSH project directory "),
        "{stdout}"
    );
    assert!(stdout.contains("migrated 2 sessions, 6 events"), "{stdout}");
    assert_eq!(session_names(&store), ["s-1", "s-2"]);
}

#[test]
fn the_same_session_id_in_two_projects_is_refused_before_anything_is_written() {
    let temp = tempfile::tempdir().expect("tempdir");
    let home = dsh_home(temp.path());
    let twin = home.join("sessions/--work-b--/s-1");
    std::fs::create_dir_all(&twin).expect("dir");
    std::fs::write(twin.join("session.jsonl"), session_log("s-1")).expect("log");
    let store = temp.path().join("store");
    let out = migrate_into_store(&home, &store);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("\"s-1\" appears in two projects"),
        "{}",
        text(&out.stderr)
    );
    assert!(!store.exists(), "the destination was created");
}
