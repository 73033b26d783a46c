//! A segment cut short (as by a crash in the middle of a write): every reading command
//! reads the valid prefix, says on stderr what it left out, and changes no byte of the
//! store; the first command that opens the store for writing cuts the torn tail and says
//! so; afterwards the store verifies intact.

mod common;

use common::{first_segment, gap_free_seqs, make_store, picture, run};

#[test]
fn a_truncated_segment_is_read_up_to_the_damage_and_cut_only_by_a_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path");
    make_store(&store, "a", 12);
    // Keep the header and the first few batches, tear the next one.
    let segment = first_segment(&store);
    let len = std::fs::metadata(&segment).expect("segment").len();
    assert!(len > 2000);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .and_then(|f| f.set_len(2000))
        .expect("truncate");
    let before = picture(&store);

    let events = run(&["events", "--store", s, "--session", "a"], "");
    assert_eq!(events.code, 0, "{events:?}");
    let n = gap_free_seqs(&events.stdout);
    assert!(n > 0 && n < 12, "expected a strict prefix, got {n} events");
    assert!(
        events.stderr.contains("did not read a torn tail")
            && events.stderr.contains("nothing was cut"),
        "the skipped tail is not reported: {}",
        events.stderr
    );
    for args in [
        vec!["sessions", "--store", s],
        vec!["stats", "--store", s],
        vec!["export", "--store", s, "--session", "a"],
        vec!["surface", "--store", s, "--session", "a"],
        vec!["log", "read", "--store", s, "--stream", "a"],
        vec!["cache", "verify", "--store", s],
    ] {
        let r = run(&args, "");
        assert!(
            r.stderr.contains("did not read a torn tail"),
            "{args:?} does not report the tail: {r:?}"
        );
    }
    let verify = run(&["verify", "--store", s], "");
    assert_eq!(verify.code, 1, "{verify:?}");
    assert!(verify.stdout.contains("DAMAGE segment 1"), "{verify:?}");
    assert_eq!(picture(&store), before, "a read changed the store");

    // An open for writing cuts the tail, and says so.
    let rebuild = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuild.code, 0, "{rebuild:?}");
    assert!(
        rebuild.stderr.contains("cut a torn tail") && rebuild.stderr.contains("segment 1"),
        "the cut is not reported: {}",
        rebuild.stderr
    );
    let verify = run(&["verify", "--store", s], "");
    assert_eq!(verify.code, 0, "{verify:?}");
    let after = run(&["events", "--store", s, "--session", "a"], "");
    assert_eq!(
        gap_free_seqs(&after.stdout),
        n,
        "the cut changed the prefix"
    );
    assert!(after.stderr.is_empty(), "{}", after.stderr);
}
