//! Names the store keeps for itself are refused as session names, and a name bound in the
//! catalog without a session header (left by a create that a crash cut between its two
//! batches, in builds that wrote them separately) does not block creating that session.

use sessionlog::{Error, Store, StoreOptions};
use sessionlog_session::SessionHeader;

fn store(dir: &std::path::Path) -> Store {
    let options =
        StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false));
    Store::open(dir, options).expect("store")
}

#[test]
fn names_starting_with_nul_are_refused_for_create_and_import() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let name = "\0staging/1-1";
    assert!(matches!(
        store.create_session(name, SessionHeader::new("x", 1, None)),
        Err(Error::BadName { .. })
    ));
    let file = b"{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":1}\n";
    assert!(matches!(
        store.import_dsh(file, Some(name)),
        Err(Error::BadName { .. })
    ));
    assert!(store.session_names().is_empty());
    assert_eq!(
        store.log_reader().stream_id(name),
        None,
        "nothing was written"
    );
}

#[test]
fn a_name_bound_without_a_header_is_no_session_and_can_be_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        // What a crash between the catalog batch and the header batch left behind, written
        // through the log since the store hands out no raw write access to session names.
        let log = sessionlog_log::Log::open(
            dir.path(),
            sessionlog::LogOptions::default().with_preallocate(false),
        )
        .expect("log");
        log.create_stream("stuck").expect("bare stream");
        log.close().expect("close");
    }
    let store = store(dir.path());
    assert!(store.session_names().is_empty());
    assert!(matches!(
        store.open_session("stuck"),
        Err(Error::NoSuchSession(_))
    ));
    let header = SessionHeader::new("stuck", 1, None);
    drop(
        store
            .create_session("stuck", header.clone())
            .expect("the name is not stuck"),
    );
    assert_eq!(store.session_names(), vec!["stuck".to_owned()]);
    assert_eq!(
        store.session_state("stuck").expect("state").header(),
        &header
    );
}
