//! Two writers cannot both extend one shipped history: a writer whose next manifest
//! generation was taken by another stops with `Fenced`, and a location holding another
//! store's history is refused.

mod common;

use std::sync::Arc;

use common::{fingerprint, fingerprint_of_open, small_store_options, write_turns};
use sessionlog::Store;
use sessionlog_remote::{restore, DirObjectStore, Error, RestoreOptions, Shipper};

#[test]
fn a_stale_writer_cannot_ship_over_the_new_owners_history() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let old_dir = tmp.path().join("old-owner");
    let old = Store::open(&old_dir, small_store_options()).expect("open");
    write_turns(&old, "s", 6);
    let old_shipper = Shipper::new(objects.clone(), 1);
    old_shipper.ship(&old.log_reader()).expect("ship");

    // The new owner restores and ships on (generation 2).
    let new_dir = tmp.path().join("new-owner");
    restore(&*objects, &new_dir, &RestoreOptions::default()).expect("restore");
    let new = Store::open(&new_dir, small_store_options()).expect("open restored");
    write_turns(&new, "s", 2);
    Shipper::new(objects.clone(), 2)
        .ship(&new.log_reader())
        .expect("new owner ships");
    let expected = fingerprint_of_open(&new);
    new.close().expect("close");

    // The old owner, unaware, commits and tries to ship generation 2 as well.
    write_turns(&old, "s", 3);
    let err = old_shipper.ship(&old.log_reader()).unwrap_err();
    assert!(matches!(err, Error::Fenced { generation: 2, .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::Refused);
    old.close().expect("close");

    let check = tmp.path().join("check");
    restore(&*objects, &check, &RestoreOptions::default()).expect("restore");
    assert_eq!(
        fingerprint(&check),
        expected,
        "the new owner's history stands"
    );
}

#[test]
fn a_location_holding_another_stores_history_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let one = Store::open(tmp.path().join("one"), small_store_options()).expect("open");
    write_turns(&one, "s", 2);
    Shipper::new(objects.clone(), 0)
        .ship(&one.log_reader())
        .expect("ship");
    let two = Store::open(tmp.path().join("two"), small_store_options()).expect("open");
    write_turns(&two, "t", 2);
    let err = Shipper::new(objects.clone(), 0)
        .ship(&two.log_reader())
        .unwrap_err();
    assert!(matches!(err, Error::ForeignStore { .. }), "{err}");
    one.close().expect("close");
    two.close().expect("close");
}
