//! A projection's appended parts (the transcript's row text, settled rows and tool names)
//! live in files a writer extends rather than rewrites: what a checkpoint covered never
//! changes on disk, a reader beside the writer reads exactly the prefix its checkpoint
//! names, a new writer starts a generation of its own and the one before stays until the
//! next, damage to a part is reported and rebuilt, and deleting the session removes them.
//! spec: format-spec/cache.md#appended-parts

mod projecting;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use projecting::append_turn;
use sessionlog::projection::Transcript;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{CacheCheck, CacheUse, Store, StoreOptions};

fn opts() -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog_testkit::small_segments())
        .with_cache_refresh_events(32)
        .with_projection(Transcript)
}

/// The part files of the store, by name, with their bytes.
fn parts(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let cache = dir.join("cache");
    let Ok(entries) = std::fs::read_dir(&cache) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slpa"))
        .map(|p: PathBuf| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read part"))
        })
        .collect()
}

/// The generations that have part files.
fn generations(dir: &Path) -> Vec<String> {
    let mut g: Vec<String> = parts(dir)
        .keys()
        .filter_map(|n| n.split('.').nth(2).map(str::to_owned))
        .collect();
    g.dedup();
    g
}

/// The transcript written out, as `show` prints it.
fn shown(store: &Store, name: &str) -> (String, CacheUse) {
    let p = store
        .projection::<Transcript>(Transcript::NAME, name)
        .expect("transcript");
    let mut out = Vec::new();
    p.state.write(name, &mut out).expect("write");
    (String::from_utf8(out).expect("utf-8"), p.cache)
}

fn full(dir: &Path, name: &str) -> String {
    let store =
        Store::open_read_only(dir, opts().with_projection_cache(false)).expect("fresh store");
    shown(&store, name).0
}

#[test]
fn a_writer_extends_its_parts_and_readers_read_the_prefix_they_were_promised() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let mut h = projecting::create(&store, "s");
    let mut w = Workload::new(
        5,
        WorkloadConfig::default().with_compact_every_turns(Some(4)),
    );
    let mut seen: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut checked = 0;
    for turn in 0..40 {
        append_turn(&mut h, &mut w);
        h.commit().expect("commit");
        let now = parts(dir.path());
        // What the writer wrote before is never rewritten: each file only grows.
        for (name, before) in &seen {
            if let Some(after) = now.get(name) {
                assert!(after.starts_with(before), "turn {turn}: {name} changed");
                checked += 1;
            }
        }
        seen = now;
        // A reader beside the writer (another store, read-only) uses the checkpoint and
        // sees what a fold of the whole log shows.
        let reader = Store::open_read_only(dir.path(), opts()).expect("reader");
        let (text, cache) = shown(&reader, "s");
        assert!(
            matches!(cache, CacheUse::Hit { .. }),
            "turn {turn}: {cache:?}"
        );
        assert_eq!(text, full(dir.path(), "s"), "turn {turn}");
    }
    assert!(checked > 50, "only {checked} files compared");
    // One writer, one generation.
    assert_eq!(generations(dir.path()).len(), 1);
    drop(h);
    // A second writer starts its own; the first stays for readers of the checkpoint it
    // replaced. A third removes the first.
    let first = generations(dir.path());
    for writer in 2..=3 {
        let (mut h, _) = store.open_session("s").expect("open");
        for _ in 0..12 {
            append_turn(&mut h, &mut w);
            h.commit().expect("commit");
        }
        drop(h);
        let now = generations(dir.path());
        assert_eq!(now.len(), 2, "writer {writer}: {now:?}");
        assert_eq!(
            now.contains(&first[0]),
            writer == 2,
            "writer {writer}: {now:?} against the first {first:?}"
        );
        assert_eq!(shown(&store, "s").0, full(dir.path(), "s"));
    }
    // Deleting the session removes every part.
    store.delete_session("s").expect("delete");
    assert!(
        parts(dir.path()).is_empty(),
        "{:?}",
        parts(dir.path()).keys()
    );
}

#[test]
fn a_damaged_or_missing_part_is_reported_and_rebuilt() {
    for damage in ["flip", "truncate", "remove"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts()).expect("store");
        let mut h = projecting::create(&store, "s");
        let mut w = Workload::new(9, WorkloadConfig::default());
        for _ in 0..12 {
            append_turn(&mut h, &mut w);
            h.commit().expect("commit");
        }
        drop(h);
        drop(store);
        let (name, bytes) = parts(dir.path())
            .into_iter()
            .max_by_key(|(_, b)| b.len())
            .expect("a part");
        let path = dir.path().join("cache").join(&name);
        match damage {
            "flip" => {
                let mut bytes = bytes;
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x40;
                std::fs::write(&path, bytes).expect("flip");
            }
            "truncate" => std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate"),
            _ => std::fs::remove_file(&path).expect("remove"),
        }
        let store = Store::open(dir.path(), opts()).expect("reopen");
        let damaged = store
            .cache_verify_projections()
            .expect("verify")
            .into_iter()
            .find(|c| c.projection == Transcript::NAME)
            .expect("the transcript's check");
        assert!(
            matches!(damaged.check, CacheCheck::Unusable(_)),
            "{damage}: {:?}",
            damaged.check
        );
        let (text, cache) = shown(&store, "s");
        assert!(matches!(cache, CacheUse::Rebuilt(_)), "{damage}: {cache:?}");
        assert_eq!(text, full(dir.path(), "s"), "{damage}");
        // The rebuild wrote a checkpoint that the next read uses whole.
        let (again, cache) = shown(&store, "s");
        assert_eq!(cache, CacheUse::Hit { folded: 0 }, "{damage}");
        assert_eq!(again, text);
    }
}
