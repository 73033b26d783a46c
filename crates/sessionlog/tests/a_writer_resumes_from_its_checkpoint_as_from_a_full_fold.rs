//! Opening a session for writing loads the checkpoint of its state and folds only the
//! records after it; the state it resumes with is the one a fold of the whole log gives
//! (surface, tokens, restart closers, an open compaction lock), and a checkpoint of another
//! version or another token counter is rebuilt from the log instead of being misread.

mod support;

use std::path::Path;
use std::sync::Arc;

use sessionlog::build::CompactionStart;
use sessionlog::cache::CacheMiss;
use sessionlog::session::tokens::{HeuristicCounter, TokenCounter, TokenProjection};
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{CacheCheck, CacheUse, Store, StoreOptions};
use sessionlog_session::SessionHeader;

const REFRESH: u64 = 64;

fn opts() -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog_testkit::small_segments())
        .with_cache_refresh_events(REFRESH)
}

/// A session of generated turns with compactions, committed every turn (so its writer
/// checkpoints every `REFRESH` events), ending in an open turn with a compaction lock.
fn write_session(store: &Store) -> u64 {
    let mut h = store
        .create_session("s", SessionHeader::new("s", 1, None))
        .expect("create");
    let mut w = Workload::new(
        5,
        WorkloadConfig::default().with_compact_every_turns(Some(4)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for _ in 0..30 {
        let next = h.next_seq().get();
        for e in w.turn(next, 2, None) {
            h.append(e).expect("turn");
        }
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(events) = w.compaction(&surface, h.next_seq(), 3) {
                h.append_atomic(events).expect("compaction");
            }
        }
        h.commit().expect("commit");
    }
    let next = h.next_seq().get();
    for e in w.turn(next, 4, Some(7)) {
        h.append(e).expect("partial turn");
    }
    h.append(CompactionStart::new("left-open")).expect("lock");
    h.commit().expect("commit");
    h.next_seq().get()
}

#[test]
fn a_writer_resumes_from_the_checkpoint_with_the_state_of_a_full_fold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), opts()).expect("store");
    let events = write_session(&store);
    assert!(events > 4 * REFRESH, "{events} events");

    let h = store.open_session_as_is("s").expect("resume");
    match h.opened_from() {
        CacheUse::Hit { folded } => assert!(*folded < REFRESH, "folded {folded}"),
        other => panic!("the writer's checkpoint was not used: {other:?}"),
    }
    let session = support::whole_session(&store, "s");
    assert_eq!(h.state().surface(), session.surface());
    assert_eq!(h.next_seq(), session.next_seq());
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let projection = TokenProjection::from_session(&session, counter).expect("tokens");
    assert_eq!(h.token_view(), Some(projection.view()));
    assert_eq!(h.pressure(), projection.pressure());
    assert!(h.has_open_compaction(), "the lock survives the checkpoint");
    assert_eq!(
        h.derive_messages().expect("derive"),
        session
            .derive_messages()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    );
    drop(h);
    // The checkpoint plus the records after it fold to what the whole log folds to.
    assert!(store
        .cache_verify()
        .expect("verify")
        .iter()
        .all(|(_, check)| *check == CacheCheck::Ok));

    // Restart repair from the checkpoint appends what a full fold would: the turn's closers,
    // then the end of the open compaction.
    let mut expected: Vec<String> = session
        .repair_closers()
        .expect("closers")
        .iter()
        .map(|e| e.event_type().to_owned())
        .collect();
    expected.push("compaction/end".into());
    let (mut h, closers) = store.open_session("s").expect("open with repair");
    let got: Vec<String> = closers.iter().map(|e| e.event_type().to_owned()).collect();
    assert_eq!(got, expected);
    assert!(!h.has_open_compaction());
    h.append(sessionlog::build::TurnStart::new())
        .expect("the session goes on");
}

/// Rewrites the cache file's format version field (bytes 4..8) and its checksum.
fn set_cache_format_version(file: &Path, version: u32) {
    let mut bytes = std::fs::read(file).expect("read");
    let body = bytes.len() - 4;
    bytes[4..8].copy_from_slice(&version.to_le_bytes());
    let sum = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(file, bytes).expect("write");
}

