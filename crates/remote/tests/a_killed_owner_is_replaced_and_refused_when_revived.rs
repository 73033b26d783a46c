//! Node loss with real processes, a real etcd cluster and shipped commits: a writer process
//! takes the shard's lease, commits turns and waits for each to be shipped before it counts it
//! as acknowledged; it is SIGKILLed and its directory deleted. The next writer process takes
//! the lease once the old one expired, restores the shipped state, records its larger token
//! and writes on; the killed writer, revived with its old lease, is refused before it commits.
//! At the end a restore holds every acknowledged turn.
//!
//! Runs against SESSIONLOG_ETCD_ENDPOINTS (`.ci/with-etcd.sh`); without it the test says it was
//! skipped, and under CI=true it fails instead.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_verifies, small_store_options, write_turns};
use sessionlog::{Store, StoreOptions};
use sessionlog_remote::{
    newest_manifest, recorded_token, restore, DirObjectStore, Error, EtcdLeases, LeaseGrant, Owner,
    RestoreOptions, Shipper,
};

const TEST: &str = "a_killed_owner_is_replaced_and_refused_when_revived";
const ROLE_ENV: &str = "SESSIONLOG_REMOTE_OWNER_CHILD";
const TTL: Duration = Duration::from_secs(2);

fn leases() -> EtcdLeases {
    let endpoints = std::env::var("SESSIONLOG_ETCD_ENDPOINTS").expect("etcd endpoints");
    EtcdLeases::new(&endpoints.split(',').map(str::to_owned).collect::<Vec<_>>()).expect("etcd")
}

/// Records (header and events) of session `name`; 0 when missing.
fn records(store: &Store, name: &str) -> u64 {
    let reader = store.log_reader();
    reader
        .stream_id(name)
        .and_then(|id| reader.streams().into_iter().find(|s| s.id == id))
        .map_or(0, |s| s.next_seq.0)
}

/// The writer: takes the lease (waiting for an earlier owner's to expire), restores the
/// shipped state when its directory is empty, records its token, then commits one turn at a
/// time at the shipped level, its lease renewed in the background, until killed.
fn writer(shard: &str, dir: &Path, bucket: &Path) -> ! {
    let leases = leases();
    let started = Instant::now();
    let owner = loop {
        match Owner::acquire(&leases, shard, "writer", TTL) {
            Ok(owner) => break owner,
            Err(Error::Owned { .. }) if started.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("writer: acquire: {e}"),
        }
    };
    let objects = Arc::new(DirObjectStore::new(bucket).expect("bucket"));
    if newest_manifest(&*objects).expect("read manifest").is_some() {
        restore(&*objects, dir, &RestoreOptions::default()).expect("writer: restore");
    }
    let store = Store::open(dir, small_store_options()).expect("writer: open");
    owner.record_in(&store).expect("writer: record token");
    let owner = Arc::new(owner);
    let _renewer = owner.keep_alive(Arc::new(leases));
    let shipper = Shipper::owned(objects, owner.clone());
    let mut out = std::io::stdout().lock();
    // The test harness has printed `test NAME ... ` without a line end: start a fresh line.
    writeln!(out).expect("stdout");
    let grant = owner.grant();
    writeln!(out, "lease {} {}", grant.lease_id, grant.token).expect("stdout");
    for i in 0.. {
        let name = format!("s{}", i % 2);
        shipper
            .commit(&store, || -> sessionlog::Result<()> {
                write_turns(&store, &name, 1);
                Ok(())
            })
            .expect("writer: shipped commit");
        writeln!(out, "acked {name} {}", records(&store, &name)).expect("stdout");
        out.flush().expect("flush");
    }
    unreachable!("the writer loops until it is killed")
}

