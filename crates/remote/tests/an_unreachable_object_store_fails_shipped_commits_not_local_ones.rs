//! When the object store is down, waiting for the shipped level fails (within seconds, with
//! an error that says what to check) instead of hanging or claiming success; local commits go
//! on, and once the store is back the next ship covers them.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{fingerprint, fingerprint_of_open, small_store_options, write_turns};
use sessionlog::Store;
use sessionlog_remote::{
    restore, DirObjectStore, Error, ObjectStore, RestoreOptions, S3Config, S3ObjectStore, Shipper,
};

/// A directory object store that can be switched off.
#[derive(Debug)]
struct Switchable {
    inner: DirObjectStore,
    down: AtomicBool,
}

impl Switchable {
    fn check(&self, op: &'static str, key: &str) -> sessionlog_remote::Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::ObjectStore {
                op,
                key: key.to_owned(),
                message: "connection refused".into(),
            });
        }
        Ok(())
    }
}

impl ObjectStore for Switchable {
    fn put(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<()> {
        self.check("put", key)?;
        self.inner.put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<bool> {
        self.check("put", key)?;
        self.inner.put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> sessionlog_remote::Result<Option<Bytes>> {
        self.check("get", key)?;
        self.inner.get(key)
    }
    fn list(&self, dir: &str) -> sessionlog_remote::Result<Vec<String>> {
        self.check("list", dir)?;
        self.inner.list(dir)
    }
    fn delete(&self, key: &str) -> sessionlog_remote::Result<()> {
        self.check("delete", key)?;
        self.inner.delete(key)
    }
    fn location(&self) -> String {
        self.inner.location()
    }
}

#[test]
fn shipped_commits_fail_while_the_object_store_is_down_and_local_ones_go_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(Switchable {
        inner: DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"),
        down: AtomicBool::new(false),
    });
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    let shipper = Shipper::new(objects.clone(), 0);
    write_turns(&store, "s", 3);
    let reader = store.log_reader();
    let shipped = shipper
        .ship_through(&reader, reader.durable_lsn())
        .expect("ship");

    objects.down.store(true, Ordering::SeqCst);
    write_turns(&store, "s", 3); // local durability continues
    let reader = store.log_reader();
    let err = shipper
        .ship_through(&reader, reader.durable_lsn())
        .unwrap_err();
    assert!(matches!(err, Error::ObjectStore { .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::Environment);
    assert_eq!(
        shipper.last_manifest().expect("manifest").generation,
        shipped
    );

    objects.down.store(false, Ordering::SeqCst);
    let generation = shipper
        .ship_through(&reader, reader.durable_lsn())
        .expect("ship once it is back");
    assert_eq!(generation, shipped + 1);
    let expected = fingerprint_of_open(&store);
    store.close().expect("close");
    let target = tmp.path().join("node-b");
    restore(&objects.inner, &target, &RestoreOptions::default()).expect("restore");
    assert_eq!(fingerprint(&target), expected);
}

#[test]
fn a_ship_to_an_s3_endpoint_nobody_answers_fails_within_seconds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Port 9 (discard) on loopback: nothing listens there, connections are refused.
    let objects = Arc::new(
        S3ObjectStore::new(&S3Config {
            bucket: "nowhere".into(),
            prefix: "p".into(),
            endpoint: Some("http://127.0.0.1:9".into()),
            access_key_id: Some("k".into()),
            secret_access_key: Some("s".into()),
            ..S3Config::default()
        })
        .expect("client"),
    );
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    write_turns(&store, "s", 2);
    let started = Instant::now();
    let err = Shipper::new(objects, 0)
        .ship(&store.log_reader())
        .unwrap_err();
    assert!(matches!(err, Error::ObjectStore { .. }), "{err}");
    assert!(err.to_string().contains("check the endpoint"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    write_turns(&store, "s", 1);
    store.close().expect("close");
}
