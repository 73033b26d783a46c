//! The shipped durability level against the local one: 64 sessions, each committing one turn
//! at a time from its own thread, with `Sync` commits only (local) and with every commit
//! waiting for a manifest that covers it (`Shipper::ship_through`), measured in the same run;
//! then restoring the store that wrote. The object store is a directory on the measured disk
//! (`DirObjectStore`, every object and manifest synced), or an S3 server when
//! SESSIONLOG_S3_ENDPOINT is set (with SESSIONLOG_S3_BUCKET and the AWS_* credentials).
//! Short runs: `SESSIONLOG_SHIPPING_SECONDS` (default 4) per mode.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog::build::{AssistantMessage, StepEnd, StepStart, TurnEnd, TurnStart, UserMessage};
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};
use sessionlog_benches::{dir_bytes, fresh_dir, probe, write_json};
use sessionlog_remote::{
    restore, DirObjectStore, ObjectStore, RestoreOptions, S3Config, S3ObjectStore, Shipper,
};

const SESSIONS: usize = 64;

fn objects(name: &str) -> (Arc<dyn ObjectStore>, String) {
    if let Ok(endpoint) = std::env::var("SESSIONLOG_S3_ENDPOINT") {
        let config = S3Config {
            bucket: std::env::var("SESSIONLOG_S3_BUCKET")
                .unwrap_or_else(|_| "sessionlog-ci".into()),
            prefix: format!("bench/{name}-{}", std::process::id()),
            endpoint: Some(endpoint.clone()),
            ..S3Config::default()
        };
        let store = S3ObjectStore::new(&config).expect("S3 client");
        (Arc::new(store), format!("S3 at {endpoint}"))
    } else {
        let store = DirObjectStore::new(fresh_dir(&format!("bucket-{name}"))).expect("bucket");
        (Arc::new(store), "a directory on the measured disk".into())
    }
}

/// Commits per second over `seconds` from `SESSIONS` threads; with a shipper, each commit
/// waits until it is shipped.
fn run(name: &str, seconds: u64, shipper: Option<Arc<Shipper>>) -> (f64, Store) {
    let dir = fresh_dir(name);
    let options =
        StoreOptions::default().with_log(LogOptions::default().with_segment_size_bytes(8 << 20));
    let store = Store::open(&dir, options).expect("open");
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let (store, stop, commits, shipper) = (
                store.clone(),
                stop.clone(),
                commits.clone(),
                shipper.clone(),
            );
            std::thread::spawn(move || {
                let name = format!("session-{i}");
                let mut session = store
                    .create_session(&name, SessionHeader::new(&name, 0, None))
                    .expect("create");
                while !stop.load(Ordering::Relaxed) {
                    session.append(TurnStart::new()).expect("append");
                    session.append(StepStart::new()).expect("append");
                    session
                        .append(UserMessage::text("what next? ".repeat(20)))
                        .expect("append");
                    session
                        .append(
                            AssistantMessage::new("deepseek", "deepseek-chat")
                                .text("this. ".repeat(40)),
                        )
                        .expect("append");
                    session.append(StepEnd::new()).expect("append");
                    session.append(TurnEnd::completed()).expect("append");
                    session.commit().expect("commit");
                    if let Some(shipper) = &shipper {
                        let reader = store.log_reader();
                        shipper
                            .ship_through(&reader, reader.durable_lsn())
                            .expect("ship");
                    }
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("writer thread");
    }
    let rate = commits.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    (rate, store)
}

fn main() {
    let probe = probe();
    let seconds = std::env::var("SESSIONLOG_SHIPPING_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let (local, store) = run("ship-local", seconds, None);
    store.close().expect("close");
    let (objects, where_to) = objects("shipped");
    let shipper = Arc::new(Shipper::new(objects.clone(), 0));
    let (shipped, store) = run("ship-shipped", seconds, Some(shipper.clone()));
    let last = shipper.ship(&store.log_reader()).expect("final ship");
    let bytes = dir_bytes(store.log_reader().dir());
    store.close().expect("close");
    let target = fresh_dir("ship-restored");
    std::fs::remove_dir(&target).expect("an absent target");
    let started = Instant::now();
    let restored = restore(&*objects, &target, &RestoreOptions::default()).expect("restore");
    let restore_time = started.elapsed();
    let restore_mb_s = restored.bytes as f64 / 1e6 / restore_time.as_secs_f64();
    println!(
        "shipping, {SESSIONS} sessions, {seconds} s per mode, objects in {where_to}: \
         local durable {local:.0} commits/s, shipped {shipped:.0} commits/s ({:.2}x local); \
         {} manifests; restore of {:.1} MB ({} segments) in {restore_time:.2?} = {restore_mb_s:.1} MB/s \
         (store files {:.1} MB)",
        shipped / local,
        last.generation,
        restored.bytes as f64 / 1e6,
        restored.segments,
        bytes as f64 / 1e6,
    );
    write_json(
        "shipping.json",
        &json!({
            "probe": probe,
            "sessions": SESSIONS,
            "seconds": seconds,
            "objects": where_to,
            "local_commits_per_s": local,
            "shipped_commits_per_s": shipped,
            "shipped_over_local": shipped / local,
            "manifests": last.generation,
            "restore_bytes": restored.bytes,
            "restore_seconds": restore_time.as_secs_f64(),
            "restore_mb_s": restore_mb_s,
        }),
    );
    for name in [
        "ship-local",
        "ship-shipped",
        "ship-restored",
        "bucket-shipped",
    ] {
        let _ = std::fs::remove_dir_all(sessionlog_benches::bench_dir().join(name));
    }
}