#[test]
fn a_checkpoint_of_another_version_or_counter_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = Store::open(dir.path(), opts()).expect("store");
        write_session(&store);
        store.close().expect("close");
    }
    let file = std::fs::read_dir(dir.path().join("cache"))
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "slpc"))
        .expect("a checkpoint");

    // Another token counter: the estimates in the checkpoint are not this store's.
    #[derive(Debug)]
    struct Words;
    impl TokenCounter for Words {
        fn name(&self) -> &str {
            "words"
        }
        fn count(&self, text: &str) -> u32 {
            text.split_whitespace().count() as u32
        }
    }
    {
        let store =
            Store::open(dir.path(), opts().with_token_counter(Arc::new(Words))).expect("store");
        let h = store.open_session_as_is("s").expect("resume");
        assert!(
            matches!(
                h.opened_from(),
                CacheUse::Rebuilt(CacheMiss::Incompatible(_))
            ),
            "{:?}",
            h.opened_from()
        );
        drop(h);
        store.close().expect("close");
    }
    // The open above wrote a checkpoint for its own counter; the default store rebuilds.
    let store = Store::open(dir.path(), opts()).expect("store");
    let view = store.view("s").expect("view");
    assert!(
        matches!(view.cache, CacheUse::Rebuilt(CacheMiss::Incompatible(_))),
        "{:?}",
        view.cache
    );
    assert_eq!(
        store.view("s").expect("view").cache,
        CacheUse::Hit { folded: 0 }
    );

    // Another cache format version, with a valid checksum: not misread, rebuilt.
    set_cache_format_version(&file, 1);
    let view = store.view("s").expect("view");
    assert!(
        matches!(view.cache, CacheUse::Rebuilt(CacheMiss::Incompatible(_))),
        "{:?}",
        view.cache
    );
    let session = support::whole_session(&store, "s");
    assert_eq!(view.surface.nodes(), &session.surface()[..]);
    assert_eq!(view.surface.derive_messages(), session.derive_messages());
}

#[test]
fn a_checkpoint_of_the_older_layout_with_a_separate_locks_section_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = Store::open(dir.path(), opts()).expect("store");
        write_session(&store);
        store.close().expect("close");
    }
    let file = std::fs::read_dir(dir.path().join("cache"))
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "slpc"))
        .expect("a checkpoint");
    // The layout before the locks moved into the state: a state section of version 2, then
    // a compaction-locks section of version 1 (here: no lock), under the same framing.
    let bytes = std::fs::read(&file).expect("read");
    let (header, parts) = sessionlog::cache::decode(
        &bytes,
        &[("state", sessionlog::session::CHECKPOINT_STATE_VERSION)],
    )
    .expect("the checkpoint this build wrote");
    let mut old_state = parts[0].to_vec();
    old_state[4..8].copy_from_slice(&2u32.to_le_bytes());
    let old = sessionlog::cache::encode(
        &header,
        &[
            sessionlog::cache::Section {
                name: "state",
                version: 2,
                bytes: &old_state,
            },
            sessionlog::cache::Section {
                name: "compaction-locks",
                version: 1,
                bytes: &0u64.to_le_bytes(),
            },
        ],
    );
    std::fs::write(&file, old).expect("write");

    let store = Store::open(dir.path(), opts()).expect("store");
    let h = store.open_session_as_is("s").expect("resume");
    assert!(
        matches!(
            h.opened_from(),
            CacheUse::Rebuilt(CacheMiss::Incompatible(_))
        ),
        "{:?}",
        h.opened_from()
    );
    assert!(h.has_open_compaction(), "the rebuilt state has the lock");
    drop(h);
    // The rebuild wrote a checkpoint of this layout, which the next open uses.
    let h = store.open_session_as_is("s").expect("resume");
    assert_eq!(*h.opened_from(), CacheUse::Hit { folded: 0 });
    assert!(h.has_open_compaction(), "the lock is in the new checkpoint");
}
