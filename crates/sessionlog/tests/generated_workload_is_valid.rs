//! The workload generator makes sessions that pass every validation rule, including
//! compactions and interrupted turns, and that the store round-trips.

mod support;

use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{Store, StoreOptions};
use sessionlog_session::SessionHeader;

#[test]
fn generated_sessions_validate_compact_and_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options =
        StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false));
    let store = Store::open(dir.path(), options).expect("store");
    let mut h = store
        .create_session("g", SessionHeader::new("g", 1, None))
        .expect("create");
    let mut w = Workload::new(
        7,
        WorkloadConfig::default().with_compact_every_turns(Some(3)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..20 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn event");
        }
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(events) = w.compaction(&surface, h.next_seq(), 3) {
                for e in events {
                    h.append(e).expect("compaction event");
                }
            }
        }
    }
    assert!(w.compactions() >= 5);
    assert!(h.state().replace_generation() >= 5);
    // An interrupted turn gets closers on reopen.
    let next = h.next_seq().get();
    for e in w.turn(next, 4, Some(9)) {
        h.append(e).expect("partial turn");
    }
    h.commit().expect("commit");
    drop(h);
    let (_h, closers) = store.open_session("g").expect("reopen");
    assert!(!closers.is_empty(), "an open turn is closed on reopen");
    let view = store.view("g").expect("view");
    let session = support::whole_session(&store, "g");
    assert_eq!(
        view.surface.derive_messages_json(),
        session.derive_messages_json()
    );
}
