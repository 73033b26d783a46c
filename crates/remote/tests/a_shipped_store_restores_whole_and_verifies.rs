//! A store shipped to a directory-backed object store restores, on "another node" (an empty
//! directory), to the same sessions byte for byte, and verifies; later ships add only what is
//! new and remove what no kept manifest names.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{assert_verifies, fingerprint, fingerprint_of_open, small_store_options, write_turns};
use sessionlog::Store;
use sessionlog_remote::{
    newest_manifest, restore, DirObjectStore, ObjectStore, RestoreOptions, Shipper,
};

fn every_object(objects: &DirObjectStore) -> HashSet<String> {
    sessionlog_remote::SHIPPED_DIRS
        .iter()
        .flat_map(|dir| objects.list(dir).expect("list"))
        .collect()
}

#[test]
fn a_shipped_store_restores_to_the_same_sessions_and_verifies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let store = Store::open(&store_dir, small_store_options()).expect("open");
    for s in 0..4 {
        write_turns(&store, &format!("session-{s}"), 30);
    }
    let shipper = Shipper::new(objects.clone(), 0);
    let report = shipper.ship(&store.log_reader()).expect("ship");
    assert!(report.wrote_manifest);
    assert!(
        report.segments > 3,
        "small segments: several sealed ({report:?})"
    );
    let manifest = newest_manifest(&*objects)
        .expect("read")
        .expect("a manifest");
    assert!(!manifest.cache.is_empty(), "checkpoints are shipped");
    assert!(manifest.segments.iter().rev().skip(1).all(|s| s.sealed));

    let restored = tmp.path().join("node-b");
    let restore_report =
        restore(&*objects, &restored, &RestoreOptions::default()).expect("restore");
    assert_eq!(restore_report.generation, 1);
    assert_eq!(restore_report.checkpoints, manifest.cache.len());
    assert_eq!(fingerprint(&restored), fingerprint_of_open(&store));
    assert_verifies(&restored);
    store.close().expect("close");
}

#[test]
fn later_ships_add_only_what_is_new_and_forget_what_no_kept_manifest_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let store = Store::open(&store_dir, small_store_options()).expect("open");
    let shipper = Shipper::new(objects.clone(), 0);
    write_turns(&store, "a", 10);
    let first = shipper.ship(&store.log_reader()).expect("ship 1");

    // Nothing new: no manifest.
    let again = shipper.ship(&store.log_reader()).expect("ship again");
    assert!(!again.wrote_manifest);
    assert_eq!(again.generation, first.generation);

    // A little more: one tail part (and changed checkpoints), not the sealed segments again.
    write_turns(&store, "a", 1);
    let second = shipper.ship(&store.log_reader()).expect("ship 2");
    assert_eq!(second.generation, 2);
    assert!(
        second.uploaded_bytes < first.uploaded_bytes / 2,
        "{second:?} vs {first:?}"
    );

    for round in 0..6 {
        write_turns(&store, &format!("b{round}"), 3);
        shipper.ship(&store.log_reader()).expect("ship");
    }
    let newest = newest_manifest(&*objects).expect("read").expect("manifest");
    assert_eq!(newest.generation, 8);
    // Exactly the newest two manifests and what they name remain.
    let previous = shipper_previous(&objects, newest.generation - 1);
    let mut named: HashSet<String> = newest.object_keys().map(str::to_owned).collect();
    named.extend(previous.object_keys().map(str::to_owned));
    named.insert(format!("manifests/{:020}.manifest", newest.generation));
    named.insert(format!("manifests/{:020}.manifest", newest.generation - 1));
    assert_eq!(every_object(&objects), named);

    let restored = tmp.path().join("node-b");
    restore(&*objects, &restored, &RestoreOptions::default()).expect("restore");
    assert_eq!(fingerprint(&restored), fingerprint_of_open(&store));
    assert_verifies(&restored);
    store.close().expect("close");
}

fn shipper_previous(objects: &DirObjectStore, generation: u64) -> sessionlog_remote::Manifest {
    let key = format!("manifests/{generation:020}.manifest");
    let bytes = objects
        .get(&key)
        .expect("get")
        .expect("previous manifest kept");
    sessionlog_remote::Manifest::decode(&key, &bytes).expect("decode")
}

#[test]
fn a_restored_store_ships_on_from_where_the_lost_node_stopped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let node_a = tmp.path().join("node-a");
    let store = Store::open(&node_a, small_store_options()).expect("open");
    write_turns(&store, "s", 20);
    Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship");
    drop(store);
    std::fs::remove_dir_all(&node_a).expect("lose node a");

    let node_b = tmp.path().join("node-b");
    restore(&*objects, &node_b, &RestoreOptions::default()).expect("restore");
    let store = Store::open(&node_b, small_store_options()).expect("open restored");
    write_turns(&store, "s", 5);
    let report = Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship from node b");
    assert_eq!(report.generation, 2);
    let expected = fingerprint_of_open(&store);
    store.close().expect("close");

    let node_c = tmp.path().join("node-c");
    restore(&*objects, &node_c, &RestoreOptions::default()).expect("restore again");
    assert_eq!(fingerprint(&node_c), expected);
    assert_verifies(&node_c);
}

#[test]
fn restore_refuses_a_directory_that_is_not_empty_and_a_location_with_nothing_shipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = DirObjectStore::new(tmp.path().join("bucket")).expect("bucket");
    let err = restore(&objects, &tmp.path().join("x"), &RestoreOptions::default()).unwrap_err();
    assert!(
        matches!(err, sessionlog_remote::Error::NothingShipped { .. }),
        "{err}"
    );
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).expect("mkdir");
    std::fs::write(busy.join("file"), b"mine").expect("write");
    let err = restore(&objects, &busy, &RestoreOptions::default()).unwrap_err();
    assert!(
        matches!(err, sessionlog_remote::Error::TargetNotEmpty { .. }),
        "{err}"
    );
    assert_eq!(
        std::fs::read(busy.join("file")).expect("untouched"),
        b"mine"
    );
}
