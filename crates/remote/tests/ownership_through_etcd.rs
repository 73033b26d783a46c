//! Ownership through a real etcd cluster (three members on loopback in CI, started by
//! `.ci/with-etcd.sh`): one owner per shard at a time, each new owner with a larger fencing
//! token; a writer whose lease lapsed stops before its next commit; after node loss a new
//! owner takes the lease, restores from object storage, finds every shipped commit, and the
//! old owner, revived with its old lease, is refused.
//!
//! The cluster is found through SESSIONLOG_ETCD_ENDPOINTS. Without it these tests say they
//! were skipped; under CI=true they fail instead.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_verifies, small_store_options, write_turns};
use sessionlog::Store;
use sessionlog_remote::{
    recorded_token, restore, DirObjectStore, Error, EtcdLeases, LeaseService, Owner,
    RestoreOptions, Shipper,
};

const TTL: Duration = Duration::from_secs(2);

/// Acquires `shard` for `node`, waiting (up to 15 s) for an earlier owner's lease to expire.
fn acquire_when_free(leases: &EtcdLeases, shard: &str, node: &str) -> Owner {
    let started = Instant::now();
    loop {
        match Owner::acquire(leases, shard, node, TTL) {
            Ok(owner) => return owner,
            Err(Error::Owned { .. }) if started.elapsed() < Duration::from_secs(15) => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("acquire {shard}: {e}"),
        }
    }
}

#[test]
fn one_owner_at_a_time_each_with_a_larger_token() {
    let test = "one_owner_at_a_time_each_with_a_larger_token";
    let Some(leases) = common::etcd_cluster(test) else {
        return;
    };
    let shard = common::unique(test);
    let a = Owner::acquire(&leases, &shard, "node-a", TTL).expect("a acquires");
    let err = Owner::acquire(&leases, &shard, "node-b", TTL).unwrap_err();
    assert!(matches!(err, Error::Owned { .. }), "{err}");
    a.renew(&leases).expect("a renews");
    a.check().expect("a is still the owner");
    let token_a = a.token();
    a.release(&leases).expect("a releases");
    let b = Owner::acquire(&leases, &shard, "node-b", TTL).expect("b acquires once a released");
    assert!(b.token() > token_a, "{} > {token_a}", b.token());
    b.release(&leases).expect("release");
}

