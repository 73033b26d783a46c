//! A session resumed without a checkpoint reads each stored `assistant/chunk` from its
//! record's head (seq and time) instead of decoding it, and prepares the other records on
//! two threads; the state it reaches is the one a load of every decoded event reaches, on
//! every fixture and on generated sessions (with compactions, atomic batches, a session
//! ending in the middle of a stream, and runs long enough for the two-thread fold).

mod projecting;

use std::sync::Arc;

use proptest::prelude::*;
use sessionlog::projection::Stats;
use sessionlog::session::tokens::HeuristicCounter;
use sessionlog::session::{Event, Seq, SessionState};
use sessionlog::{Store, StoreOptions};
use sessionlog_testkit::dsh_corpus;

use projecting::{append_turn, import_every_fixture, start_generated, write_generated};

/// No checkpoint, so every resume folds the whole log; `stats` is registered because the
/// shared generator checks what the writer kept against its own count.
fn opts() -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog_testkit::small_segments())
        .with_projection_cache(false)
        .with_projection(Stats)
}

/// Session `name` loaded event by event, every stored event decoded, into a state made
/// like the store makes it (header, rules, the default counter).
fn full_load(store: &Store, name: &str, like: &SessionState) -> SessionState {
    let events = store.raw_events(name, Seq(0)).expect("events");
    let mut state = SessionState::with_tokens(
        like.header().clone(),
        like.version().clone(),
        Arc::new(HeuristicCounter),
    );
    let past: &[Event] = &events;
    for event in &events {
        state.load(&mut event.clone(), &past).expect("load");
    }
    state
}

/// The store's cold resume of `name` equals its full load; returns the session's chunks.
fn assert_resumed_as_loaded(store: &Store, name: &str) -> usize {
    let resumed = store.session_state(name).expect("resume");
    let loaded = full_load(store, name, &resumed);
    assert_eq!(resumed, loaded, "{name}");
    assert_eq!(
        resumed.last_event_time(),
        loaded.last_event_time(),
        "{name}"
    );
    store
        .raw_events(name, Seq(0))
        .expect("events")
        .iter()
        .filter(|e| e.event_type() == "assistant/chunk")
        .count()
}

#[test]
fn every_fixture_resumes_cold_as_a_full_load_folds_it() {
    let Some(root) =
        dsh_corpus("crates/sessionlog/tests/a_cold_resume_folds_to_the_state_of_a_full_load.rs")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let chunks: usize = import_every_fixture(&store, &root)
        .iter()
        .map(|name| assert_resumed_as_loaded(&store, name))
        .sum();
    assert!(chunks > 0, "the fixtures hold no chunk");
}

#[test]
fn a_long_generated_session_resumes_cold_on_two_threads_as_a_full_load_folds_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    // Past the length below which a resume folds on the calling thread (16,384 records).
    let events = write_generated(&store, "long", 11, 700);
    assert!(events > 20_000, "{events} events");
    let chunks = assert_resumed_as_loaded(&store, "long");
    assert!(chunks * 2 > events as usize, "{chunks} chunks of {events}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// A generated session, then part of one more turn: the last event is a chunk when
    /// `cut` stops the turn inside a stream, so the newest event's time is a chunk's.
    #[test]
    fn a_generated_session_cut_anywhere_resumes_cold_as_a_full_load_folds_it(
        seed in any::<u64>(),
        turns in 0usize..12,
        cut in 1usize..40,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), opts()).expect("store");
        let (mut h, mut w) = start_generated(&store, "g", seed);
        for _ in 0..turns {
            append_turn(&mut h, &mut w);
        }
        let next = h.next_seq().get();
        for e in w.turn(next, 2, Some(cut)) {
            h.append(e).expect("partial turn");
        }
        h.commit().expect("commit");
        drop(h);
        assert_resumed_as_loaded(&store, "g");
    }
}

#[test]
fn a_session_ending_in_a_chunk_resumes_with_that_chunks_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let (mut h, mut w) = start_generated(&store, "g", 3);
    append_turn(&mut h, &mut w);
    let next = h.next_seq().get();
    let mut last_chunk = None;
    for e in w.turn(next, 2, None) {
        let event = h.append(e).expect("turn").clone();
        if event.event_type() == "assistant/chunk" {
            last_chunk = Some(event.time());
            break;
        }
    }
    let time = last_chunk.expect("a streamed turn has chunks");
    h.commit().expect("commit");
    drop(h);
    assert!(assert_resumed_as_loaded(&store, "g") > 0);
    let resumed = store.session_state("g").expect("resume");
    assert_eq!(resumed.last_event_time(), Some(time));
}
