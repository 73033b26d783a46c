//! A segment file of zero bytes (its creation torn by a crash, or emptied by hand): reads
//! leave it out and say so without touching it; an open for writing removes it, starts the
//! store anew, and says so on stderr instead of re-initialising the store silently.

mod common;

use common::{first_segment, make_store, picture, run};

#[test]
fn a_zero_length_segment_is_left_out_by_reads_and_removed_by_a_writer_with_a_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path");
    make_store(&store, "a", 4);
    let segment = first_segment(&store);
    std::fs::write(&segment, b"").expect("empty the segment");
    let before = picture(&store);

    let events = run(&["events", "--store", s, "--session", "a"], "");
    assert_eq!(events.code, 2, "{events:?}");
    assert!(events.stderr.contains("no session named"), "{events:?}");
    assert!(
        events.stderr.contains("segment 1 never got its header")
            && events.stderr.contains("nothing was removed"),
        "the left-out segment is not reported: {}",
        events.stderr
    );
    let sessions = run(&["sessions", "--store", s], "");
    assert_eq!(sessions.code, 0, "{sessions:?}");
    assert!(
        !sessions.stdout.lines().any(|l| l.starts_with("a\t")),
        "a session of the left-out segment is listed: {sessions:?}"
    );
    assert!(
        sessions.stderr.contains("segment 1 never got its header"),
        "{sessions:?}"
    );
    assert_eq!(picture(&store), before, "a read changed the store");

    let rebuild = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuild.code, 0, "{rebuild:?}");
    assert!(
        rebuild.stderr.contains("removed segment 1"),
        "the removal is not reported: {}",
        rebuild.stderr
    );
    assert_ne!(picture(&store), before);
}
