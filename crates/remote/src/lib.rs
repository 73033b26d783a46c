//! Beyond one machine: a sessionlog store shipped to object storage and restored elsewhere.
//!
//! A [`Shipper`] uploads a store's sealed segments, the durable tail of its active segment
//! and its session checkpoints, then writes a manifest that makes that state exist: a crash
//! before the manifest leaves the previous shipped state whole. [`restore`] writes the newest
//! shipped state (or chosen sessions of it) into an empty directory, checking every object
//! against its checksum and verifying the result before it appears under its name. Object
//! storage sits behind the [`ObjectStore`] trait: [`S3ObjectStore`] (S3-compatible services)
//! and [`DirObjectStore`] (a local directory). The design, including the parts not built yet,
//! is `docs/distributed.md`.

#![forbid(unsafe_code)]

mod error;
mod manifest;
mod object;
mod owner;
mod parallel;
mod pointer;
mod restore;
mod s3;
mod ship;

use std::sync::Arc;

pub use error::{Error, Result};
pub use manifest::{
    Manifest, ObjectRef, ShippedCheckpoint, ShippedSegment, ShippedStream, MANIFEST_FORMAT,
    SHIPPED_DIRS,
};
pub use object::{DirObjectStore, ObjectStore};
pub use owner::{
    recorded_token, EtcdLeases, LeaseGrant, LeaseService, Owner, Renewer, OWNER_STREAM,
};
pub use pointer::{ManifestPointers, PublishedManifest};
pub use restore::{restore, RestoreOptions, RestoreReport, ShardPointer};
pub use s3::{S3Config, S3ObjectStore};
pub use ship::{ShipReport, ShipSource, Shipper, MAX_TAIL_PARTS};

/// The object store a location names: `s3://BUCKET/PREFIX` (with `s3` filling in endpoint,
/// region and credentials the URL cannot hold), or `file://DIR` for a local directory.
pub fn open_location(url: &str, s3: S3Config) -> Result<Arc<dyn ObjectStore>> {
    if let Some(dir) = url.strip_prefix("file://") {
        if dir.is_empty() {
            return Err(Error::BadLocation {
                url: url.to_owned(),
                reason: "it names no directory".into(),
            });
        }
        return Ok(Arc::new(DirObjectStore::new(dir)?));
    }
    let located = S3Config::from_url(url)?;
    let config = S3Config {
        bucket: located.bucket,
        prefix: located.prefix,
        ..s3
    };
    Ok(Arc::new(S3ObjectStore::new(&config)?))
}

/// The newest manifest at `objects`, if anything was shipped there, found by listing the
/// manifests (of a location shipped to under a manifest pointer, see [`pointed_manifest`]).
pub fn newest_manifest(objects: &dyn ObjectStore) -> Result<Option<Manifest>> {
    match ship::newest_listed(objects)? {
        Some((generation, key)) => ship::read_manifest_at(objects, &key, generation).map(Some),
        None => Ok(None),
    }
}

/// The manifest the pointer of `shard` in `pointers` names: how a location shipped to by a
/// [`Shipper::pointed`] is read. While the shard has no pointer, the newest manifest listed
/// (a location shipped to before it was shipped through a pointer), unless the location holds
/// manifests written under a pointer: then the shard named is not the one that shipped there
/// ([`Error::NoManifestPointer`]). design: docs/distributed.md#manifest-pointer
pub fn pointed_manifest(
    objects: &dyn ObjectStore,
    pointers: &dyn ManifestPointers,
    shard: &str,
) -> Result<Option<Manifest>> {
    match pointers.read(shard)? {
        Some(p) => {
            let key = manifest::pointed_manifest_key(p.generation, p.fencing_token);
            ship::read_manifest_at(objects, &key, p.generation).map(Some)
        }
        None => match ship::newest_listed(objects)? {
            Some((_, key))
                if manifest::manifest_key_parts(&key).is_some_and(|(_, t)| t.is_some()) =>
            {
                Err(Error::NoManifestPointer {
                    shard: shard.to_owned(),
                    location: objects.location(),
                })
            }
            Some((generation, key)) => ship::read_manifest_at(objects, &key, generation).map(Some),
            None => Ok(None),
        },
    }
}
