//! Helpers shared by the shipping and restore tests: small stores of real sessions, a
//! fingerprint of a store's content to compare a restored store with, the real servers (or
//! the skip without them), and the scenario of a stale writer shipping after a new one.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sessionlog::build::{AssistantMessage, StepEnd, StepStart, TurnEnd, TurnStart, UserMessage};
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};
use sessionlog_remote::{
    restore, EtcdLeases, ObjectStore, RestoreOptions, S3Config, S3ObjectStore, ShipReport, Shipper,
};

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

/// A name for `test`'s own use that no other test, and no earlier run, uses.
pub fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{test}-{}-{nanos}", std::process::id())
}

/// The value of `var`, which names `server` for `test`, or `None` (and a line saying `test`
/// was skipped and how to run it, through `script`) when it is not set; under CI=true a
/// missing server fails the test instead.
fn server_setting(test: &str, var: &str, server: &str, script: &str) -> Option<String> {
    let Ok(value) = std::env::var(var) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run {test} against a {server}: run the tests through {script}"
        );
        println!(
            "skipped {test}: {var} is not set, so there is no {server} to run against (run the tests through {script})"
        );
        return None;
    };
    Some(value)
}

/// SESSIONLOG_ETCD_ENDPOINTS, the etcd cluster's endpoints, or `None` without one (see
/// [`server_setting`]).
pub fn etcd_endpoints(test: &str) -> Option<String> {
    server_setting(
        test,
        "SESSIONLOG_ETCD_ENDPOINTS",
        "real etcd cluster",
        ".ci/with-etcd.sh",
    )
}

/// The etcd cluster of SESSIONLOG_ETCD_ENDPOINTS, or `None` (and a line saying `test` was
/// skipped) without one; under CI=true a missing cluster fails the test instead.
pub fn etcd_cluster(test: &str) -> Option<EtcdLeases> {
    let endpoints = etcd_endpoints(test)?;
    let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
    Some(EtcdLeases::new(&endpoints).expect("etcd endpoints"))
}

/// The bucket of the S3 server of SESSIONLOG_S3_ENDPOINT (and SESSIONLOG_S3_BUCKET, AWS_*)
/// under a prefix of `test`'s own, or `None` (and a line saying it was skipped) without one;
/// under CI=true a missing server fails the test instead.
pub fn s3_server(test: &str) -> Option<Arc<S3ObjectStore>> {
    let endpoint = server_setting(
        test,
        "SESSIONLOG_S3_ENDPOINT",
        "real S3 server",
        ".ci/with-seaweedfs.sh",
    )?;
    let config = S3Config {
        bucket: std::env::var("SESSIONLOG_S3_BUCKET").unwrap_or_else(|_| "sessionlog-ci".into()),
        prefix: format!("tests/{}", unique(test)),
        endpoint: Some(endpoint),
        ..S3Config::default()
    };
    Some(Arc::new(S3ObjectStore::new(&config).expect("S3 client")))
}

/// Removes every object a test shipped (and its scratch objects under `t/`).
pub fn remove_shipped(objects: &dyn ObjectStore) {
    for dir in sessionlog_remote::SHIPPED_DIRS.into_iter().chain(["t"]) {
        for key in objects.list(dir).expect("list") {
            objects.delete(&key).expect("delete");
        }
    }
}

/// What [`stale_writer_ships_after_a_new_one`] saw.
pub struct StaleShip {
    /// The stale writer's ship of generation 2.
    pub stale: sessionlog_remote::Result<ShipReport>,
    /// Every session of the new writer's store, as it shipped them.
    pub new_history: BTreeMap<String, Vec<u8>>,
}

/// A writer (token 1) ships generation 1 from a store in `dir`; a new writer (token 2)
/// restores it, writes and ships generation 2; the first, unaware, writes more and ships
/// again, with generation numbers only to fence it.
pub fn stale_writer_ships_after_a_new_one(objects: &Arc<dyn ObjectStore>, dir: &Path) -> StaleShip {
    let old = Store::open(dir.join("old-owner"), small_store_options()).expect("open");
    write_turns(&old, "s", 4);
    let old_shipper = Shipper::new(objects.clone(), 1);
    old_shipper.ship(&old.log_reader()).expect("ship");
    let new_dir = dir.join("new-owner");
    restore(&**objects, &new_dir, &RestoreOptions::default()).expect("restore");
    let new = Store::open(&new_dir, small_store_options()).expect("open restored");
    write_turns(&new, "s", 2);
    Shipper::new(objects.clone(), 2)
        .ship(&new.log_reader())
        .expect("new owner ships");
    let new_history = fingerprint_of_open(&new);
    new.close().expect("close");
    write_turns(&old, "s", 3);
    let stale = old_shipper.ship(&old.log_reader());
    old.close().expect("close");
    StaleShip { stale, new_history }
}
