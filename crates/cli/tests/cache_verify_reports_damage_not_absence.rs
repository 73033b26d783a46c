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

    // The session's projections are kept by its writer; the store-wide one is not read yet.
    let fresh = run(&["cache", "verify", "--store", s], "");
    assert_eq!(fresh.code, 0, "{fresh:?}");
    assert!(
        fresh
            .stdout
            .starts_with("a: no cache (the next view writes one)\n"),
        "{fresh:?}"
    );
    assert!(
        fresh
            .stdout
            .ends_with("(store): projection totals: no checkpoint (the next read writes one)\n"),
        "{fresh:?}"
    );

    let rebuilt = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuilt.code, 0, "{rebuilt:?}");
    let good = run(&["cache", "verify", "--store", s], "");
    assert_eq!(good.code, 0, "{good:?}");
    assert_eq!(
        good.stdout,
        "a: ok\n\
         a: projection stats: ok\n\
         a: projection tool-audit: ok\n\
         a: projection transcript: ok\n\
         (store): projection totals: ok\n"
    );

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

#[test]
fn a_damaged_projection_checkpoint_is_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s");
    make_store(&store, "a", 6);
    let s = store.to_str().expect("utf-8 path");
    let rebuilt = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuilt.code, 0, "{rebuilt:?}");
    for (file, line) in [
        ("store.totals.slpw", "(store): projection totals: corrupt"),
        (
            "00000000000000000001.stats.slpv",
            "a: projection stats: corrupt",
        ),
    ] {
        let path = store.join("cache").join(file);
        let mut bytes = std::fs::read(&path).expect("checkpoint");
        bytes[10] ^= 0x01;
        std::fs::write(&path, &bytes).expect("flip a bit of the checkpoint");
        let bad = run(&["cache", "verify", "--store", s], "");
        assert_eq!(bad.code, 1, "{bad:?}");
        assert!(bad.stdout.contains(line), "{line}: {bad:?}");
        assert!(bad.stdout.starts_with("a: ok\n"), "{bad:?}");
        let rebuilt = run(&["cache", "rebuild", "--store", s], "");
        assert_eq!(rebuilt.code, 0, "{rebuilt:?}");
        assert_eq!(run(&["cache", "verify", "--store", s], "").code, 0);
    }
}
