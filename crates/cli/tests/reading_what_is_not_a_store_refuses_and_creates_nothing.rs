//! Commands that read refuse a path that holds no store (absent, empty, or a directory of
//! other files) with exit 2 and "not a store directory", and leave it exactly as it was: no
//! LOCK, no segment, no cache directory.

mod common;

use common::{picture, run};

#[test]
fn reading_what_is_not_a_store_refuses_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let unrelated = dir.path().join("unrelated");
    std::fs::create_dir(&unrelated).expect("mkdir");
    std::fs::write(unrelated.join("notes.txt"), b"not a store").expect("write");
    let absent = dir.path().join("absent");

    for place in [&empty, &unrelated, &absent] {
        let p = place.to_str().expect("utf-8 path");
        let before = picture(place);
        for args in [
            vec!["sessions", "--store", p],
            vec!["verify", "--store", p],
            vec!["stats", "--store", p],
            vec!["dump", "--store", p],
            vec!["events", "--store", p, "--session", "a"],
            vec!["cache", "verify", "--store", p],
            vec!["cache", "rebuild", "--store", p],
        ] {
            let r = run(&args, "");
            assert_eq!(r.code, 2, "{args:?}: {r:?}");
            assert!(
                r.stderr.contains("not a store directory"),
                "{args:?}: {}",
                r.stderr
            );
            assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
            assert_eq!(
                picture(place),
                before,
                "{args:?} changed {}",
                place.display()
            );
        }
        assert_eq!(place.exists(), place != &absent);
    }
    // A command that creates stores may create one in the empty directory, not among
    // unrelated files.
    let line = common::event_line(0) + "\n";
    let refused = run(
        &[
            "append",
            "--store",
            unrelated.to_str().expect("utf-8"),
            "--session",
            "a",
            "--create",
        ],
        &line,
    );
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("not a store directory"),
        "{refused:?}"
    );
    assert_eq!(picture(&unrelated).len(), 1);
    let created = run(
        &[
            "append",
            "--store",
            empty.to_str().expect("utf-8"),
            "--session",
            "a",
            "--create",
        ],
        &line,
    );
    assert_eq!(created.code, 0, "{created:?}");
}
