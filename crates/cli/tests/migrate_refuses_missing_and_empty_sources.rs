//! `migrate` never creates its source: a source that does not exist is refused with exit 2,
//! and nothing appears at the source or the destination. A source without sessions is
//! refused with exit 3 unless `--allow-empty`. A source session that cannot be read (a
//! damaged compressed file among them) fails the migration before the destination is created.

use std::path::Path;
use std::process::{Command, Output};

fn migrate(from: &str, to: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessionlog"))
        .args(["migrate", "--from", from, "--to", to])
        .args(extra)
        .output()
        .expect("run sessionlog")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_source_is_refused_and_nothing_is_created() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dest = temp.path().join("dest");
    for kind in ["sqlite", "dsh", "store"] {
        let source = temp.path().join(format!("no-such-{kind}"));
        for to in [
            format!("store:{}", dest.display()),
            format!("sqlite:{}", dest.display()),
            format!("dsh:{}", dest.display()),
        ] {
            let out = migrate(&format!("{kind}:{}", source.display()), &to, &[]);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{kind} -> {to}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains("does not exist; nothing was created or copied"),
                "{}",
                stderr(&out)
            );
            assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
            assert!(!source.exists(), "the source {kind} was created");
            assert!(
                !dest.exists(),
                "the destination was created for {kind} -> {to}"
            );
        }
    }
}

fn assert_empty_source_refused_then_allowed(from: &str, source: &Path, dest: &Path) {
    let to = format!("store:{}", dest.display());
    let out = migrate(from, &to, &[]);
    assert_eq!(out.status.code(), Some(3), "{from}: {}", stderr(&out));
    assert!(stderr(&out).contains("--allow-empty"), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("found 0 sessions in "),
        "{from}"
    );
    assert!(
        !dest.exists(),
        "a refused migration created its destination"
    );
    assert!(
        std::fs::read_dir(source).map_or(true, |mut d| d.next().is_none()),
        "the empty source {from} was written to"
    );
    let out = migrate(from, &to, &["--allow-empty"]);
    assert_eq!(out.status.code(), Some(0), "{from}: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrated 0 sessions, 0 events"));
    std::fs::remove_dir_all(dest).expect("remove destination");
}

#[test]
fn an_empty_source_is_refused_unless_allowed() {
    let temp = tempfile::tempdir().expect("tempdir");
    let empty = temp.path().join("empty");
    std::fs::create_dir(&empty).expect("dir");
    let dest = temp.path().join("dest");
    for kind in ["dsh", "store"] {
        let from = format!("{kind}:{}", empty.display());
        assert_empty_source_refused_then_allowed(&from, &empty, &dest);
    }
    // A DSH home whose sessions/ holds an empty project.
    let home = temp.path().join("home");
    std::fs::create_dir_all(home.join("sessions/--work--")).expect("dirs");
    let from = format!("dsh:{}", home.display());
    assert_empty_source_refused_then_allowed(&from, &home.join("sessions/--work--"), &dest);
}

#[test]
fn a_session_the_source_cannot_read_fails_before_the_destination_exists() {
    let temp = tempfile::tempdir().expect("tempdir");
    let project = temp.path().join("project");
    for (dir, body) in [
        (
            "a-good",
            concat!(
                r#"{"type":"session","version":0,"id":"a-good","createdAt":1,"delegationDepth":0}"#,
                "\n"
            ),
        ),
        (
            "b-bad",
            concat!(
                r#"{"type":"session","version":0,"id":"b-bad","createdAt":1,"delegationDepth":0}"#,
                "\n",
                r#"{"type":"no/such-type","seq":0,"time":1,"data":{}}"#,
                "\n"
            ),
        ),
    ] {
        std::fs::create_dir_all(project.join(dir)).expect("dir");
        std::fs::write(project.join(dir).join("session.jsonl"), body).expect("log");
    }
    let dest = temp.path().join("dest");
    let out = migrate(
        &format!("dsh:{}", project.display()),
        &format!("store:{}", dest.display()),
        &[],
    );
    assert_ne!(out.status.code(), Some(0), "a bad session was migrated");
    assert!(stderr(&out).contains("b-bad"), "{}", stderr(&out));
    assert!(
        !dest.exists(),
        "the destination was created before the refusal"
    );
}

#[test]
fn a_damaged_compressed_dsh_session_is_refused_not_left_behind() {
    let temp = tempfile::tempdir().expect("tempdir");
    let project = temp.path().join("home/sessions/--work--");
    let plain = project.join("a-plain");
    std::fs::create_dir_all(&plain).expect("dir");
    std::fs::write(
        plain.join("session.jsonl"),
        concat!(
            r#"{"type":"session","version":0,"id":"a-plain","createdAt":1,"delegationDepth":0}"#,
            "\n"
        ),
    )
    .expect("log");
    let packed = project.join("b-packed");
    std::fs::create_dir_all(&packed).expect("dir");
    // A zstd magic number and nothing after it: not even the header frame is whole.
    std::fs::write(packed.join("session.jsonl.zstd"), b"\x28\xb5\x2f\xfd").expect("log");
    let dest = temp.path().join("dest");
    let out = migrate(
        &format!("dsh:{}", temp.path().join("home").display()),
        &format!("store:{}", dest.display()),
        &[],
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("zstd"), "{said}");
    assert!(said.contains("b-packed"), "{said}");
    assert!(!dest.exists(), "the destination was created");
}
