//! Two writers cannot both extend one shipped history: a writer whose next manifest
//! generation was taken by another stops with `Fenced`, and a location holding another
//! store's history is refused.

mod common;

use std::sync::Arc;

use common::{
    fingerprint, small_store_options, stale_writer_ships_after_a_new_one, write_turns, StaleShip,
};
use sessionlog::Store;
use sessionlog_remote::{restore, DirObjectStore, Error, ObjectStore, RestoreOptions, Shipper};

#[test]
fn a_stale_writer_cannot_ship_over_the_new_owners_history() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects: Arc<dyn ObjectStore> =
        Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let StaleShip { stale, new_history } = stale_writer_ships_after_a_new_one(&objects, tmp.path());
    let err = stale.unwrap_err();
    assert!(matches!(err, Error::Fenced { generation: 2, .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::Refused);

    let check = tmp.path().join("check");
    restore(&*objects, &check, &RestoreOptions::default()).expect("restore");
    assert_eq!(
        fingerprint(&check),
        new_history,
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
