//! `Store::flush` makes what every writer appended durable without their handles: after a
//! power loss (simulated storage, random subset of unsynced writes kept) the events appended
//! by two writers before the flush are all there; events appended after it, never flushed,
//! are lost in some crashes, which shows the crash would have caught a flush that did not
//! sync.

use std::path::Path;

use sessionlog::build::{StepStart, TurnStart, UserMessage};
use sessionlog::session::SessionHeader;
use sessionlog::{LogOptions, Store, StoreOptions};
use sessionlog_testkit::SimStorage;

fn opts() -> StoreOptions {
    StoreOptions::default().with_log(
        LogOptions::default()
            .with_preallocate(false)
            .with_segment_size_bytes(64 << 10),
    )
}

fn append_turn(h: &mut sessionlog::SessionHandle, text: &str) {
    h.append(TurnStart::new()).expect("turn start");
    h.append(StepStart::new()).expect("step start");
    h.append(UserMessage::text(text)).expect("user message");
}

#[test]
fn flushed_appends_of_every_writer_survive_a_power_loss() {
    let mut lost_unflushed = 0;
    for seed in 0..40u64 {
        let sim = SimStorage::new(seed);
        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts()).expect("store");
        let mut a = store
            .create_session("a", SessionHeader::new("a", 1, None))
            .expect("create a");
        let mut b = store
            .create_session("b", SessionHeader::new("b", 1, None))
            .expect("create b");
        append_turn(&mut a, "from a");
        append_turn(&mut b, "from b");
        store.flush().expect("flush");
        // never flushed: a crash may keep it or not
        a.append(UserMessage::text("after the flush"))
            .expect("append");
        sim.crash(seed);
        drop((a, b, store));

        let store = Store::open_with(sim.as_storage(), Path::new("/s"), opts())
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let a_events = store.raw_events("a", sessionlog::Seq(0)).expect("a");
        let b_events = store.raw_events("b", sessionlog::Seq(0)).expect("b");
        assert!(a_events.len() >= 3, "seed {seed}: a lost flushed events");
        assert_eq!(b_events.len(), 3, "seed {seed}: b lost flushed events");
        if a_events.len() == 3 {
            lost_unflushed += 1;
        }
    }
    assert!(
        lost_unflushed > 0,
        "no crash lost an unflushed append, so none would catch a flush that does not sync"
    );
}