/// The killed writer, revived with the lease it held: it must be refused before committing.
fn revived(shard: &str, lease_id: i64, token: u64) -> ! {
    let leases = leases();
    let owner = Owner::resume(
        shard,
        LeaseGrant {
            lease_id,
            token,
            ttl: TTL,
        },
    );
    let renewed = owner.renew(&leases);
    let mut committed = false;
    let commit = owner.commit(|| -> sessionlog::Result<()> {
        committed = true;
        Ok(())
    });
    println!(
        "revived renew={} commit={} ran={committed}",
        if renewed.is_ok() { "ok" } else { "refused" },
        if commit.is_ok() { "ok" } else { "refused" },
    );
    std::process::exit(0)
}

fn spawn(role: &str) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn")
}

/// Reads the writer's lines until `acks` acknowledgements; returns its lease if it named it.
fn follow(
    lines: &mut std::io::Lines<BufReader<ChildStdout>>,
    acks: usize,
    acked: &mut BTreeMap<String, u64>,
) -> Option<(i64, u64)> {
    let mut lease = None;
    let mut seen = 0;
    while seen < acks {
        let line = lines.next().expect("writer output").expect("read");
        if let Some(rest) = line.strip_prefix("lease ") {
            let (id, token) = rest.split_once(' ').expect("lease ID TOKEN");
            lease = Some((id.parse().expect("id"), token.parse().expect("token")));
        } else if let Some(rest) = line.strip_prefix("acked ") {
            let (name, next) = rest.split_once(' ').expect("acked NAME NEXT");
            acked.insert(name.to_owned(), next.parse().expect("records"));
            seen += 1;
        }
    }
    lease
}

#[test]
fn a_killed_owner_is_replaced_and_refused_when_revived() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        let parts: Vec<&str> = role.split('\n').collect();
        match parts[..] {
            ["write", shard, dir, bucket] => writer(shard, Path::new(dir), Path::new(bucket)),
            ["revive", shard, id, token] => revived(
                shard,
                id.parse().expect("id"),
                token.parse().expect("token"),
            ),
            _ => panic!("unknown role {role:?}"),
        }
    }
    if common::etcd_endpoints(TEST).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let bucket = tmp.path().join("bucket");
    let shard = format!("{TEST}-{}-{:?}", std::process::id(), Instant::now());
    let mut acked = BTreeMap::new();
    let mut previous: Option<(i64, u64)> = None;
    for round in 0..3 {
        let node = tmp.path().join(format!("node-{round}"));
        let mut child = spawn(&format!(
            "write\n{shard}\n{}\n{}",
            node.display(),
            bucket.display()
        ));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let lease = follow(&mut lines, 3, &mut acked).expect("the writer names its lease first");
        if let Some((old_id, old_token)) = previous {
            assert!(
                lease.1 > old_token,
                "tokens grow: {} after {old_token}",
                lease.1
            );
            // The writer before, revived with its old lease while this one owns the shard.
            let reviver = spawn(&format!("revive\n{shard}\n{old_id}\n{old_token}"));
            let out = reviver.wait_with_output().expect("revived writer");
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                said.contains("revived renew=refused commit=refused ran=false"),
                "{said}"
            );
        }
        follow(&mut lines, 2, &mut acked);
        child.kill().expect("kill the writer");
        child.wait().expect("reap");
        std::fs::remove_dir_all(&node).expect("lose the node's disk");
        previous = Some(lease);
    }
    let last = tmp.path().join("final");
    restore(
        &DirObjectStore::new(&bucket).expect("bucket"),
        &last,
        &RestoreOptions::default(),
    )
    .expect("final restore");
    assert_verifies(&last);
    let store = Store::open_read_only(&last, StoreOptions::default()).expect("open");
    for (name, &next) in &acked {
        let have = records(&store, name);
        assert!(
            have >= next,
            "{name}: {have} records restored, {next} acknowledged"
        );
    }
    let newest = recorded_token(&store).expect("tokens");
    assert_eq!(
        newest,
        previous.map(|p| p.1),
        "the last owner's token is the newest recorded"
    );
}
