//! The projection cache is disposable: with it deleted, corrupted, truncated, stale or taken
//! from another session, a view equals a fresh fold of the log (and the full `Session` fold),
//! and a usable cache is actually used.

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use sessionlog::{CacheUse, Store, StoreOptions};

/// Accepted fixture logs (their goldens have no error), the largest first; `None` when the
/// DSH corpus is absent (every test here is then skipped, said once).
fn fixtures() -> Option<&'static Vec<Vec<u8>>> {
    static F: OnceLock<Option<Vec<Vec<u8>>>> = OnceLock::new();
    F.get_or_init(|| {
        let root =
            sessionlog_testkit::dsh_corpus("crates/sessionlog/tests/cache_is_disposable.rs")?;
        let mut out = Vec::new();
        let mut stack = vec![root.join("logs")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).expect("fixtures") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    let rel = p.strip_prefix(root.join("logs")).expect("rel");
                    let golden: serde_json::Value = serde_json::from_slice(
                        &std::fs::read(
                            root.join("golden")
                                .join(format!("{}.golden.json", rel.display())),
                        )
                        .expect("golden"),
                    )
                    .expect("json");
                    if golden["error"].is_null()
                        && !golden["tailDiscarded"].as_bool().unwrap_or(false)
                    {
                        out.push(std::fs::read(&p).expect("fixture"));
                    }
                }
            }
        }
        out.sort_by_key(|b| std::cmp::Reverse(b.len()));
        assert!(
            out.len() > 50,
            "the DSH corpus under {} holds only {} accepted logs",
            root.display(),
            out.len()
        );
        Some(out)
    })
    .as_ref()
}

fn opts(cache: bool) -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog_testkit::small_segments())
        .with_projection_cache(cache)
        .with_cache_refresh_events(8)
}

fn cache_file(dir: &Path) -> PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("cache"))
        .expect("cache dir")
        .map(|e| e.expect("e").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slpc"))
        .collect();
    files.sort();
    files.pop().expect("a cache file")
}

/// The view and the reference: a fold without cache and the full validating `Session` fold.
fn assert_equal_to_fresh_folds(store: &Store, dir: &Path, name: &str) -> CacheUse {
    let view = store.view(name).expect("view");
    let session = support::whole_session(store, name);
    assert_eq!(view.surface.nodes(), &session.surface()[..], "surface");
    assert_eq!(
        view.surface.derive_messages_json(),
        session.derive_messages_json(),
        "messages"
    );
    assert_eq!(
        view.surface.replace_generation(),
        session.replace_generation()
    );
    assert_eq!(view.events, session.next_seq().get());
    let _ = dir;
    view.cache
}

#[derive(Debug, Clone)]
enum Damage {
    Delete,
    FlipByte(prop::sample::Index, u8),
    Truncate(prop::sample::Index),
    Stale,
    Foreign,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Delete),
        (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, x)| Damage::FlipByte(i, x)),
        any::<prop::sample::Index>().prop_map(Damage::Truncate),
        Just(Damage::Stale),
        Just(Damage::Foreign),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_cache_gives_the_same_view_as_a_fresh_fold(which in any::<prop::sample::Index>(), d in damage()) {
        let Some(all) = fixtures() else { return Ok(()) };
        let file = &all[which.index(all.len().min(24))];
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts(true)).expect("store");
        store.import_dsh(file, Some("s")).expect("import");
        store.import_dsh(all.last().expect("another"), Some("t")).expect("import other");
        // First view builds the cache; the second must use it.
        let first = assert_equal_to_fresh_folds(&store, dir.path(), "s");
        prop_assert!(matches!(first, CacheUse::Rebuilt(_)), "first view: {:?}", first);
        prop_assert_eq!(assert_equal_to_fresh_folds(&store, dir.path(), "s"), CacheUse::Hit { folded: 0 });
        let t_view = store.view("t").expect("t");
        prop_assert!(matches!(t_view.cache, CacheUse::Rebuilt(_)));
        let s_cache = std::fs::read_dir(dir.path().join("cache")).expect("dir").map(|e| e.expect("e").path()).min().expect("s cache");
        let t_cache = cache_file(dir.path());
        prop_assert_ne!(&s_cache, &t_cache);
        match &d {
            Damage::Delete => std::fs::remove_file(&s_cache).expect("rm"),
            Damage::FlipByte(i, x) => {
                let mut b = std::fs::read(&s_cache).expect("read");
                let at = i.index(b.len());
                b[at] ^= x;
                std::fs::write(&s_cache, b).expect("write");
            }
            Damage::Truncate(i) => {
                let b = std::fs::read(&s_cache).expect("read");
                std::fs::write(&s_cache, &b[..i.index(b.len())]).expect("write");
            }
            Damage::Stale => {
                // More events after the cache was written: a restart repair, or a turn.
                let (mut h, closers) = store.open_session("s").expect("open");
                if closers.is_empty() {
                    let e = sessionlog::session::EventInput::new("session/title", 1, r#"{"title":"x"}"#);
                    h.append(e).expect("append");
                }
                h.commit().expect("commit");
            }
            Damage::Foreign => std::fs::copy(&t_cache, &s_cache).map(|_| ()).expect("copy"),
        }
        let used = assert_equal_to_fresh_folds(&store, dir.path(), "s");
        match d {
            Damage::Stale => prop_assert!(matches!(used, CacheUse::Hit { folded } if folded > 0), "{:?}", used),
            _ => prop_assert!(matches!(used, CacheUse::Rebuilt(_)), "damaged cache used: {:?}", used),
        }
        // And the rebuilt cache is used again.
        let again = assert_equal_to_fresh_folds(&store, dir.path(), "s");
        prop_assert!(matches!(again, CacheUse::Hit { .. }), "rebuilt cache not used: {:?}", again);
    }
}

#[test]
fn a_cache_survives_reopening_the_store_and_a_log_cut_under_it_forces_a_rebuild() {
    let Some(all) = fixtures() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = &all[0];
    {
        let store = Store::open(dir.path(), opts(true)).expect("store");
        store.import_dsh(file, Some("s")).expect("import");
        assert!(matches!(
            store.view("s").expect("view").cache,
            CacheUse::Rebuilt(_)
        ));
        store.close().expect("close");
    }
    let store = Store::open(dir.path(), opts(true)).expect("reopen");
    assert_eq!(
        store.view("s").expect("view").cache,
        CacheUse::Hit { folded: 0 }
    );
    assert!(store
        .cache_verify()
        .expect("verify")
        .iter()
        .all(|(_, v)| *v == sessionlog::CacheCheck::Ok));
    // The session is deleted and recreated under the same name: the old cache must not apply.
    store.delete_session("s").expect("delete");
    store.import_dsh(&all[1], Some("s")).expect("import again");
    assert!(matches!(
        assert_equal_to_fresh_folds(&store, dir.path(), "s"),
        CacheUse::Rebuilt(_)
    ));
}
