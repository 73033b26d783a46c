//! The shipped durability level against the local one: 64 sessions, each committing one turn
//! at a time from its own thread, with `Sync` commits only (local) and with every commit
//! waiting for a manifest that covers it (`Shipper::ship_through`), measured in the same run;
//! then restoring the store that wrote. The object store is a directory on the measured disk
//! (`DirObjectStore`, every object and manifest synced), or an S3 server when
//! SESSIONLOG_S3_ENDPOINT is set (with SESSIONLOG_S3_BUCKET and the AWS_* credentials).
//! Short runs: `SESSIONLOG_SHIPPING_SECONDS` (default 4) per mode.
//!
//! Last, the resume of one long session (`SESSIONLOG_SHIPPING_RESUME_EVENTS`, default
//! 100,000 events) on a new node: the shard's lease (from etcd when SESSIONLOG_ETCD_ENDPOINTS
//! is set), the restore of its shipped store (its checkpoint and the log), the open of the
//! store and of the session for writing; against, in the same run, the open of the store and
//! the session on the node that wrote it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog::build::{AssistantMessage, StepEnd, StepStart, TurnEnd, TurnStart, UserMessage};
use sessionlog::CacheUse;
use sessionlog::{LogOptions, SessionHeader, Store, StoreOptions};
use sessionlog_benches::{dir_bytes, fill_long_session, fresh_dir, probe, write_json};
use sessionlog_remote::{restore, EtcdLeases, ObjectStore, Owner, RestoreOptions, Shipper};

const SESSIONS: usize = 64;

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

/// What the resume of one long session measured.
struct Resume {
    events: u64,
    store_bytes: u64,
    local: Duration,
    lease: Option<Duration>,
    restore: Duration,
    open: Duration,
    total: Duration,
    folded_after_checkpoint: u64,
}

/// Writes one session of `events` events, ships it, then times its resume on the node that
/// wrote it and on a new node (lease, restore, open).
fn resume_on_a_new_node(events: u64, objects: &Arc<dyn ObjectStore>) -> Resume {
    let dir = fresh_dir("ship-resume-source");
    let options = StoreOptions::default().with_log(
        LogOptions::default()
            .with_segment_size_bytes(8 << 20)
            .with_preallocate(false),
    );
    let store = Store::open(&dir, options.clone()).expect("open");
    let mut h = store
        .create_session("long", SessionHeader::new("long", 1, None))
        .expect("create");
    fill_long_session(&mut h, events);
    h.commit().expect("commit");
    let events = h.next_seq().get();
    drop(h);
    store.close().expect("close");
    // The node that wrote it: reopen the store and the session (the baseline).
    let started = Instant::now();
    let store = Store::open(&dir, options.clone()).expect("reopen");
    let (h, _) = store.open_session("long").expect("resume locally");
    let local = started.elapsed();
    assert_eq!(h.next_seq().get(), events);
    drop(h);
    Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship");
    let store_bytes = dir_bytes(&dir);
    store.close().expect("close");

    let leases = std::env::var("SESSIONLOG_ETCD_ENDPOINTS").ok().map(|e| {
        EtcdLeases::new(&e.split(',').map(str::to_owned).collect::<Vec<_>>()).expect("etcd")
    });
    let shard = format!("bench-resume-{}", std::process::id());
    let target = fresh_dir("ship-resume-node");
    std::fs::remove_dir(&target).expect("an absent target");
    let started = Instant::now();
    let owner = leases.as_ref().map(|leases| {
        Owner::acquire(leases, &shard, "new-node", Duration::from_secs(10)).expect("lease")
    });
    let lease = owner.as_ref().map(|_| started.elapsed());
    let restore_started = Instant::now();
    restore(&**objects, &target, &RestoreOptions::default()).expect("restore");
    let restore_time = restore_started.elapsed();
    let open_started = Instant::now();
    let store = Store::open(&target, options).expect("open restored");
    let (h, _) = store.open_session("long").expect("resume on the new node");
    let open = open_started.elapsed();
    let total = started.elapsed();
    assert_eq!(h.next_seq().get(), events);
    let folded_after_checkpoint = match h.opened_from() {
        CacheUse::Hit { folded } => *folded,
        other => panic!("the restored session did not resume from its checkpoint: {other:?}"),
    };
    drop(h);
    store.close().expect("close");
    if let (Some(owner), Some(leases)) = (owner, leases) {
        owner.release(&leases).expect("release");
    }
    Resume {
        events,
        store_bytes,
        local,
        lease,
        restore: restore_time,
        open,
        total,
        folded_after_checkpoint,
    }
}

fn main() {
    let probe = probe();
    let seconds = std::env::var("SESSIONLOG_SHIPPING_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let (local, store) = run("ship-local", seconds, None);
    store.close().expect("close");
    let (objects, where_to) = sessionlog_benches::bench_object_store("shipped");
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
    let resume_events = std::env::var("SESSIONLOG_SHIPPING_RESUME_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let (resume_objects, _) = sessionlog_benches::bench_object_store("resume");
    let resume = resume_on_a_new_node(resume_events, &resume_objects);
    println!(
        "resume of one {}-event session ({:.1} MB store) on a new node: {:.1?} \
         (lease {}, restore {:.1?}, open store and session {:.1?}, {} events folded after the \
         checkpoint); on the node that wrote it: {:.1?} ({:.2}x)",
        resume.events,
        resume.store_bytes as f64 / 1e6,
        resume.total,
        resume.lease.map_or(
            "not taken: no SESSIONLOG_ETCD_ENDPOINTS".to_owned(),
            |d| format!("{d:.1?} from etcd")
        ),
        resume.restore,
        resume.open,
        resume.folded_after_checkpoint,
        resume.local,
        resume.total.as_secs_f64() / resume.local.as_secs_f64(),
    );
    write_json(
        "shipping-resume.json",
        &json!({
            "probe": probe,
            "objects": where_to,
            "events": resume.events,
            "store_bytes": resume.store_bytes,
            "new_node_ms": resume.total.as_secs_f64() * 1e3,
            "lease_ms": resume.lease.map(|d| d.as_secs_f64() * 1e3),
            "restore_ms": resume.restore.as_secs_f64() * 1e3,
            "open_ms": resume.open.as_secs_f64() * 1e3,
            "local_ms": resume.local.as_secs_f64() * 1e3,
            "folded_after_checkpoint": resume.folded_after_checkpoint,
        }),
    );
    for name in [
        "ship-local",
        "ship-shipped",
        "ship-restored",
        "ship-resume-source",
        "ship-resume-node",
    ] {
        let _ = std::fs::remove_dir_all(sessionlog_benches::bench_dir().join(name));
    }
    sessionlog_benches::remove_bench_objects(&*objects, "shipped");
    sessionlog_benches::remove_bench_objects(&*resume_objects, "resume");
}
