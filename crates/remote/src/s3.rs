//! [`ObjectStore`] over S3-compatible object storage, through the `object_store` crate.
//!
//! `object_store` is asynchronous; each call here runs on a current-thread tokio runtime that
//! this type owns, so callers (and the rest of sessionlog) stay synchronous and no runtime
//! leaks out of this crate.

use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, ObjectStore as _, ObjectStoreExt as _, PutMode, PutOptions, PutPayload,
    RetryConfig,
};

use crate::error::{Error, Result};
use crate::object::ObjectStore;

/// Where and how to reach an S3 bucket. Fields left `None` come from the usual `AWS_*`
/// environment variables (`AWS_ENDPOINT_URL` or `AWS_ENDPOINT`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`).
/// Credentials must be given (here or in the environment), or `AWS_SKIP_SIGNATURE=true` set:
/// the client never asks an instance metadata service for them.
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    /// The bucket.
    pub bucket: String,
    /// The key prefix every object of the store goes under, without leading or trailing `/`.
    pub prefix: String,
    /// The service's URL, e.g. `http://127.0.0.1:8333`; plain `http` is allowed for it.
    pub endpoint: Option<String>,
    /// The region (`us-east-1` when neither this nor the environment names one).
    pub region: Option<String>,
    /// The access key id.
    pub access_key_id: Option<String>,
    /// The secret access key.
    pub secret_access_key: Option<String>,
}

impl S3Config {
    /// Bucket and prefix from `s3://BUCKET/PREFIX` (the prefix may be empty).
    pub fn from_url(url: &str) -> Result<S3Config> {
        let bad = |reason: &str| Error::BadLocation {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("it does not start with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("it names no bucket"));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") || prefix.contains("//") {
            return Err(bad("the prefix has an empty, `.` or `..` part"));
        }
        Ok(S3Config {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            ..S3Config::default()
        })
    }
}

/// Objects in an S3 bucket under a prefix.
#[derive(Debug)]
pub struct S3ObjectStore {
    inner: AmazonS3,
    prefix: String,
    location: String,
    runtime: tokio::runtime::Runtime,
}

impl S3ObjectStore {
    /// A client for `config`. Makes no request yet.
    pub fn new(config: &S3Config) -> Result<S3ObjectStore> {
        let location = if config.prefix.is_empty() {
            format!("s3://{}", config.bucket)
        } else {
            format!("s3://{}/{}", config.bucket, config.prefix)
        };
        let bad = |reason: String| Error::BadLocation {
            url: location.clone(),
            reason,
        };
        // Fail within seconds when the service is down: a commit waiting for the shipped
        // level must learn it cannot be shipped, not hang for minutes of retries.
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(15),
            ..RetryConfig::default()
        };
        let endpoint = config
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT").ok());
        let allow_http = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"))
            || std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v == "true");
        // Client options first: setting them replaces every client option set before.
        let client = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(60))
            .with_allow_http(allow_http);
        let mut builder = AmazonS3Builder::from_env()
            .with_client_options(client)
            .with_retry(retry)
            .with_bucket_name(&config.bucket);
        if let Some(endpoint) = &endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let region = config
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok());
        builder = builder.with_region(region.unwrap_or_else(|| "us-east-1".into()));
        if let Some(key) = &config.access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &config.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        // Without credentials the S3 client would fall back to asking the cloud's instance
        // metadata service (a link-local address) for some; a store only ever uses what it
        // is given, so that is refused here instead of sent.
        let env_set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
        let has_key = config.access_key_id.is_some() || env_set("AWS_ACCESS_KEY_ID");
        let has_secret = config.secret_access_key.is_some() || env_set("AWS_SECRET_ACCESS_KEY");
        let unsigned = std::env::var("AWS_SKIP_SIGNATURE").is_ok_and(|v| v == "true");
        if !(unsigned || has_key && has_secret) {
            return Err(bad(
                "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \
                 (or --access-key-id and --secret-access-key), or AWS_SKIP_SIGNATURE=true for a \
                 bucket that takes unsigned requests"
                    .to_owned(),
            ));
        }
        let inner = builder.build().map_err(|e| bad(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| bad(format!("cannot start its I/O runtime: {e}")))?;
        Ok(S3ObjectStore {
            inner,
            prefix: config.prefix.clone(),
            location,
            runtime,
        })
    }

    fn path(&self, key: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.prefix))
        }
    }

    fn failed(&self, op: &'static str, key: &str, e: object_store::Error) -> Error {
        // The service's answer (an XML document) may span lines; an error is one line.
        let message = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        Error::ObjectStore {
            op,
            key: format!("{}/{key}", self.location),
            message,
        }
    }
}

impl ObjectStore for S3ObjectStore {
    fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        let path = self.path(key);
        self.runtime
            .block_on(self.inner.put(&path, PutPayload::from(bytes)))
            .map(|_| ())
            .map_err(|e| self.failed("put", key, e))
    }

    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool> {
        let path = self.path(key);
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = self.inner.put_opts(&path, PutPayload::from(bytes), options);
        match self.runtime.block_on(put) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(self.failed("put", key, e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let path = self.path(key);
        let get = async {
            let result = self.inner.get(&path).await?;
            result.bytes().await
        };
        match self.runtime.block_on(get) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("get", key, e)),
        }
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let path = self.path(dir);
        let listing = self.inner.list(Some(&path)).try_collect::<Vec<_>>();
        let metas = self
            .runtime
            .block_on(listing)
            .map_err(|e| self.failed("list", dir, e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        Ok(metas
            .into_iter()
            .filter_map(|m| m.location.as_ref().strip_prefix(&strip).map(str::to_owned))
            .filter(|k| k.strip_prefix(dir).is_some_and(|r| r.starts_with('/')))
            .collect())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        match self.runtime.block_on(self.inner.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed("delete", key, e)),
        }
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}
