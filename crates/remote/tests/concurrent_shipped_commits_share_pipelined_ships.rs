//! Many writers committing at the shipped level at once, against an object store slow enough
//! that one ship uploads while the one before writes its manifest: they share ships (fewer
//! manifests than commits), every acknowledged commit is in the restore, the manifests form
//! one run of generations, and the bucket holds nothing but what the two newest manifests
//! name.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{assert_verifies, small_store_options, write_turns};
use sessionlog::{Store, StoreOptions};
use sessionlog_remote::{
    newest_manifest, restore, DirObjectStore, ObjectStore, RestoreOptions, Result, Shipper,
};

/// A directory object store whose writes take a few milliseconds more, like a remote one.
#[derive(Debug)]
struct Slow(DirObjectStore);

impl ObjectStore for Slow {
    fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        std::thread::sleep(Duration::from_millis(3));
        self.0.put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool> {
        std::thread::sleep(Duration::from_millis(3));
        self.0.put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        self.0.get(key)
    }
    fn list(&self, dir: &str) -> Result<Vec<String>> {
        self.0.list(dir)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.0.delete(key)
    }
    fn location(&self) -> String {
        self.0.location()
    }
}

const WRITERS: usize = 8;
const COMMITS: usize = 12;

#[test]
fn concurrent_shipped_commits_share_pipelined_ships_and_all_restore() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bucket = tmp.path().join("bucket");
    let objects = Arc::new(Slow(DirObjectStore::new(&bucket).expect("bucket")));
    let store = Store::open(tmp.path().join("node"), small_store_options()).expect("open");
    let shipper = Arc::new(Shipper::new(objects.clone(), 0));
    let acked: BTreeMap<String, Vec<u8>> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (store, shipper) = (&store, &shipper);
                scope.spawn(move || {
                    let name = format!("s{w}");
                    for _ in 0..COMMITS {
                        shipper
                            .commit(store, || -> sessionlog::Result<()> {
                                write_turns(store, &name, 1);
                                Ok(())
                            })
                            .expect("shipped commit");
                    }
                    let export = store.export_dsh(&name).expect("export");
                    (name, export)
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect()
    });
    let newest = newest_manifest(&*objects)
        .expect("read")
        .expect("a manifest");
    assert!(
        newest.generation < (WRITERS * COMMITS) as u64,
        "{} manifests for {} commits: ships were not shared",
        newest.generation,
        WRITERS * COMMITS
    );
    // Nothing but the two newest manifests and what they name.
    let previous = sessionlog_remote::Manifest::decode(
        "previous",
        &objects
            .get(&format!("manifests/{:020}.manifest", newest.generation - 1))
            .expect("get")
            .expect("the manifest before the newest is kept"),
    )
    .expect("decode");
    let named: HashSet<String> = [&newest, &previous]
        .into_iter()
        .flat_map(|m| m.object_keys().map(str::to_owned))
        .chain(
            [newest.generation, previous.generation].map(|g| format!("manifests/{g:020}.manifest")),
        )
        .collect();
    let mut stored = HashSet::new();
    for dir in sessionlog_remote::SHIPPED_DIRS {
        stored.extend(objects.list(dir).expect("list"));
    }
    assert_eq!(
        stored, named,
        "the bucket holds exactly what the kept manifests name"
    );

    let restored = tmp.path().join("restored");
    restore(&*objects, &restored, &RestoreOptions::default()).expect("restore");
    assert_verifies(&restored);
    let restored = Store::open_read_only(&restored, StoreOptions::default()).expect("open");
    for (name, export) in &acked {
        assert_eq!(
            &restored.export_dsh(name).expect("export"),
            export,
            "{name}: every acknowledged commit is restored"
        );
    }
    store.close().expect("close");
}