#[test]
fn a_writer_whose_lease_lapsed_stops_before_its_next_commit() {
    let test = "a_writer_whose_lease_lapsed_stops_before_its_next_commit";
    let Some(leases) = common::etcd_cluster(test) else {
        return;
    };
    let shard = common::unique(test);
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    let owner = Owner::acquire(&leases, &shard, "node-a", TTL).expect("acquire");
    owner.record_in(&store).expect("record the token");
    assert_eq!(recorded_token(&store).expect("read"), Some(owner.token()));
    owner
        .commit(|| -> sessionlog::Result<()> {
            write_turns(&store, "s", 1);
            Ok(())
        })
        .expect("commit while the lease is valid");

    // No renewal: the lease lapses, by the writer's own clock first.
    std::thread::sleep(TTL);
    let mut ran = false;
    let err = owner
        .commit(|| -> sessionlog::Result<()> {
            ran = true;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    assert!(
        !ran,
        "the commit must not run once the lease may have lapsed"
    );
    // Renewing cannot bring it back: etcd expires it too, and another node takes the shard.
    let other = acquire_when_free(&leases, &shard, "node-b");
    assert!(other.token() > owner.token());
    assert!(owner.renew(&leases).is_err());
    assert!(owner.check().is_err());
    other.release(&leases).expect("release");
    store.close().expect("close");
}

#[test]
fn after_node_loss_the_new_owner_restores_every_shipped_commit_and_the_old_one_is_refused() {
    let test = "after_node_loss_the_new_owner_restores_every_shipped_commit";
    let Some(leases) = common::etcd_cluster(test) else {
        return;
    };
    let shard = common::unique(test);
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));

    // Node A owns the shard, commits at the shipped level, then is lost with its disk.
    let node_a = tmp.path().join("node-a");
    let store_a = Store::open(&node_a, small_store_options()).expect("open a");
    let owner_a = Owner::acquire(&leases, &shard, "node-a", TTL).expect("a acquires");
    owner_a.record_in(&store_a).expect("record a");
    let shipper_a = Shipper::new(objects.clone(), owner_a.token());
    for _ in 0..5 {
        owner_a.renew(&leases).expect("a renews");
        owner_a
            .commit(|| -> sessionlog::Result<()> {
                write_turns(&store_a, "s", 2);
                Ok(())
            })
            .expect("a commits");
        let reader = store_a.log_reader();
        shipper_a
            .ship_through(&reader, reader.durable_lsn())
            .expect("a ships");
    }
    let acknowledged = store_a.export_dsh("s").expect("export");
    drop(store_a);
    std::fs::remove_dir_all(&node_a).expect("lose node a");

    // An owner whose token is older than the next one of this shard (granted before it, for
    // another shard): the log refuses it once a newer token is recorded there.
    let older = Owner::acquire(
        &leases,
        &format!("{shard}-other"),
        "node-c",
        Duration::from_secs(30),
    )
    .expect("older token");

    // Node B takes the lease once A's expired, restores, and records its larger token.
    let owner_b = acquire_when_free(&leases, &shard, "node-b");
    assert!(owner_b.token() > owner_a.token());
    let node_b = tmp.path().join("node-b");
    restore(&*objects, &node_b, &RestoreOptions::default()).expect("b restores");
    assert_verifies(&node_b);
    let store_b = Store::open(&node_b, small_store_options()).expect("open b");
    assert_eq!(store_b.export_dsh("s").expect("export"), acknowledged);
    owner_b.record_in(&store_b).expect("record b");
    let shipper_b = Shipper::new(objects.clone(), owner_b.token());
    owner_b
        .commit(|| -> sessionlog::Result<()> {
            write_turns(&store_b, "s", 1);
            Ok(())
        })
        .expect("b commits");
    shipper_b.ship(&store_b.log_reader()).expect("b ships");

    // A, revived with its old lease: refused by the lease, by the log and by the bucket.
    assert!(matches!(
        owner_a.renew(&leases),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(owner_a.check(), Err(Error::LeaseLost { .. })));
    let err = Owner::acquire(&leases, &shard, "node-a", TTL).unwrap_err();
    assert!(matches!(err, Error::Owned { .. }), "{err}");
    store_b.close().expect("close b");
    let store_b = Store::open(&node_b, small_store_options()).expect("reopen b");
    let err = owner_a.record_in(&store_b).unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    let err = older.record_in(&store_b).unwrap_err();
    assert!(matches!(err, Error::StaleOwner { .. }), "{err}");
    assert_eq!(
        recorded_token(&store_b).expect("read"),
        Some(owner_b.token())
    );
    store_b.close().expect("close");
    owner_b.release(&leases).expect("release");
    older.release(&leases).expect("release");
}

/// The manifests at `objects`, counted.
fn manifests(objects: &DirObjectStore) -> usize {
    use sessionlog_remote::ObjectStore;
    objects.list("manifests").expect("list manifests").len()
}

/// Tries a shipped commit of one turn; whether the commit itself ran, and the outcome.
fn try_shipped_commit(shipper: &Shipper, store: &Store) -> (bool, Result<(), Error>) {
    let mut ran = false;
    let outcome = shipper.commit(store, || -> sessionlog::Result<()> {
        ran = true;
        write_turns(store, "s", 1);
        Ok(())
    });
    (ran, outcome)
}

#[test]
fn a_live_writer_whose_lease_is_revoked_stops_before_its_next_commit_and_ship() {
    let test = "a_live_writer_whose_lease_is_revoked_stops_before_its_next_commit_and_ship";
    let Some(leases) = common::etcd_cluster(test) else {
        return;
    };
    let leases = Arc::new(leases);
    let shard = common::unique(test);
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    let owner = Arc::new(Owner::acquire(&*leases, &shard, "node-a", TTL).expect("acquire"));
    owner.record_in(&store).expect("record the token");
    let renewer = owner.keep_alive(leases.clone());
    let shipper = Shipper::owned(objects.clone(), owner.clone());

    // The background renewals keep the lease alive well past its TTL.
    let started = Instant::now();
    while started.elapsed() < TTL * 2 {
        let (ran, outcome) = try_shipped_commit(&shipper, &store);
        assert!(ran);
        outcome.expect("a shipped commit while the renewer keeps the lease");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(renewer.is_running());
    let shipped = manifests(&objects);
    assert!(shipped > 0);
    let acknowledged = store.export_dsh("s").expect("export");

    // Another client revokes the lease under the live writer.
    leases.release(owner.grant().lease_id).expect("revoke");
    let revoked = Instant::now();
    while renewer.is_running() {
        assert!(
            revoked.elapsed() < TTL,
            "the renewer must notice the revoked lease within one renewal interval"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(owner.is_lost());
    let (ran, outcome) = try_shipped_commit(&shipper, &store);
    assert!(!ran, "the commit must not run once the lease is lost");
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    // Nor does the shipper ship anything: write a local commit behind the owner's back and
    // try to ship it.
    write_turns(&store, "s", 1);
    let err = shipper.ship(&store.log_reader()).unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    assert_eq!(manifests(&objects), shipped, "no manifest after the loss");
    let restored = tmp.path().join("restored");
    restore(&*objects, &restored, &RestoreOptions::default()).expect("restore");
    let restored_store = Store::open_read_only(&restored, small_store_options()).expect("open");
    assert_eq!(
        restored_store.export_dsh("s").expect("export"),
        acknowledged,
        "the shipped state ends with the last acknowledged commit"
    );
    // The shard is free at once.
    let next = Owner::acquire(&*leases, &shard, "node-b", TTL).expect("b acquires");
    assert!(next.token() > owner.token());
    next.release(&*leases).expect("release");
    drop(renewer);
    store.close().expect("close");
}

#[test]
fn a_writer_cut_off_from_etcd_stops_committing_before_another_node_can_take_the_shard() {
    let test = "a_writer_cut_off_from_etcd_stops_committing_before_another_node_can_take_over";
    let Some(leases) = common::etcd_cluster(test) else {
        return;
    };
    let shard = common::unique(test);
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"));
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    let owner = Arc::new(Owner::acquire(&leases, &shard, "node-a", TTL).expect("acquire"));
    // The writer's renewals go to an address where no etcd answers: a partition between the
    // writer and etcd, while etcd itself (and node b) carry on.
    let unreachable = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = socket.local_addr().expect("address");
        drop(socket);
        EtcdLeases::new(&[format!("http://{address}")]).expect("endpoint")
    };
    let renewer = owner.keep_alive(Arc::new(unreachable));
    let shipper = Shipper::owned(objects.clone(), owner.clone());

    let started = Instant::now();
    let mut first_refused: Option<Instant> = None;
    let mut last_ran: Option<Instant> = None;
    let taken_over = loop {
        let (ran, outcome) = try_shipped_commit(&shipper, &store);
        if ran {
            assert!(first_refused.is_none(), "a lost lease stays lost");
            match outcome {
                Ok(()) => last_ran = Some(Instant::now()),
                // The lease lapsed between the commit and its ship: written locally, never
                // acknowledged as shipped, and the last commit that ran.
                Err(Error::LeaseLost { .. }) => {
                    first_refused.get_or_insert_with(Instant::now);
                }
                Err(e) => panic!("a shipped commit while the lease is valid: {e}"),
            }
        } else {
            let err = outcome.unwrap_err();
            assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
            first_refused.get_or_insert_with(Instant::now);
        }
        let asked = Instant::now();
        match Owner::acquire(&leases, &shard, "node-b", TTL) {
            Ok(next) => break (asked, next),
            Err(Error::Owned { .. }) => {}
            Err(e) => panic!("b acquires: {e}"),
        }
        assert!(
            asked.duration_since(started) < TTL * 10,
            "b never took the shard"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (asked, next) = taken_over;
    let first_refused = first_refused.expect("the writer was refused before b took the shard");
    assert!(
        first_refused < asked,
        "the writer stopped before another node could own the shard"
    );
    assert!(
        last_ran.is_some(),
        "the writer committed while its lease was valid"
    );
    assert!(!renewer.is_running());
    assert!(next.token() > owner.token());
    let (ran, _) = try_shipped_commit(&shipper, &store);
    assert!(!ran);
    next.release(&leases).expect("release");
    drop(renewer);
    store.close().expect("close");
}
