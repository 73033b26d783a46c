//! One flipped bit in a batch that later batches vouch for (they were written after it was
//! synced): that is damage to acknowledged data, not a torn tail. Reading commands refuse
//! with exit 1 (damage) and change no byte; an open for writing refuses too and cuts nothing.

mod common;

use common::{first_segment, make_store, picture, run};

#[test]
fn a_bit_flip_in_acknowledged_data_is_refused_by_reads_and_writers_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path");
    make_store(&store, "a", 12);
    let segment = first_segment(&store);
    let mut bytes = std::fs::read(&segment).expect("segment");
    // Inside the payload of the session's first event record (found by its bytes, so the
    // flip lands in record data whatever the batch layout before it).
    let at = bytes
        .windows(b"turn/start".len())
        .position(|w| w == b"turn/start")
        .expect("the first event's payload");
    bytes[at + 2] ^= 0x10;
    std::fs::write(&segment, &bytes).expect("flip a bit");
    let before = picture(&store);

    for args in [
        vec!["events", "--store", s, "--session", "a"],
        vec!["sessions", "--store", s],
        vec!["stats", "--store", s],
    ] {
        let r = run(&args, "");
        assert_eq!(r.code, 1, "damage exits 1: {args:?}: {r:?}");
        assert!(
            r.stderr.contains("corruption in segment 1"),
            "{args:?}: {r:?}"
        );
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {r:?}");
    }
    let verify = run(&["verify", "--store", s], "");
    assert_eq!(verify.code, 1, "{verify:?}");
    assert!(verify.stdout.contains("DAMAGE segment 1"), "{verify:?}");
    assert_eq!(picture(&store), before, "a read changed the store");

    let rebuild = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuild.code, 1, "damage exits 1: {rebuild:?}");
    assert!(
        rebuild.stderr.contains("corruption in segment 1"),
        "{rebuild:?}"
    );
    assert_eq!(picture(&store), before, "a refused open changed the store");
}
