//! `cache verify` exits 1 only for a cache that cannot be used (damage of a disposable file);
//! a session that has no cache yet is reported as such, with exit 0.

mod common;

use common::{make_store, run};

#[test]
fn a_missing_cache_is_not_damage_and_a_corrupt_one_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    make_store(&store, "a", 6);
    let s = store.to_str().expect("utf-8 path");

    let fresh = run(&["cache", "verify", "--store", s], "");
    assert_eq!(fresh.code, 0, "{fresh:?}");
    assert_eq!(fresh.stdout, "a: no cache (the next view writes one)\n");

    let rebuilt = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuilt.code, 0, "{rebuilt:?}");
    let good = run(&["cache", "verify", "--store", s], "");
    assert_eq!(good.code, 0, "{good:?}");
    assert_eq!(good.stdout, "a: ok\n");

    let files: Vec<_> = std::fs::read_dir(store.join("cache"))
        .expect("the rebuild wrote cache/")
        .map(|e| e.expect("entry").path())
        // The session's checkpoint; its projections' files (`.slpv`) sit beside it.
        .filter(|p| p.extension().is_some_and(|x| x == "slpc"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut bytes = std::fs::read(&files[0]).expect("cache file");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&files[0], &bytes).expect("flip a bit of the cache");
    let bad = run(&["cache", "verify", "--store", s], "");
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(bad.stdout.starts_with("a: corrupt"), "{bad:?}");
}
