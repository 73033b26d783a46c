//! On an object store that ignores conditional writes (Garage does), two owners can both
//! "create" the same manifest generation: the conditional create no longer fences a stale
//! owner. A shipper made with `Shipper::pointed` publishes a manifest by moving the shard's
//! manifest pointer in a transaction that checks its lease, and names each manifest with its
//! owner's fencing token; a restore given the pointer takes the manifest it names.
//!
//! Each scenario runs against leases and pointers kept in memory with etcd's rules, and
//! against a real etcd cluster (three members on loopback in CI, started by
//! `.ci/with-etcd.sh`, found through SESSIONLOG_ETCD_ENDPOINTS; without it the etcd tests say
//! they were skipped, and under CI=true they fail instead). The object store is a directory
//! behind a wrapper that, like Garage, writes `put_if_absent` over whatever is there.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{
    fingerprint, fingerprint_of_open, small_store_options, stale_writer_ships_after_a_new_one,
    write_turns, StaleShip,
};
use parking_lot::Mutex;
use sessionlog::Store;
use sessionlog_remote::{
    newest_manifest, pointed_manifest, restore, DirObjectStore, Error, LeaseGrant, LeaseService,
    ManifestPointers, ObjectStore, Owner, PublishedManifest, RestoreOptions, ShardPointer, Shipper,
};

/// An object store that ignores the condition of a conditional create, as Garage 2.5 does:
/// `put_if_absent` writes over an existing object and reports success.
#[derive(Debug)]
struct IgnoresConditions(DirObjectStore);

