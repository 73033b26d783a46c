//! Restoring chosen sessions gives a store holding exactly those sessions, event for event;
//! a name the shipped state does not hold is refused and nothing appears at the target.

mod common;

use std::sync::Arc;

use common::{assert_verifies, fingerprint, small_store_options, write_turns};
use sessionlog::{LogOptions, Store};
use sessionlog_remote::{restore, DirObjectStore, Error, RestoreOptions, Shipper};

#[test]
fn chosen_sessions_restore_into_a_store_of_their_own() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let store = Store::open(&store_dir, small_store_options()).expect("open");
    for s in 0..5 {
        write_turns(&store, &format!("session-{s}"), 6 + s);
    }
    // A deleted session is not in the shipped state's live sessions.
    store.delete_session("session-4").expect("delete");
    Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship");
    store.close().expect("close");
    let all = fingerprint(&store_dir);

    let options = RestoreOptions {
        sessions: vec!["session-3".into(), "session-1".into()],
        log: LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_preallocate(false),
        ..RestoreOptions::default()
    };
    let target = tmp.path().join("node-b");
    let report = restore(&*objects, &target, &options).expect("restore two sessions");
    assert_eq!(report.sessions, 2);
    let restored = fingerprint(&target);
    assert_eq!(
        restored.keys().collect::<Vec<_>>(),
        ["session-1", "session-3"]
    );
    for (name, export) in &restored {
        assert_eq!(export, &all[name], "{name} restored event for event");
    }
    assert_verifies(&target);

    let missing = RestoreOptions {
        sessions: vec!["session-4".into()],
        ..options
    };
    let elsewhere = tmp.path().join("node-c");
    let err = restore(&*objects, &elsewhere, &missing).unwrap_err();
    assert!(
        matches!(err, Error::NoSuchSession(ref n) if n == "session-4"),
        "{err}"
    );
    assert!(!elsewhere.exists());
}
