//! Helpers shared by the shipping and restore tests: small stores of real sessions, and a
//! fingerprint of a store's content to compare a restored store with.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use sessionlog::build::{AssistantMessage, StepEnd, StepStart, TurnEnd, TurnStart, UserMessage};
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};

/// Small segments (many of them sealed), no preallocation, a checkpoint every few events.
pub fn small_store_options() -> StoreOptions {
    StoreOptions::default()
        .with_log(
            LogOptions::default()
                .with_segment_size_bytes(64 << 10)
                .with_preallocate(false),
        )
        .with_cache_refresh_events(8)
}

/// Appends `turns` complete turns to session `name` (created when missing), each durable.
pub fn write_turns(store: &Store, name: &str, turns: usize) {
    let mut session = if store.session_names().iter().any(|n| n == name) {
        store.open_session(name).expect("open session").0
    } else {
        store
            .create_session(name, SessionHeader::new(name, 0, Some("/work")))
            .expect("create session")
    };
    for turn in 0..turns {
        let at = session.next_seq().get();
        session.append(TurnStart::new()).expect("turn start");
        session.append(StepStart::new()).expect("step start");
        session
            .append(UserMessage::text(format!(
                "{name}: question {at}/{turn} {}",
                "x".repeat(1500)
            )))
            .expect("user");
        session
            .append(AssistantMessage::new("deepseek", "deepseek-chat").text(format!("answer {at}")))
            .expect("assistant");
        session.append(StepEnd::new()).expect("step end");
        session.append(TurnEnd::completed()).expect("turn end");
        session.commit().expect("commit");
    }
}

/// Every session of the store in `dir` with its DSH export: equal fingerprints mean equal
/// sessions, event for event and byte for byte.
pub fn fingerprint(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let store = Store::open_read_only(dir, StoreOptions::default()).expect("open read-only");
    fingerprint_of_open(&store)
}

/// [`fingerprint`] of a store that is open.
pub fn fingerprint_of_open(store: &Store) -> BTreeMap<String, Vec<u8>> {
    store
        .session_names()
        .into_iter()
        .map(|name| {
            let export = store.export_dsh(&name).expect("export");
            (name, export)
        })
        .collect()
}

/// The store in `dir` passes `verify`: every segment and every session.
pub fn assert_verifies(dir: &Path) {
    let report =
        sessionlog_log::verify_store(std::sync::Arc::new(sessionlog_log::RealStorage), dir)
            .expect("verify store");
    assert!(
        report.is_intact(),
        "damage in {}: {:?}",
        dir.display(),
        report.damages
    );
    let store = Store::open_read_only(dir, StoreOptions::default()).expect("open read-only");
    let sessions = store.verify_sessions().expect("verify sessions");
    assert!(
        sessions.damages.is_empty(),
        "session damage: {:?}",
        sessions.damages
    );
}

/// Copies every file under `from` into `to` (created), recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