impl ObjectStore for IgnoresConditions {
    fn put(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<()> {
        self.0.put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> sessionlog_remote::Result<bool> {
        self.0.put(key, bytes).map(|()| true)
    }
    fn get(&self, key: &str) -> sessionlog_remote::Result<Option<Bytes>> {
        self.0.get(key)
    }
    fn list(&self, dir: &str) -> sessionlog_remote::Result<Vec<String>> {
        self.0.list(dir)
    }
    fn delete(&self, key: &str) -> sessionlog_remote::Result<()> {
        self.0.delete(key)
    }
    fn location(&self) -> String {
        self.0.location()
    }
}

/// Leases and manifest pointers in memory, with etcd's rules: one live lease holds a shard,
/// tokens grow with every grant, a revoked lease holds nothing, and a pointer moves only
/// while the writer's lease holds the shard and the pointer says what the writer read.
#[derive(Debug, Default)]
struct MemoryLeases {
    state: Mutex<Leases>,
    /// Pointer moves to fail with an error (as with etcd out of reach) before any succeeds.
    failing_moves: Mutex<usize>,
}

#[derive(Debug, Default)]
struct Leases {
    revision: u64,
    /// Shard -> the lease holding it.
    holders: HashMap<String, i64>,
    pointers: HashMap<String, PublishedManifest>,
}

impl LeaseService for MemoryLeases {
    fn acquire(
        &self,
        shard: &str,
        _node: &str,
        ttl: Duration,
    ) -> sessionlog_remote::Result<LeaseGrant> {
        let mut state = self.state.lock();
        if state.holders.contains_key(shard) {
            return Err(Error::Owned {
                shard: shard.to_owned(),
            });
        }
        state.revision += 1;
        let lease_id = state.revision as i64;
        state.holders.insert(shard.to_owned(), lease_id);
        Ok(LeaseGrant {
            lease_id,
            token: state.revision,
            ttl,
        })
    }
    fn renew(&self, lease_id: i64) -> sessionlog_remote::Result<bool> {
        Ok(self.state.lock().holders.values().any(|&l| l == lease_id))
    }
    fn release(&self, lease_id: i64) -> sessionlog_remote::Result<()> {
        self.state.lock().holders.retain(|_, l| *l != lease_id);
        Ok(())
    }
}

impl ManifestPointers for MemoryLeases {
    fn read(&self, shard: &str) -> sessionlog_remote::Result<Option<PublishedManifest>> {
        Ok(self.state.lock().pointers.get(shard).copied())
    }
    fn advance(
        &self,
        shard: &str,
        lease_id: i64,
        from: Option<PublishedManifest>,
        to: PublishedManifest,
    ) -> sessionlog_remote::Result<bool> {
        {
            let mut failing = self.failing_moves.lock();
            if *failing > 0 {
                *failing -= 1;
                return Err(Error::LeaseService {
                    op: "advance".into(),
                    message: "out of reach".into(),
                });
            }
        }
        let mut state = self.state.lock();
        if state.holders.get(shard) != Some(&lease_id) || state.pointers.get(shard).copied() != from
        {
            return Ok(false);
        }
        state.pointers.insert(shard.to_owned(), to);
        Ok(true)
    }
}

/// A lease service that is also where the pointers live, as etcd is for both.
trait LeasesAndPointers: LeaseService + ManifestPointers {}
impl<T: LeaseService + ManifestPointers> LeasesAndPointers for T {}

/// A long lease: the stale owner's own deadline must not stop it before the pointer does.
const TTL: Duration = Duration::from_secs(60);

/// The scenario: owner A ships; A's lease is revoked under it (its own deadline still says
/// valid); owner B takes the shard, restores through the pointer, writes and ships; A, unaware,
/// ships generation 2 too. A is refused, and every restore through the pointer (and the newest
/// listed manifest) is B's.
fn a_stale_owner_is_refused_by_the_pointer(
    leases: Arc<dyn LeasesAndPointers>,
    pointers: Arc<dyn ManifestPointers>,
    shard: &str,
    objects: Arc<dyn ObjectStore>,
) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let with_pointer = RestoreOptions {
        pointer: Some(ShardPointer {
            pointers: pointers.clone(),
            shard: shard.to_owned(),
        }),
        ..RestoreOptions::default()
    };

    let a = Arc::new(Owner::acquire(&*leases, shard, "node-a", TTL).expect("a acquires"));
    let old = Store::open(tmp.path().join("old-owner"), small_store_options()).expect("open");
    write_turns(&old, "s", 6);
    let a_shipper = Shipper::pointed(objects.clone(), a.clone(), pointers.clone());
    let first = a_shipper.ship(&old.log_reader()).expect("a ships");
    assert_eq!(first.generation, 1);
    assert_eq!(
        pointers.read(shard).expect("read the pointer"),
        Some(PublishedManifest {
            generation: 1,
            fencing_token: a.token()
        })
    );

    // A's lease goes (revoked, as after a partition the lease service saw first); A's own
    // deadline has not passed, so only the lease service knows.
    leases
        .release(a.grant().lease_id)
        .expect("revoke a's lease");
    a.check().expect("a still counts its lease valid");

    let b = Arc::new(Owner::acquire(&*leases, shard, "node-b", TTL).expect("b acquires"));
    assert!(b.token() > a.token());
    let new_dir = tmp.path().join("new-owner");
    restore(&*objects, &new_dir, &with_pointer).expect("b restores");
    let new = Store::open(&new_dir, small_store_options()).expect("open restored");
    write_turns(&new, "s", 2);
    let b_shipper = Shipper::pointed(objects.clone(), b.clone(), pointers.clone());
    let second = b_shipper.ship(&new.log_reader()).expect("b ships");
    assert_eq!(second.generation, 2);
    let expected = fingerprint_of_open(&new);

    // A commits more and ships generation 2 as well: its manifest object is written (the
    // store does not refuse it), but the pointer does not move to it.
    write_turns(&old, "s", 3);
    let err = a_shipper.ship(&old.log_reader()).unwrap_err();
    assert!(matches!(err, Error::Fenced { generation: 2, .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::Refused);
    let stale = objects
        .list("manifests")
        .expect("list")
        .into_iter()
        .filter(|k| k.contains(&format!("-{:020}.", a.token())))
        .count();
    assert_eq!(stale, 2, "a's two manifests are objects of their own");
    old.close().expect("close");

    let pointed = pointed_manifest(&*objects, &*pointers, shard)
        .expect("read")
        .expect("a manifest");
    assert_eq!((pointed.generation, pointed.fencing_token), (2, b.token()));
    let listed = newest_manifest(&*objects)
        .expect("list")
        .expect("a manifest");
    assert_eq!(
        (listed.generation, listed.fencing_token),
        (2, b.token()),
        "of two manifests of one generation, the listing takes the newer owner's"
    );
    let check = tmp.path().join("check");
    restore(&*objects, &check, &with_pointer).expect("restore through the pointer");
    assert_eq!(fingerprint(&check), expected, "b's history stands");

    // B ships on, and a shipper B makes anew (after a restart) continues from the pointer.
    write_turns(&new, "s", 1);
    assert_eq!(
        b_shipper.ship(&new.log_reader()).expect("ship").generation,
        3
    );
    write_turns(&new, "s", 1);
    let again = Shipper::pointed(objects.clone(), b.clone(), pointers.clone());
    assert_eq!(again.ship(&new.log_reader()).expect("ship").generation, 4);
    let expected = fingerprint_of_open(&new);
    new.close().expect("close");
    let last = tmp.path().join("last");
    restore(&*objects, &last, &with_pointer).expect("restore");
    assert_eq!(fingerprint(&last), expected);
    // Manifests older than the one before the newest are gone, of either owner.
    let mut generations: Vec<String> = objects.list("manifests").expect("list");
    generations.sort();
    assert!(
        generations
            .iter()
            .all(|k| !k.contains("/00000000000000000001")),
        "{generations:?}"
    );
    leases.release(b.grant().lease_id).expect("release");
}

/// A directory whose conditional creates write over what is there, as Garage's do.
fn garage_like(tmp: &tempfile::TempDir) -> Arc<dyn ObjectStore> {
    Arc::new(IgnoresConditions(
        DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"),
    ))
}

#[test]
fn a_stale_owner_is_refused_by_a_pointer_kept_in_memory() {
    let leases = Arc::new(MemoryLeases::default());
    let tmp = tempfile::tempdir().expect("tempdir");
    a_stale_owner_is_refused_by_the_pointer(leases.clone(), leases, "shard-1", garage_like(&tmp));
}

#[test]
fn without_a_pointer_a_store_that_ignores_conditions_lets_a_stale_owner_replace_history() {
    // The hazard the pointer removes, shown on the same wrapper: two writers with generation
    // numbers only, and the stale one's manifest replaces the new one's.
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = garage_like(&tmp);
    let StaleShip { stale, .. } = stale_writer_ships_after_a_new_one(&objects, tmp.path());
    assert!(
        stale.is_ok(),
        "the store took the stale manifest: {stale:?}"
    );
    let newest = newest_manifest(&*objects).expect("list").expect("manifest");
    assert_eq!(
        newest.fencing_token, 1,
        "the stale owner's generation 2 replaced the new owner's"
    );
}

#[test]
fn a_location_moves_to_a_pointer_and_another_shards_name_is_refused_there() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects: Arc<dyn ObjectStore> = Arc::new(IgnoresConditions(
        DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"),
    ));
    let leases = Arc::new(MemoryLeases::default());
    let through = |shard: &str| RestoreOptions {
        pointer: Some(ShardPointer {
            pointers: leases.clone(),
            shard: shard.to_owned(),
        }),
        ..RestoreOptions::default()
    };
    // Shipped without a pointer first: generation 1 under a plain key.
    let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
    write_turns(&store, "s", 3);
    Shipper::new(objects.clone(), 0)
        .ship(&store.log_reader())
        .expect("ship");
    // A restore through a shard without a pointer still finds it (nothing was ever pointed).
    restore(&*objects, &tmp.path().join("r1"), &through("shard-1")).expect("restore");

    // Then through the pointer of shard-1: the generations go on.
    let owner = Arc::new(Owner::acquire(&*leases, "shard-1", "node", TTL).expect("acquire"));
    write_turns(&store, "s", 1);
    let shipper = Shipper::pointed(objects.clone(), owner.clone(), leases.clone());
    assert_eq!(
        shipper.ship(&store.log_reader()).expect("ship").generation,
        2
    );
    let expected = fingerprint_of_open(&store);
    let r2 = tmp.path().join("r2");
    restore(&*objects, &r2, &through("shard-1")).expect("restore");
    assert_eq!(fingerprint(&r2), expected);

    // Another shard's name there is refused, for a restore and for a ship alike: it would
    // read, or fork, a history its pointer does not name.
    let err = restore(&*objects, &tmp.path().join("r3"), &through("shard-2")).unwrap_err();
    assert!(matches!(err, Error::NoManifestPointer { .. }), "{err}");
    assert_eq!(err.class(), sessionlog::ErrorClass::NotFound);
    assert!(!tmp.path().join("r3").exists());
    let other = Arc::new(Owner::acquire(&*leases, "shard-2", "node", TTL).expect("acquire"));
    let err = Shipper::pointed(objects.clone(), other, leases.clone())
        .ship(&store.log_reader())
        .unwrap_err();
    assert!(matches!(err, Error::NoManifestPointer { .. }), "{err}");
    assert_eq!(
        leases.read("shard-1").expect("read").map(|p| p.generation),
        Some(2),
        "shard-1's pointer did not move"
    );
    store.close().expect("close");
}

#[test]
fn a_ship_whose_pointer_move_failed_is_shipped_by_the_next_one() {
    // The manifest object of the failed attempt is there; the next attempt writes the same
    // generation under the same key, on a store that honours conditional creates as on one
    // that does not.
    for honours_conditions in [true, false] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let objects: Arc<dyn ObjectStore> = if honours_conditions {
            Arc::new(DirObjectStore::new(tmp.path().join("bucket")).expect("bucket"))
        } else {
            garage_like(&tmp)
        };
        let leases = Arc::new(MemoryLeases::default());
        let owner = Arc::new(Owner::acquire(&*leases, "shard", "node", TTL).expect("acquire"));
        let store = Store::open(tmp.path().join("store"), small_store_options()).expect("open");
        let shipper = Shipper::pointed(objects.clone(), owner.clone(), leases.clone());
        write_turns(&store, "s", 3);
        assert_eq!(
            shipper.ship(&store.log_reader()).expect("ship").generation,
            1
        );
        write_turns(&store, "s", 2);
        *leases.failing_moves.lock() = 1;
        let err = shipper.ship(&store.log_reader()).unwrap_err();
        assert!(matches!(err, Error::LeaseService { .. }), "{err}");
        assert_eq!(
            leases.read("shard").expect("read").map(|p| p.generation),
            Some(1),
            "not shipped while the pointer did not move"
        );
        let reader = store.log_reader();
        let generation = shipper
            .ship_through(&reader, reader.durable_lsn())
            .expect("the next ship publishes");
        assert_eq!(generation, 2, "conditions honoured: {honours_conditions}");
        let expected = fingerprint_of_open(&store);
        store.close().expect("close");
        let target = tmp.path().join("restored");
        let options = RestoreOptions {
            pointer: Some(ShardPointer {
                pointers: leases.clone(),
                shard: "shard".into(),
            }),
            ..RestoreOptions::default()
        };
        restore(&*objects, &target, &options).expect("restore");
        assert_eq!(fingerprint(&target), expected);
    }
}

#[test]
fn a_pointer_refuses_a_writer_whose_lease_no_longer_holds_the_shard_or_that_read_an_old_value() {
    let leases = MemoryLeases::default();
    pointer_rules(&leases, &leases, "shard-rules");
}

/// The pointer's own rules, through any implementation.
fn pointer_rules(leases: &dyn LeaseService, pointers: &dyn ManifestPointers, shard: &str) {
    let one = |g, t| PublishedManifest {
        generation: g,
        fencing_token: t,
    };
    assert_eq!(pointers.read(shard).expect("read"), None);
    let a = leases.acquire(shard, "a", TTL).expect("a acquires");
    assert!(pointers
        .advance(shard, a.lease_id, None, one(1, a.token))
        .expect("advance"));
    // From a value it no longer holds: refused, nothing changes.
    assert!(!pointers
        .advance(shard, a.lease_id, None, one(2, a.token))
        .expect("advance"));
    assert!(!pointers
        .advance(shard, a.lease_id, Some(one(7, a.token)), one(2, a.token))
        .expect("advance"));
    assert_eq!(pointers.read(shard).expect("read"), Some(one(1, a.token)));
    assert!(pointers
        .advance(shard, a.lease_id, Some(one(1, a.token)), one(2, a.token))
        .expect("advance"));
    // A lease that no longer holds the shard moves nothing, even from the right value.
    leases.release(a.lease_id).expect("release");
    assert!(!pointers
        .advance(shard, a.lease_id, Some(one(2, a.token)), one(3, a.token))
        .expect("advance"));
    let b = leases.acquire(shard, "b", TTL).expect("b acquires");
    assert!(!pointers
        .advance(shard, a.lease_id, Some(one(2, a.token)), one(3, a.token))
        .expect("advance"));
    // The pointer outlives the lease that moved it; the new owner moves it on.
    assert_eq!(pointers.read(shard).expect("read"), Some(one(2, a.token)));
    assert!(pointers
        .advance(shard, b.lease_id, Some(one(2, a.token)), one(3, b.token))
        .expect("advance"));
    assert_eq!(pointers.read(shard).expect("read"), Some(one(3, b.token)));
    leases.release(b.lease_id).expect("release");
}

#[test]
fn a_stale_owner_is_refused_by_the_etcd_pointer() {
    let test = "a_stale_owner_is_refused_by_the_etcd_pointer";
    let Some(etcd) = common::etcd_cluster(test) else {
        return;
    };
    let etcd = Arc::new(etcd);
    let tmp = tempfile::tempdir().expect("tempdir");
    a_stale_owner_is_refused_by_the_pointer(
        etcd.clone(),
        etcd,
        &common::unique(test),
        garage_like(&tmp),
    );
}

/// The same with the objects on the S3 server of SESSIONLOG_S3_ENDPOINT: SeaweedFS in CI
/// (which honours conditional creates: the pointer must fence on its own either way), Garage
/// in the Garage job (`.ci/garage-job.sh`, which does not).
#[test]
fn a_stale_owner_is_refused_by_the_etcd_pointer_on_an_s3_server() {
    let test = "a_stale_owner_is_refused_by_the_etcd_pointer_on_an_s3_server";
    let Some(etcd) = common::etcd_cluster(test) else {
        return;
    };
    let Some(s3) = common::s3_server(test) else {
        return;
    };
    let objects: Arc<dyn ObjectStore> = s3;
    let etcd = Arc::new(etcd);
    a_stale_owner_is_refused_by_the_pointer(
        etcd.clone(),
        etcd,
        &common::unique(test),
        objects.clone(),
    );
    common::remove_shipped(&*objects);
}

#[test]
fn the_etcd_pointer_keeps_the_pointer_rules() {
    let test = "the_etcd_pointer_keeps_the_pointer_rules";
    let Some(etcd) = common::etcd_cluster(test) else {
        return;
    };
    pointer_rules(&etcd, &etcd, &common::unique(test));
}
