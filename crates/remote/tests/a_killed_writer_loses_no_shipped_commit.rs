//! Node loss, with real process kills: a writer process commits turns and waits for each to
//! be shipped before it counts it as acknowledged; it is SIGKILLed at a random point (often in
//! the middle of a ship) and its local directory deleted. A restore on "another node" then
//! holds every acknowledged event, byte for byte as the model recorded it when the writer
//! acknowledged it, and verifies; a writer there continues the same shipped history, to be
//! killed in turn.
//!
//! The number of kills is `SESSIONLOG_NODE_LOSS_KILLS` (20 by default, which CI runs); the
//! figure of at least 100 kills comes from
//! `SESSIONLOG_NODE_LOSS_KILLS=100 cargo test -p sessionlog-remote --test a_killed_writer_loses_no_shipped_commit -- --nocapture`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{assert_verifies, small_store_options, write_turns};
use rand::{Rng, SeedableRng};
use sessionlog::{Seq, Store, StoreOptions};
use sessionlog_remote::{restore, DirObjectStore, RestoreOptions, Shipper};

const CHILD_ENV: &str = "SESSIONLOG_REMOTE_KILL_CHILD";
const TEST_NAME: &str = "a_killed_writer_loses_no_shipped_commit";
const SESSIONS: usize = 3;

/// The model: per session, each acknowledged commit's event seqs `from..to` and the CRC-32 of
/// those events' stored envelopes.
type Model = BTreeMap<String, Vec<(u64, u64, u32)>>;

/// The CRC-32 of the stored envelopes of session `name`'s events `from..to`, or `None` when
/// the store holds fewer.
fn events_crc(store: &Store, name: &str, from: u64, to: u64) -> Option<u32> {
    let mut crc = crc32fast::Hasher::new();
    let mut count = 0;
    for event in store.events(name, Seq(from)).ok()? {
        let event = event.ok()?;
        if event.seq().get() >= to {
            break;
        }
        crc.update(event.raw().as_bytes());
        crc.update(b"\n");
        count += 1;
    }
    (count == to - from).then(|| crc.finalize())
}

/// The writer: commits one turn at a time to a rotating session and, once a manifest covers
/// it, prints `acked NAME FROM TO CRC` (see [`Model`]). Runs until killed.
fn writer(store_dir: &Path, bucket: &Path) -> ! {
    let store = Store::open(store_dir, small_store_options()).expect("child: open");
    let shipper = Shipper::new(Arc::new(DirObjectStore::new(bucket).expect("bucket")), 0);
    let mut out = std::io::stdout().lock();
    // The test harness has printed `test NAME ... ` without a line end: start a fresh line.
    writeln!(out).expect("stdout");
    for i in 0.. {
        let name = format!("s{}", i % SESSIONS);
        // Event seqs are record seqs less the header record.
        let from = records(&store, &name).saturating_sub(1);
        write_turns(&store, &name, 1);
        let reader = store.log_reader();
        shipper
            .ship_through(&reader, reader.durable_lsn())
            .expect("child: ship");
        let to = records(&store, &name) - 1;
        let crc = events_crc(&store, &name, from, to).expect("child: read back");
        writeln!(out, "acked {name} {from} {to} {crc}").expect("child: stdout");
        out.flush().expect("child: flush");
    }
    unreachable!("the writer loops until it is killed")
}

#[test]
fn a_killed_writer_loses_no_shipped_commit() {
    if let Ok(dirs) = std::env::var(CHILD_ENV) {
        let (store, bucket) = dirs.split_once('\n').expect("two paths");
        writer(Path::new(store), Path::new(bucket));
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let bucket = tmp.path().join("bucket");
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut acked = Model::new();
    let rounds: usize = std::env::var("SESSIONLOG_NODE_LOSS_KILLS")
        .ok()
        .map_or(20, |n| {
            n.parse().expect("SESSIONLOG_NODE_LOSS_KILLS is a number")
        });
    let mut acknowledged = 0;
    for round in 0..rounds {
        let node = tmp.path().join(format!("node-{round}"));
        if round > 0 {
            restore(
                &DirObjectStore::new(&bucket).expect("bucket"),
                &node,
                &RestoreOptions::default(),
            )
            .expect("restore on the next node");
            check_restored(&node, &acked, seed);
        }
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env(
                CHILD_ENV,
                format!("{}\n{}", node.display(), bucket.display()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn writer");
        // Kept open until the writer is killed: a closed pipe would end it by itself.
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let kill_after = rng.gen_range(2..12);
        let mut seen = 0;
        for line in lines.by_ref() {
            let line = line.expect("read child");
            let Some(rest) = line.strip_prefix("acked ") else {
                continue;
            };
            let fields: Vec<&str> = rest.split(' ').collect();
            let [name, from, to, crc] = fields[..] else {
                panic!("acked NAME FROM TO CRC: {line}");
            };
            acked.entry(name.to_owned()).or_default().push((
                from.parse().expect("from"),
                to.parse().expect("to"),
                crc.parse().expect("crc"),
            ));
            seen += 1;
            acknowledged += 1;
            if seen == kill_after {
                break;
            }
        }
        // The writer is in its next turn or ship now: kill it there.
        std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(0..20)));
        child.kill().expect("kill writer");
        child.wait().expect("reap writer");
        assert_eq!(seen, kill_after, "the writer died early (seed {seed})");
        drop(lines);
        std::fs::remove_dir_all(&node).expect("lose the node's disk");
    }
    let last = tmp.path().join("final");
    restore(
        &DirObjectStore::new(&bucket).expect("bucket"),
        &last,
        &RestoreOptions::default(),
    )
    .expect("final restore");
    check_restored(&last, &acked, seed);
    println!("{rounds} kills, {acknowledged} acknowledged commits, 0 lost (seed {seed})");
}

/// Every acknowledged commit of the model is in the restored store in `dir`, event for event
/// and byte for byte, and the store verifies.
fn check_restored(dir: &Path, acked: &Model, seed: u64) {
    assert_verifies(dir);
    let store = Store::open_read_only(dir, StoreOptions::default()).expect("open restored");
    for (name, commits) in acked {
        for &(from, to, crc) in commits {
            let found = events_crc(&store, name, from, to);
            assert_eq!(
                found,
                Some(crc),
                "{name}: the acknowledged events {from}..{to} are lost or differ (seed {seed})"
            );
        }
    }
}

/// How many records (header and events) session `name` has; 0 when it is missing.
fn records(store: &Store, name: &str) -> u64 {
    let reader = store.log_reader();
    reader
        .stream_id(name)
        .and_then(|id| reader.streams().into_iter().find(|s| s.id == id))
        .map_or(0, |s| s.next_seq.0)
}
