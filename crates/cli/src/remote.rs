//! `ship` and `restore`: a store to S3-compatible object storage and back
//! (docs/distributed.md).

use std::io;
use std::path::Path;

use clap::Args;
use sessionlog_log::Access;
use sessionlog_remote::{
    open_location, restore as restore_store, RestoreOptions, S3Config, Shipper,
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

impl From<sessionlog_remote::Error> for Failure {
    fn from(e: sessionlog_remote::Error) -> Self {
        Failure::new(exit_code(e.class()), e.to_string())
    }
}

/// Ships the store in `dir` to `to`.
pub(crate) fn ship(dir: &Path, to: &str, s3: S3Args) -> Result<u8, Failure> {
    let objects = open_location(to, s3.config())?;
    let store = open_store(dir, Access::Existing)?;
    let report = Shipper::new(objects, 0).ship(&store.log_reader())?;
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
) -> Result<u8, Failure> {
    let objects = open_location(from, s3.config())?;
    let options = RestoreOptions {
        sessions,
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
