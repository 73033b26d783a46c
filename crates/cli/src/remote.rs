//! `ship` and `restore`: a store to S3-compatible object storage and back
//! (docs/distributed.md).

use std::io;
use std::path::Path;

use clap::Args;
use sessionlog_log::Access;
use std::sync::Arc;
use std::time::Duration;

use sessionlog_remote::{
    open_location, restore as restore_store, EtcdLeases, LeaseService, Owner, RestoreOptions,
    S3Config, ShardPointer, Shipper,
};

use crate::{exit_code, open_store, out, Failure};

/// Endpoint and credentials; each falls back to the usual `AWS_*` environment variable.
#[derive(Args, Debug)]
pub(crate) struct S3Args {
    /// The S3 service URL, e.g. http://127.0.0.1:8333 (else AWS_ENDPOINT_URL or AWS_ENDPOINT;
    /// AWS itself when none is set).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The region (else AWS_REGION, else us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// The access key id (else AWS_ACCESS_KEY_ID).
    #[arg(long, value_name = "ID")]
    access_key_id: Option<String>,
    /// The secret access key (else AWS_SECRET_ACCESS_KEY, which keeps it out of the process
    /// list).
    #[arg(long, value_name = "KEY")]
    secret_access_key: Option<String>,
}

impl S3Args {
    fn config(self) -> S3Config {
        S3Config {
            endpoint: self.endpoint,
            region: self.region,
            access_key_id: self.access_key_id,
            secret_access_key: self.secret_access_key,
            ..S3Config::default()
        }
    }
}

/// The shard's lease and manifest pointer in etcd, for locations on object stores that
/// ignore conditional writes (Garage). design: docs/distributed.md#manifest-pointer
#[derive(Args, Debug)]
pub(crate) struct PointerArgs {
    /// etcd members, comma-separated http://HOST:PORT (else SESSIONLOG_ETCD_ENDPOINTS). With
    /// --shard: `ship` takes the shard's lease for the ship and publishes through the
    /// shard's manifest pointer; `restore` restores the manifest the pointer names.
    #[arg(long, value_name = "ENDPOINTS", requires = "shard")]
    etcd: Option<String>,
    /// The shard the store is (its lease and manifest pointer are kept under this name).
    #[arg(long, value_name = "NAME")]
    shard: Option<String>,
}

impl PointerArgs {
    /// The etcd client and shard, when a shard is named.
    fn etcd(self) -> Result<Option<(EtcdLeases, String)>, Failure> {
        let Some(shard) = self.shard else {
            return Ok(None);
        };
        let endpoints = self
            .etcd
            .or_else(|| std::env::var("SESSIONLOG_ETCD_ENDPOINTS").ok())
            .ok_or_else(|| {
                Failure::new(
                    2,
                    "--shard needs etcd: give --etcd http://HOST:PORT[,...] or set SESSIONLOG_ETCD_ENDPOINTS"
                        .to_owned(),
                )
            })?;
        let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
        Ok(Some((EtcdLeases::new(&endpoints)?, shard)))
    }
}

/// The lease `ship --shard` holds while it ships: long enough for a large first ship, renewed
/// meanwhile.
const SHIP_LEASE: Duration = Duration::from_secs(30);

impl From<sessionlog_remote::Error> for Failure {
    fn from(e: sessionlog_remote::Error) -> Self {
        Failure::new(exit_code(e.class()), e.to_string())
    }
}

/// Ships the store in `dir` to `to`; with a shard, as the shard's owner for the ship (its
/// lease taken, its token recorded in the store) and through its manifest pointer.
pub(crate) fn ship(dir: &Path, to: &str, s3: S3Args, pointer: PointerArgs) -> Result<u8, Failure> {
    let objects = open_location(to, s3.config())?;
    let etcd = pointer.etcd()?;
    let store = open_store(dir, Access::Existing)?;
    let report = match etcd {
        None => Shipper::new(objects, 0).ship(&store.log_reader())?,
        Some((etcd, shard)) => {
            let node = format!("sessionlog-cli-{}", std::process::id());
            let etcd = Arc::new(etcd);
            let owner = Arc::new(Owner::acquire(&*etcd, &shard, &node, SHIP_LEASE)?);
            let shipped = (|| {
                owner.record_in(&store)?;
                let _renewer = owner.keep_alive(etcd.clone());
                Shipper::pointed(objects, owner.clone(), etcd.clone()).ship(&store.log_reader())
            })();
            // The lease goes with the ship, whatever it did.
            let _ = LeaseService::release(&*etcd, owner.grant().lease_id);
            shipped?
        }
    };
    store.close()?;
    let line = if report.wrote_manifest {
        format!(
            "shipped generation {} to {to}: {} segments, {} objects ({} bytes) uploaded, {} old objects deleted\n",
            report.generation,
            report.segments,
            report.uploaded_objects,
            report.uploaded_bytes,
            report.deleted_objects
        )
    } else {
        format!(
            "nothing new to ship: generation {} at {to} is current\n",
            report.generation
        )
    };
    out(&mut io::stdout().lock(), line.as_bytes())?;
    Ok(0)
}

/// Restores the newest shipped state at `from` (or only `sessions`) into `dir`.
pub(crate) fn restore(
    from: &str,
    dir: &Path,
    sessions: Vec<String>,
    s3: S3Args,
    pointer: PointerArgs,
) -> Result<u8, Failure> {
    let objects = open_location(from, s3.config())?;
    let pointer = pointer.etcd()?.map(|(etcd, shard)| ShardPointer {
        pointers: Arc::new(etcd),
        shard,
    });
    let options = RestoreOptions {
        sessions,
        pointer,
        ..RestoreOptions::default()
    };
    let report = restore_store(&*objects, dir, &options)?;
    let line = format!(
        "restored generation {} from {from} into {}: {} segments, {} bytes, {} checkpoints, {} sessions\n",
        report.generation,
        dir.display(),
        report.segments,
        report.bytes,
        report.checkpoints,
        report.sessions
    );
    out(&mut io::stdout().lock(), line.as_bytes())?;
    Ok(0)
}
