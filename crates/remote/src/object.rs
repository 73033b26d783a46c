//! The object store seam: the five operations shipping and restore need, with an
//! implementation over a local directory (tests, and a mounted shared file system) and one
//! over S3 ([`crate::S3ObjectStore`]).
//!
//! Keys are relative, `/`-separated, and never start with `/` (`manifests/…`, `segments/…`);
//! an implementation places them under its own root or prefix.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::error::{Error, Result};

/// Where shipped objects live. Every call blocks until it is done.
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Stores `bytes` under `key`, replacing any object there. An object is visible whole or
    /// not at all.
    fn put(&self, key: &str, bytes: Bytes) -> Result<()>;
    /// Stores `bytes` under `key` only if no object is there: `Ok(false)` when one is, and
    /// nothing is written then.
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool>;
    /// The object under `key`, or `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<Bytes>>;
    /// The keys of every object whose key starts with `dir` followed by `/`, in any order.
    fn list(&self, dir: &str) -> Result<Vec<String>>;
    /// Removes the object under `key`; removing a missing object succeeds.
    fn delete(&self, key: &str) -> Result<()>;
    /// Where the objects are, for messages (`s3://bucket/prefix`, a directory path).
    fn location(&self) -> String;
}

/// Objects as files under a root directory: `key` is the file `root/key`. Writes go to a
/// temporary file that is synced and then renamed (or, for [`ObjectStore::put_if_absent`],
/// hard-linked, which fails when the name exists), so a crash never leaves a partial object
/// under its key. Temporary files are named `*.partial-…` and never listed.
#[derive(Debug)]
pub struct DirObjectStore {
    root: PathBuf,
}

const PARTIAL_MARK: &str = ".partial-";

static PARTIAL_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DirObjectStore {
    /// Objects under `root`, which is created when missing.
    pub fn new(root: impl Into<PathBuf>) -> Result<DirObjectStore> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(crate::error::io_err("create", &root))?;
        Ok(DirObjectStore { root })
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        let valid = !key.is_empty()
            && !key.starts_with('/')
            && key
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if !valid {
            return Err(Error::ObjectStore {
                op: "use",
                key: key.to_owned(),
                message: "not a valid object key".into(),
            });
        }
        Ok(self.root.join(key))
    }

    /// Writes `bytes` to a fresh temporary file beside `path`, synced.
    fn write_partial(&self, key: &str, path: &Path, bytes: &[u8]) -> Result<PathBuf> {
        let parent = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(|e| self.failed("put", key, e))?;
        let n = PARTIAL_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!("{PARTIAL_MARK}{}-{n}", std::process::id()));
        let partial = parent.join(name);
        let write = || -> std::io::Result<()> {
            let mut file = File::create(&partial)?;
            file.write_all(bytes)?;
            file.sync_all()
        };
        write().map_err(|e| self.failed("put", key, e))?;
        Ok(partial)
    }

    fn sync_parent(&self, key: &str, path: &Path) -> Result<()> {
        let parent = path.parent().unwrap_or(&self.root);
        File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.failed("put", key, e))
    }

    fn failed(&self, op: &'static str, key: &str, e: std::io::Error) -> Error {
        Error::ObjectStore {
            op,
            key: key.to_owned(),
            message: format!("{} (in {})", e, self.root.display()),
        }
    }
}

impl ObjectStore for DirObjectStore {
    fn put(&self, key: &str, bytes: Bytes) -> Result<()> {
        let path = self.path(key)?;
        let partial = self.write_partial(key, &path, &bytes)?;
        fs::rename(&partial, &path).map_err(|e| self.failed("put", key, e))?;
        self.sync_parent(key, &path)
    }

    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<bool> {
        let path = self.path(key)?;
        let partial = self.write_partial(key, &path, &bytes)?;
        let linked = fs::hard_link(&partial, &path);
        let _ = fs::remove_file(&partial);
        match linked {
            Ok(()) => self.sync_parent(key, &path).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.failed("put", key, e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let path = self.path(key)?;
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.failed("get", key, e)),
        }
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let path = self.path(dir)?;
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.failed("list", dir, e)),
        };
        let mut keys = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.failed("list", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                if !name.contains(PARTIAL_MARK) {
                    keys.push(format!("{dir}/{name}"));
                }
            }
        }
        Ok(keys)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("delete", key, e)),
        }
    }

    fn location(&self) -> String {
        self.root.display().to_string()
    }
}
