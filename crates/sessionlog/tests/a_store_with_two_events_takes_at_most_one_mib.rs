//! A store holding two events takes at most 1 MiB on disk with the default options
//! (preallocation on, 64 MiB segments): preallocation grows with the data instead of
//! reserving a whole segment up front, and still reaches the segment size once the data does.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sessionlog::build::{StepStart, TurnStart};
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};

const ONE_MIB: u64 = 1 << 20;

/// Bytes allocated on disk (`st_blocks * 512`) by the files of `dir`, recursively.
fn allocated_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        total += meta.blocks() * 512;
        if meta.is_dir() {
            total += allocated_bytes(&entry.path());
        }
    }
    total
}

fn write_two_events(store: &Store) {
    let mut s = store
        .create_session("s", SessionHeader::new("s", 1_700_000_000_000, None))
        .expect("create");
    s.append(TurnStart::new().at(1)).expect("append");
    s.append(StepStart::new().at(2)).expect("append");
    s.commit().expect("commit");
    assert_eq!(s.next_seq().0, 2, "two events appended");
}

#[test]
fn a_two_event_store_takes_at_most_one_mib_while_open_and_after_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open");
    write_two_events(&store);
    let open = allocated_bytes(dir.path());
    assert!(open <= ONE_MIB, "{open} bytes allocated while open");
    store.close().expect("close");
    let closed = allocated_bytes(dir.path());
    assert!(closed <= ONE_MIB, "{closed} bytes allocated after close");

    let store = Store::open(dir.path(), StoreOptions::default()).expect("reopen");
    assert_eq!(
        store.session_state("s").expect("state").next_seq().get(),
        2,
        "both events read back"
    );
    store.close().expect("close");
    let reopened = allocated_bytes(dir.path());
    assert!(
        reopened <= ONE_MIB,
        "{reopened} bytes allocated after a reopen"
    );
}

#[test]
fn preallocation_grows_to_the_segment_size_as_data_arrives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = 4 * ONE_MIB;
    let options =
        StoreOptions::default().with_log(LogOptions::default().with_segment_size_bytes(segment));
    let store = Store::open(dir.path(), options).expect("open");
    let raw = store.raw_stream("r").expect("raw stream");
    let payload = vec![7u8; 64 << 10];
    let before = allocated_bytes(dir.path());
    // About 2.2 MiB of data: more than half a segment, so the next doubling reaches it.
    for _ in 0..36 {
        raw.append(&[&payload[..]], sessionlog::Durability::Sync)
            .expect("append");
    }
    let after = allocated_bytes(dir.path());
    assert!(before <= ONE_MIB, "{before} bytes before the data");
    assert!(
        after >= segment,
        "{after} bytes allocated: the reservation did not reach the segment size"
    );
    assert!(
        after <= segment + ONE_MIB,
        "{after} bytes allocated: more than one segment"
    );
    store.close().expect("close");
}
