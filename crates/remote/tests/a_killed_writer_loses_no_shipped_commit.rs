//! Node loss, with real process kills: a writer process commits turns and waits for each to
//! be shipped before it counts it as acknowledged; it is SIGKILLed at a random point (often in
//! the middle of a ship) and its local directory deleted. A restore on "another node" then
//! holds every acknowledged turn and verifies, and a writer there continues the same shipped
//! history, to be killed in turn.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{assert_verifies, small_store_options, write_turns};
use rand::{Rng, SeedableRng};
use sessionlog::{Store, StoreOptions};
use sessionlog_remote::{restore, DirObjectStore, RestoreOptions, Shipper};

const CHILD_ENV: &str = "SESSIONLOG_REMOTE_KILL_CHILD";
const TEST_NAME: &str = "a_killed_writer_loses_no_shipped_commit";
const SESSIONS: usize = 3;

/// The writer: commits one turn at a time to a rotating session and, once a manifest covers
/// it, prints `acked NAME NEXT_SEQ`. Runs until killed.
fn writer(store_dir: &Path, bucket: &Path) -> ! {
    let store = Store::open(store_dir, small_store_options()).expect("child: open");
    let shipper = Shipper::new(Arc::new(DirObjectStore::new(bucket).expect("bucket")), 0);
    let mut out = std::io::stdout().lock();
    // The test harness has printed `test NAME ... ` without a line end: start a fresh line.
    writeln!(out).expect("stdout");
    for i in 0.. {
        let name = format!("s{}", i % SESSIONS);
        write_turns(&store, &name, 1);
        let reader = store.log_reader();
        shipper
            .ship_through(&reader, reader.durable_lsn())
            .expect("child: ship");
        writeln!(out, "acked {name} {}", records(&store, &name)).expect("child: stdout");
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
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    let rounds = 6;
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
            let (name, next) = rest.split_once(' ').expect("acked NAME NEXT");
            acked.insert(name.to_owned(), next.parse().expect("seq"));
            seen += 1;
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
}

fn check_restored(dir: &Path, acked: &BTreeMap<String, u64>, seed: u64) {
    assert_verifies(dir);
    let store = Store::open_read_only(dir, StoreOptions::default()).expect("open restored");
    for (name, &next) in acked {
        let have = records(&store, name);
        assert!(
            have >= next,
            "{name}: {have} events restored, {next} acknowledged (seed {seed})"
        );
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
