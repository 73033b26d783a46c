//! `Store::events` and `Store::write_dsh` read a session record by record; what they yield is
//! exactly what a whole loaded session holds: the same envelopes, and the same DSH file
//! with runs of chunk deltas packed into rows (including runs cut by the streaming buffer).

mod support;

use sessionlog::session::export_jsonl;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{Seq, Store, StoreOptions};
use sessionlog_session::SessionHeader;

fn store_with_chunky_session(dir: &std::path::Path) -> Store {
    let options =
        StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false));
    let store = Store::open(dir, options).expect("store");
    let mut h = store
        .create_session("g", SessionHeader::new("g", 1, None))
        .expect("create");
    let mut w = Workload::new(
        3,
        WorkloadConfig::default()
            .with_compact_every_turns(Some(4))
            .with_chunks_per_message((0, 12)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..40 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn event");
        }
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(events) = w.compaction(&surface, h.next_seq(), 3) {
                h.append_atomic(events).expect("compaction");
            }
        }
    }
    h.commit().expect("commit");
    store
}

#[test]
fn streamed_export_is_the_whole_session_export_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_chunky_session(dir.path());
    let whole = export_jsonl(&support::whole_session(&store, "g"));
    let mut streamed = Vec::new();
    store.write_dsh("g", &mut streamed).expect("stream");
    assert!(
        whole.len() > 1 << 17,
        "the session spans several output buffers ({} bytes)",
        whole.len()
    );
    let packed_rows = String::from_utf8_lossy(&whole)
        .lines()
        .filter(|l| l.contains("\"seq0\""))
        .count();
    assert!(
        packed_rows > 10,
        "chunk runs were packed ({packed_rows} rows)"
    );
    assert!(streamed == whole, "the streamed export differs");
    assert_eq!(store.export_dsh("g").expect("export"), whole);
}

#[test]
fn streamed_events_are_the_stored_envelopes_from_any_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_chunky_session(dir.path());
    let session = support::whole_session(&store, "g");
    let all = session.events();
    for from in [
        0,
        1,
        all.len() as u64 / 2,
        all.len() as u64 - 1,
        all.len() as u64,
    ] {
        let streamed: Vec<String> = store
            .events("g", Seq(from))
            .expect("events")
            .map(|e| e.expect("event").raw().to_owned())
            .collect();
        let expected: Vec<String> = all[from as usize..]
            .iter()
            .map(|e| e.raw().to_owned())
            .collect();
        assert_eq!(streamed, expected, "from seq {from}");
    }
}
