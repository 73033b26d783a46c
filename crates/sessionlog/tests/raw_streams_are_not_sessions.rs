//! Raw streams live in their own namespace: no session listing shows them, no raw write
//! reaches a session, and no session can be made inside the raw namespace.

use sessionlog::session::SessionHeader;
use sessionlog::{Durability, Error, SessionStore, Store, StoreOptions, RAW_STREAM_PREFIX};

fn opts() -> StoreOptions {
    StoreOptions::default().with_log(
        sessionlog::LogOptions::default()
            .with_preallocate(false)
            .with_segment_size_bytes(64 << 10),
    )
}

#[test]
fn raw_streams_never_appear_as_sessions_and_never_reach_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("open");
    drop(
        store
            .create_session("s", SessionHeader::new("s", 1, None))
            .expect("create"),
    );
    let raw = store.raw_stream("r").expect("raw stream");
    let receipt = raw
        .append(&[b"one", b"two"], Durability::Sync)
        .expect("append");
    assert_eq!(receipt.seqs.len(), 2);

    assert_eq!(store.session_names(), vec!["s".to_owned()]);
    let listed: Vec<String> = store
        .list_sessions(None, None, 10)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, vec!["s".to_owned()]);
    assert_eq!(
        SessionStore::list(&store, None, 10).expect("list"),
        vec!["s".to_owned()]
    );
    assert!(matches!(
        store.session_state("r"),
        Err(Error::NoSuchSession(_))
    ));
    assert_eq!(store.raw_stream_names(), vec!["r".to_owned()]);

    let payloads: Vec<Vec<u8>> = store
        .raw_read("r", 0, u64::MAX)
        .expect("read")
        .map(|r| r.expect("record").payload.to_vec())
        .collect();
    assert_eq!(payloads, vec![b"one".to_vec(), b"two".to_vec()]);

    let before = store.session_state("s").expect("state").next_seq();
    assert!(matches!(
        store.raw_stream("s"),
        Err(Error::RawNameIsSession(_))
    ));
    assert!(matches!(
        store.raw_read("s", 0, u64::MAX),
        Err(Error::RawNameIsSession(_))
    ));
    assert_eq!(store.session_state("s").expect("state").next_seq(), before);
}

#[test]
fn a_session_name_in_the_raw_namespace_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("open");
    let name = format!("{RAW_STREAM_PREFIX}x");
    let refused = store.create_session(&name, SessionHeader::new(&name, 1, None));
    assert!(matches!(refused, Err(Error::BadName { .. })));
    assert!(
        store.log_reader().streams().is_empty(),
        "nothing was created"
    );
}

/// Deleting a raw stream frees its name at once, leaves a session of the same name alone,
/// survives a reopen, and lets reclaim give its records' space back.
#[test]
fn a_deleted_raw_stream_is_gone_for_good_and_its_space_comes_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = vec![b'x'; 4 << 10];
    let store = Store::open(dir.path(), opts()).expect("open");
    drop(
        store
            .create_session("r", SessionHeader::new("r", 1, None))
            .expect("create"),
    );
    assert!(matches!(
        store.raw_stream("r"),
        Err(Error::RawNameIsSession(_))
    ));
    for name in ["doomed", "kept"] {
        let raw = store.raw_stream(name).expect("raw stream");
        for _ in 0..64 {
            raw.append(&[&payload], Durability::Sync).expect("append");
        }
    }
    let bytes_before = store.log_reader().stats().bytes;

    assert!(store.delete_raw_stream("doomed").expect("delete"));
    assert!(!store.delete_raw_stream("doomed").expect("second delete"));
    assert!(!store
        .delete_raw_stream("r")
        .expect("a session is not a raw stream"));
    assert_eq!(store.session_names(), vec!["r".to_owned()]);
    assert_eq!(store.raw_stream_names(), vec!["kept".to_owned()]);
    assert!(matches!(
        store.raw_read("doomed", 0, u64::MAX),
        Err(Error::NoSuchRawStream(_))
    ));
    let report = store.reclaim().expect("reclaim");
    assert!(
        !report.segments_removed.is_empty() || !report.segments_rewritten.is_empty(),
        "{report:?}"
    );
    let bytes_after = store.log_reader().stats().bytes;
    assert!(
        bytes_after < bytes_before * 3 / 4,
        "{bytes_before} -> {bytes_after} bytes: {report:?}"
    );
    // The name is free: a new stream starts at seq 0.
    let again = store.raw_stream("doomed").expect("raw stream again");
    let receipt = again.append(&[b"new"], Durability::Sync).expect("append");
    assert_eq!(receipt.seqs[0].0, 0);
    drop(again);
    store.close().expect("close");

    let store = Store::open(dir.path(), opts()).expect("reopen");
    assert_eq!(
        store.raw_stream_names(),
        vec!["doomed".to_owned(), "kept".to_owned()]
    );
    let doomed: Vec<Vec<u8>> = store
        .raw_read("doomed", 0, u64::MAX)
        .expect("read")
        .map(|r| r.expect("record").payload.to_vec())
        .collect();
    assert_eq!(doomed, vec![b"new".to_vec()]);
    assert_eq!(
        store.raw_read("kept", 0, u64::MAX).expect("read").count(),
        64
    );
}
