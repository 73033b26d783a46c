//! A store directory and files nobody may write, read by an unprivileged user: every
//! reading command works (no lock taken, nothing written), and a writing command fails with
//! one line instead of changing anything.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{bin, make_store, picture, Run};

/// Runs the CLI as user and group 65534 (nobody) through `setpriv` or `runuser`.
fn as_nobody(binary: &Path, args: &[&str]) -> Option<Run> {
    let setpriv = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(binary)
        .args(args)
        .output();
    if let Ok(out) = setpriv {
        return Some(out.into());
    }
    let runuser = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(binary)
        .args(args)
        .output();
    runuser.ok().map(Run::from)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_store_without_write_permission_is_read_by_an_unprivileged_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    chmod(dir.path(), 0o755);
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path");
    make_store(&store, "a", 6);
    // The binary may live where that user cannot reach it: give it a copy it can run.
    let binary = dir.path().join("sessionlog");
    std::fs::copy(bin(), &binary).expect("copy the binary");
    chmod(&binary, 0o755);
    match as_nobody(&binary, &["--version"]) {
        Some(r) if r.code == 0 => {}
        other => {
            println!(
                "SKIPPED a_store_without_write_permission_is_read_by_an_unprivileged_user: \
                 cannot run as an unprivileged user here (needs root and setpriv or runuser): {other:?}"
            );
            return;
        }
    }
    for entry in std::fs::read_dir(&store).expect("list") {
        chmod(&entry.expect("entry").path(), 0o444);
    }
    chmod(&store, 0o555);
    let before = picture(&store);

    for args in [
        vec!["events", "--store", s, "--session", "a"],
        vec!["sessions", "--store", s],
        vec!["verify", "--store", s],
        vec!["stats", "--store", s],
        vec!["export", "--store", s, "--session", "a"],
        vec!["derive", "--store", s, "--session", "a"],
    ] {
        let r = as_nobody(&binary, &args).expect("ran before");
        assert_eq!(r.code, 0, "{args:?} as nobody: {r:?}");
        assert!(r.stderr.is_empty(), "{args:?} as nobody: {}", r.stderr);
    }
    let events = as_nobody(&binary, &["events", "--store", s, "--session", "a"]).expect("ran");
    assert_eq!(common::gap_free_seqs(&events.stdout), 6);

    let write = as_nobody(&binary, &["cache", "rebuild", "--store", s]).expect("ran");
    assert_eq!(write.code, 2, "{write:?}");
    assert_eq!(write.stderr.lines().count(), 1, "{write:?}");
    assert_eq!(
        picture(&store),
        before,
        "the unprivileged user changed the store"
    );
    chmod(&store, 0o755);
}
