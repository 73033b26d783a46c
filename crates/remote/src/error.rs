//! The one error type of shipping and restore.

use std::path::PathBuf;

use sessionlog_log::ErrorClass;

/// Result of shipping and restore.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while shipping or restoring a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object store failed or could not be reached.
    #[error("object storage could not {op} `{key}`: {message}; check the endpoint, bucket and credentials, then retry")]
    ObjectStore {
        /// What was attempted (`put`, `get`, `list`, `delete`).
        op: &'static str,
        /// The object key (or prefix, for a listing).
        key: String,
        /// The underlying error.
        message: String,
    },
    /// A local file could not be read or written.
    #[error("could not {action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The location holds no manifest.
    #[error("nothing has been shipped to {location}: it holds no manifest (check the bucket and prefix)")]
    NothingShipped {
        /// The location, as the user gave it.
        location: String,
    },
    /// The location was shipped through manifest pointers, and the shard named has none.
    #[error("{location} was shipped through a manifest pointer, but shard `{shard}` has none: check the shard name")]
    NoManifestPointer {
        /// The shard named.
        shard: String,
        /// The location.
        location: String,
    },
    /// A manifest does not decode or breaks a manifest rule.
    #[error("manifest `{key}` is not valid ({reason}); the shipped state is damaged: ship the store again")]
    BadManifest {
        /// The manifest's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An object a manifest names is missing.
    #[error("object `{key}` named by manifest generation {generation} is missing; if another process is shipping there, retry; otherwise ship the store again")]
    MissingObject {
        /// Its key.
        key: String,
        /// The manifest naming it.
        generation: u64,
    },
    /// An object's bytes do not match its manifest entry.
    #[error("object `{key}` does not match its manifest ({what}); the shipped state is damaged: ship the store again")]
    ObjectMismatch {
        /// Its key.
        key: String,
        /// The length or checksum found and expected.
        what: String,
    },
    /// The location holds another store's shipped state.
    #[error("{location} holds the shipped state of store {theirs}, not of this store ({ours}); ship each store to a prefix of its own")]
    ForeignStore {
        /// The location.
        location: String,
        /// The store id found there.
        theirs: String,
        /// This store's id.
        ours: String,
    },
    /// Another writer wrote the manifest generation this ship meant to write.
    #[error("another writer shipped manifest generation {generation} to {location} first; stop writing this store: it no longer owns that location")]
    Fenced {
        /// The generation taken.
        generation: u64,
        /// The location.
        location: String,
    },
    /// The restore target exists and is not an empty directory.
    #[error("{path} is not empty; restore into an empty or absent directory")]
    TargetNotEmpty {
        /// The target.
        path: PathBuf,
    },
    /// A session asked for is not in the shipped state.
    #[error("no session named `{0}` in the shipped state")]
    NoSuchSession(String),
    /// The restored files do not verify.
    #[error("the restored store does not verify ({detail}); the shipped state is damaged: ship the store again")]
    RestoredDamaged {
        /// The first damage found.
        detail: String,
    },
    /// An object storage location that cannot be used.
    #[error("cannot use `{url}` as an object storage location: {reason}")]
    BadLocation {
        /// The location as given.
        url: String,
        /// Why not.
        reason: String,
    },
    /// `ship_through` was asked for a commit that is not durable locally.
    #[error("the commit at log position {lsn:#x} is not durable locally; commit it with Durability::Sync before waiting for it to be shipped")]
    NotDurable {
        /// The commit's log position.
        lsn: u64,
    },
    /// Shipping was asked of a store opened read-only.
    #[error("a store opened read-only cannot be shipped (it cannot tell which bytes are durable); open it for writing")]
    ReadOnlySource,
    /// The store kept rolling segments while it was being shipped.
    #[error("the store kept changing while it was being shipped (segments rolled or were reclaimed meanwhile); retry")]
    StoreChanging,
    /// The lease service failed or could not be reached.
    #[error("the lease service could not {op}: {message}; check the etcd endpoints")]
    LeaseService {
        /// The request.
        op: String,
        /// What went wrong, per endpoint tried last.
        message: String,
    },
    /// Another node holds the shard's lease.
    #[error(
        "shard `{shard}` is owned by another node; wait for its lease to expire, then try again"
    )]
    Owned {
        /// The shard.
        shard: String,
    },
    /// This writer's lease expired or was not renewed: it must not write any more.
    #[error("the lease on shard `{shard}` (fencing token {token}) is lost; stop writing: another node may own the shard now")]
    LeaseLost {
        /// The shard.
        shard: String,
        /// The lost lease's token.
        token: u64,
    },
    /// The store already holds a record of a later owner.
    #[error("the store of shard `{shard}` records fencing token {recorded}, not older than this owner's {token}; this owner is stale and must not write")]
    StaleOwner {
        /// The shard.
        shard: String,
        /// This owner's token.
        token: u64,
        /// The newest token the store records.
        recorded: u64,
    },
    /// A thread uploading or downloading objects stopped without finishing its work.
    #[error("a thread transferring objects stopped unexpectedly; retry the ship or restore")]
    WorkerPanicked,
    /// The log failed.
    #[error(transparent)]
    Log(#[from] sessionlog_log::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] sessionlog::Error),
}

impl Error {
    /// The class of this error, which the CLI turns into its exit code.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::ObjectStore { .. } | Error::Io { .. } | Error::BadLocation { .. } => {
                ErrorClass::Environment
            }
            Error::NothingShipped { .. }
            | Error::NoManifestPointer { .. }
            | Error::NoSuchSession(_) => ErrorClass::NotFound,
            Error::BadManifest { .. }
            | Error::MissingObject { .. }
            | Error::ObjectMismatch { .. }
            | Error::RestoredDamaged { .. } => ErrorClass::Damaged,
            Error::ForeignStore { .. }
            | Error::Fenced { .. }
            | Error::TargetNotEmpty { .. }
            | Error::NotDurable { .. }
            | Error::ReadOnlySource => ErrorClass::Refused,
            Error::StoreChanging | Error::Owned { .. } => ErrorClass::Busy,
            Error::LeaseService { .. } | Error::WorkerPanicked => ErrorClass::Environment,
            Error::LeaseLost { .. } | Error::StaleOwner { .. } => ErrorClass::Refused,
            Error::Log(e) => e.class(),
            Error::Store(e) => e.class(),
        }
    }
}

/// Wraps an I/O error with what was done to which path.
pub(crate) fn io_err(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}
