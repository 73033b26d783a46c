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
mod restore;
mod s3;
mod ship;

use std::sync::Arc;

pub use error::{Error, Result};
pub use manifest::{
    Manifest, ObjectRef, ShippedCheckpoint, ShippedSegment, ShippedStream, MANIFEST_FORMAT,
};
pub use object::{DirObjectStore, ObjectStore};
pub use owner::{
    recorded_token, EtcdLeases, LeaseGrant, LeaseService, Owner, Renewer, OWNER_STREAM,
};
pub use restore::{restore, RestoreOptions, RestoreReport};
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

/// The newest manifest at `objects`, if anything was shipped there.
pub fn newest_manifest(objects: &dyn ObjectStore) -> Result<Option<Manifest>> {
    match ship::newest_generation(objects)? {
        Some(generation) => ship::read_manifest(objects, generation).map(Some),
        None => Ok(None),
    }
}
