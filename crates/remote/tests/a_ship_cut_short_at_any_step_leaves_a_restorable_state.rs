//! A ship that stops at any step (the process dies, the object store goes away) never leaves a
//! manifest naming a missing or wrong object: a restore then gets the previous shipped state
//! or the new one, whole, and the next ship cleans up. Damaged objects are refused, not
//! restored.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use common::{
    assert_verifies, copy_tree, fingerprint, fingerprint_of_open, small_store_options, write_turns,
};
use sessionlog::Store;
use sessionlog_remote::{restore, DirObjectStore, Error, ObjectStore, RestoreOptions, Shipper};

/// A directory object store where every operation from the `crash_at`-th on fails, as if the
/// shipping process had died there. With `lands`, the operation at the crash point is carried
/// out before it fails (the request reached the store, the answer never came back).
#[derive(Debug)]
struct CrashingStore {
    inner: DirObjectStore,
    remaining: AtomicI64,
    lands: bool,
}

impl CrashingStore {
    fn step<T>(
        &self,
        op: &'static str,
        key: &str,
        run: impl FnOnce() -> sessionlog_remote::Result<T>,
    ) -> sessionlog_remote::Result<T> {
        let left = self.remaining.fetch_sub(1, Ordering::SeqCst);
        if left > 0 {
            return run();
        }
        if left == 0 && self.lands {
            let _ = run();
        }
        Err(Error::ObjectStore {
            op,
            key: key.to_owned(),
            message: "simulated crash".into(),
        })
    }
}

impl ObjectStore for CrashingStore {
    fn put(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<()> {
        self.step("put", key, || self.inner.put(key, bytes))
    }
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<bool> {
        self.step("put", key, || self.inner.put_if_absent(key, bytes))
    }
    fn get(&self, key: &str) -> sessionlog_remote::Result<Option<Bytes>> {
        self.step("get", key, || self.inner.get(key))
    }
    fn list(&self, dir: &str) -> sessionlog_remote::Result<Vec<String>> {
        self.step("list", dir, || self.inner.list(dir))
    }
    fn delete(&self, key: &str) -> sessionlog_remote::Result<()> {
        self.step("delete", key, || self.inner.delete(key))
    }
    fn location(&self) -> String {
        self.inner.location()
    }
}

fn restore_fingerprint(bucket: &Path, target: &Path) -> BTreeMap<String, Vec<u8>> {
    let objects = DirObjectStore::new(bucket).expect("bucket");
    restore(&objects, target, &RestoreOptions::default()).expect("restore after a cut ship");
    assert_verifies(target);
    fingerprint(target)
}

#[test]
fn a_ship_cut_short_at_any_step_restores_the_previous_or_the_new_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let shipped_once = tmp.path().join("bucket-after-first-ship");
    let store = Store::open(&store_dir, small_store_options()).expect("open");
    write_turns(&store, "a", 8);
    write_turns(&store, "b", 8);
    let first = Arc::new(DirObjectStore::new(&shipped_once).expect("bucket"));
    Shipper::new(first, 0)
        .ship(&store.log_reader())
        .expect("first ship");
    let state_1 = restore_fingerprint(&shipped_once, &tmp.path().join("state-1"));
    // Two ships later the first one's objects are candidates for deletion too.
    write_turns(&store, "a", 6);
    write_turns(&store, "c", 10);
    let state_2: BTreeMap<_, _> = fingerprint_of_open(&store);
    assert_ne!(state_1, state_2);

    let mut outcomes = [0usize; 2];
    for lands in [false, true] {
        for crash_at in 0.. {
            let bucket = tmp.path().join(format!("bucket-{lands}-{crash_at}"));
            copy_tree(&shipped_once, &bucket);
            let crashing = Arc::new(CrashingStore {
                inner: DirObjectStore::new(&bucket).expect("bucket"),
                remaining: AtomicI64::new(crash_at),
                lands,
            });
            let shipped = Shipper::new(crashing, 0).ship(&store.log_reader()).is_ok();
            let restored =
                restore_fingerprint(&bucket, &tmp.path().join(format!("r-{lands}-{crash_at}")));
            if restored == state_1 {
                outcomes[0] += 1;
                assert!(!shipped, "an acknowledged ship must restore its own state");
            } else {
                assert_eq!(
                    restored, state_2,
                    "crash at step {crash_at} (lands: {lands})"
                );
                outcomes[1] += 1;
            }
            // The next ship, by a fresh process, cleans up and ships the new state.
            let objects = Arc::new(DirObjectStore::new(&bucket).expect("bucket"));
            Shipper::new(objects, 0)
                .ship(&store.log_reader())
                .expect("ship after the crash");
            let again = tmp.path().join(format!("again-{lands}-{crash_at}"));
            assert_eq!(restore_fingerprint(&bucket, &again), state_2);
            for dir in [
                &bucket,
                &again,
                &tmp.path().join(format!("r-{lands}-{crash_at}")),
            ] {
                std::fs::remove_dir_all(dir).expect("clean up");
            }
            if shipped {
                break;
            }
        }
    }
    assert!(
        outcomes[0] >= 4,
        "crashes before the manifest: {outcomes:?}"
    );
    assert!(outcomes[1] >= 2, "crashes after the manifest: {outcomes:?}");
    store.close().expect("close");
}

#[test]
fn a_damaged_object_is_refused_and_nothing_is_restored() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    write_turns(&store, "a", 60);
    let bucket = tmp.path().join("bucket");
    let objects = Arc::new(DirObjectStore::new(&bucket).expect("bucket"));
    Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship");
    store.close().expect("close");
    let key = objects
        .list("segments")
        .expect("list")
        .into_iter()
        .next()
        .expect("a segment");
    let mut bytes = objects.get(&key).expect("get").expect("object").to_vec();
    bytes[100] ^= 0x40;
    objects.put(&key, Bytes::from(bytes)).expect("damage it");

    let target = tmp.path().join("node-b");
    let err = restore(&*objects, &target, &RestoreOptions::default()).unwrap_err();
    assert!(matches!(err, Error::ObjectMismatch { .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::Damaged);
    assert!(!target.exists(), "no partial store under the target's name");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("list")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains("restoring"))
        .collect();
    assert!(leftovers.is_empty(), "staging removed: {leftovers:?}");
}
