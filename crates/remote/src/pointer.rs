//! Manifest pointers: the newest shipped generation of a shard kept in the lease service,
//! for object stores that ignore conditional writes (Garage). There, two writers can both
//! "create" manifest `g + 1`; the pointer is what decides which one is shipped: it moves only
//! in a transaction that also checks the writer's lease, and a restore reads it instead of
//! listing manifests. design: docs/distributed.md#manifest-pointer

use crate::error::Result;

/// What a manifest pointer says: the newest published manifest's generation and the fencing
/// token of the owner that wrote it (which names its object, see
/// docs/distributed.md#manifest-pointer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PublishedManifest {
    /// The manifest's generation.
    pub generation: u64,
    /// The fencing token of the owner that wrote it.
    pub fencing_token: u64,
}

/// Where shards' manifest pointers live: beside the leases, so that moving a pointer and
/// checking the lease are one transaction.
pub trait ManifestPointers: Send + Sync + std::fmt::Debug {
    /// The pointer of `shard`, or `None` when nothing was published under a pointer yet.
    fn read(&self, shard: &str) -> Result<Option<PublishedManifest>>;

    /// Moves the pointer of `shard` from `from` (`None`: there is no pointer yet) to `to`, in
    /// one transaction that succeeds only while the lease `lease_id` holds the shard and the
    /// pointer still says `from`. `Ok(false)` when either no longer holds: another owner took
    /// the shard, or published meanwhile; nothing changed then.
    fn advance(
        &self,
        shard: &str,
        lease_id: i64,
        from: Option<PublishedManifest>,
        to: PublishedManifest,
    ) -> Result<bool>;
}
