//! Restore: a shipped state written into an empty directory, verified, then put in place
//! whole. design: docs/distributed.md#restore

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sessionlog_format::segment_file_name;
use sessionlog_log::{verify_store, Append, Durability, Log, LogOptions, RealStorage, Seq};

use crate::error::{io_err, Error, Result};
use crate::manifest::{store_id_hex, Manifest, ObjectRef, CACHE_DIR};
use crate::object::ObjectStore;
use crate::parallel;
use crate::pointer::ManifestPointers;
use crate::ship::newest_generation;

/// How often a restore starts over from a newer manifest when an object of the one it read
/// was removed meanwhile (a ship deletes the objects of manifests two generations old).
const RESTORE_ATTEMPTS: usize = 3;

/// Records copied per batch when chosen sessions are copied into a new store.
const COPY_BATCH_RECORDS: usize = 512;
/// Payload bytes per batch when chosen sessions are copied into a new store.
const COPY_BATCH_BYTES: usize = 1 << 20;

/// What to restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// The sessions (catalog names) to restore; empty restores the whole store.
    pub sessions: Vec<String>,
    /// Log options of the new store that chosen sessions are copied into.
    pub log: LogOptions,
    /// For a location shipped to by a [`Shipper::pointed`](crate::Shipper::pointed): the
    /// manifest pointers and the shard, so that the manifest restored is the one the pointer
    /// names, not the newest listed. design: docs/distributed.md#manifest-pointer
    pub pointer: Option<ShardPointer>,
}

/// The manifest pointer of one shard.
#[derive(Debug, Clone)]
pub struct ShardPointer {
    /// Where the pointers live.
    pub pointers: Arc<dyn ManifestPointers>,
    /// The shard.
    pub shard: String,
}

impl ShardPointer {
    /// The manifest the pointer names (see [`crate::pointed_manifest`]).
    fn manifest(&self, objects: &dyn ObjectStore) -> Result<Option<Manifest>> {
        crate::pointed_manifest(objects, &*self.pointers, &self.shard)
    }

    /// The generation the pointer names, or the newest listed while there is no pointer.
    fn generation(&self, objects: &dyn ObjectStore) -> Result<Option<u64>> {
        match self.pointers.read(&self.shard)? {
            Some(p) => Ok(Some(p.generation)),
            None => newest_generation(objects),
        }
    }
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The manifest restored.
    pub generation: u64,
    /// Segment files written (of the shipped state).
    pub segments: usize,
    /// Bytes downloaded and verified.
    pub bytes: u64,
    /// Checkpoint files written (none when chosen sessions are restored).
    pub checkpoints: usize,
    /// Live streams in the restored store.
    pub sessions: usize,
}

/// Restores the newest shipped state at `objects` into `target`, an empty or absent
/// directory. Every object is checked against its manifest entry, the restored store is
/// verified, and only then does it appear under `target`.
pub fn restore(
    objects: &dyn ObjectStore,
    target: &Path,
    options: &RestoreOptions,
) -> Result<RestoreReport> {
    check_target(target)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let newest = match &options.pointer {
            Some(pointer) => pointer.manifest(objects)?,
            None => crate::newest_manifest(objects)?,
        };
        let manifest = newest.ok_or_else(|| Error::NothingShipped {
            location: objects.location(),
        })?;
        let generation = manifest.generation;
        let now_newest = || match &options.pointer {
            Some(pointer) => pointer.generation(objects),
            None => newest_generation(objects),
        };
        match restore_manifest(objects, &manifest, target, options) {
            Err(Error::MissingObject { .. })
                if attempt < RESTORE_ATTEMPTS && now_newest()? != Some(generation) => {}
            result => return result,
        }
    }
}

fn check_target(target: &Path) -> Result<()> {
    match fs::read_dir(target).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::TargetNotEmpty {
            path: target.to_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(Error::TargetNotEmpty {
            path: target.to_owned(),
        }),
        Err(e) => Err(io_err("read", target)(e)),
    }
}

/// A directory beside `target` that is removed again unless [`Staging::keep`] is called.
struct Staging {
    path: PathBuf,
    keep: bool,
}

impl Staging {
    fn beside(target: &Path, what: &str) -> Result<Staging> {
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let path = target.with_file_name(format!("{name}.{what}-{}", std::process::id()));
        if path.exists() {
            fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
        }
        fs::create_dir_all(&path).map_err(io_err("create", &path))?;
        Ok(Staging { path, keep: false })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

fn restore_manifest(
    objects: &dyn ObjectStore,
    manifest: &Manifest,
    target: &Path,
    options: &RestoreOptions,
) -> Result<RestoreReport> {
    let staging = Staging::beside(target, "restoring")?;
    let mut bytes = fetch_segments(objects, manifest, &staging.path)?;
    let mut checkpoints = 0;
    if options.sessions.is_empty() && !manifest.cache.is_empty() {
        let cache = staging.path.join(CACHE_DIR);
        fs::create_dir_all(&cache).map_err(io_err("create", &cache))?;
        for checkpoint in &manifest.cache {
            let data = fetch(objects, &checkpoint.object, manifest.generation)?;
            bytes += data.len() as u64;
            write_synced(&cache.join(&checkpoint.file), &data)?;
            checkpoints += 1;
        }
        sync_dir(&cache)?;
    }
    sync_dir(&staging.path)?;
    let sessions = check_restored(&staging.path, manifest)?;
    let mut report = RestoreReport {
        generation: manifest.generation,
        segments: manifest.segments.len(),
        bytes,
        checkpoints,
        sessions,
    };
    let restored = if options.sessions.is_empty() {
        staging
    } else {
        let chosen = Staging::beside(target, "restoring-sessions")?;
        report.sessions = copy_sessions(&staging.path, &chosen.path, options)?;
        drop(staging);
        chosen
    };
    put_in_place(restored, target)?;
    Ok(report)
}

/// Downloads every segment object of `manifest` into its segment file in `dir`, several at a
/// time, each written at its offset as soon as it is checked, then syncs every file. Returns
/// the bytes written.
fn fetch_segments(objects: &dyn ObjectStore, manifest: &Manifest, dir: &Path) -> Result<u64> {
    let mut files = Vec::with_capacity(manifest.segments.len());
    let mut work = Vec::new();
    for segment in &manifest.segments {
        let path = dir.join(segment_file_name(segment.id));
        let file = File::create(&path).map_err(io_err("create", &path))?;
        let index = files.len();
        files.push((path, file));
        work.extend(segment.objects.iter().map(|object| (index, object)));
    }
    // Largest first, so one big object does not start last and run alone.
    work.sort_by_key(|(_, object)| std::cmp::Reverse(object.length));
    let written = parallel::for_each(&work, |&(index, object)| {
        let (path, file) = &files[index];
        let data = fetch(objects, object, manifest.generation)?;
        file.write_all_at(&data, object.offset)
            .map_err(io_err("write", path))?;
        Ok(data.len() as u64)
    })?;
    for (path, file) in &files {
        file.sync_all().map_err(io_err("sync", path))?;
    }
    Ok(written.iter().sum())
}

/// Downloads `object` and checks it against its manifest entry.
fn fetch(objects: &dyn ObjectStore, object: &ObjectRef, generation: u64) -> Result<Bytes> {
    let data = objects
        .get(&object.key)?
        .ok_or_else(|| Error::MissingObject {
            key: object.key.clone(),
            generation,
        })?;
    let crc32 = crc32fast::hash(&data);
    if data.len() as u64 != object.length || crc32 != object.crc32 {
        return Err(Error::ObjectMismatch {
            key: object.key.clone(),
            what: format!(
                "{} bytes with CRC-32 {crc32:08x}, the manifest says {} bytes with {:08x}",
                data.len(),
                object.length,
                object.crc32
            ),
        });
    }
    Ok(data)
}

/// Verifies every segment of the restored store and that it is the store the manifest
/// names; returns its live stream count.
fn check_restored(dir: &Path, manifest: &Manifest) -> Result<usize> {
    let report = verify_store(Arc::new(RealStorage), dir)?;
    if let Some(damage) = report.damages.first() {
        return Err(Error::RestoredDamaged {
            detail: format!(
                "segment {} offset {}: {}",
                damage.segment.0, damage.offset, damage.what
            ),
        });
    }
    let log = Log::open_read_only(dir, LogOptions::default())?;
    let found = store_id_hex(log.store_id());
    if found != manifest.store_id {
        return Err(Error::RestoredDamaged {
            detail: format!(
                "its segments belong to store {found}, the manifest names {}",
                manifest.store_id
            ),
        });
    }
    Ok(log.streams().len())
}

/// Copies the chosen sessions, record for record, from the store in `from` into a new store
/// in `to`; returns how many were copied.
fn copy_sessions(from: &Path, to: &Path, options: &RestoreOptions) -> Result<usize> {
    let source = Log::open_read_only(from, LogOptions::default())?;
    let streams: Vec<_> = options
        .sessions
        .iter()
        .map(|name| {
            source
                .stream_id(name)
                .and_then(|id| source.stream_info(id))
                .ok_or_else(|| Error::NoSuchSession(name.clone()))
        })
        .collect::<Result<_>>()?;
    let dest = Log::open(to, options.log.clone())?;
    for info in &streams {
        let stream = dest.create_stream(&info.name)?;
        let mut records = source.iter(info.id, Seq(0), info.next_seq).peekable();
        while records.peek().is_some() {
            let mut batch = Vec::new();
            let mut payload_bytes = 0;
            while batch.len() < COPY_BATCH_RECORDS && payload_bytes < COPY_BATCH_BYTES {
                let Some(record) = records.next() else { break };
                let record = record?;
                payload_bytes += record.payload.len();
                batch.push(record);
            }
            let appends: Vec<Append<'_>> = batch
                .iter()
                .map(|r| Append {
                    stream,
                    kind: r.kind,
                    flags: r.flags,
                    payload: &r.payload,
                    expected_seq: Some(r.seq),
                })
                .collect();
            dest.commit(&appends, Durability::Buffered)?;
        }
    }
    dest.flush()?;
    dest.close()?;
    Ok(streams.len())
}

/// Moves the finished staging directory to `target` (replacing an empty directory there).
fn put_in_place(mut staging: Staging, target: &Path) -> Result<()> {
    if target.exists() {
        fs::remove_dir(target).map_err(io_err("replace", target))?;
    }
    fs::rename(&staging.path, target).map_err(io_err("rename into place", target))?;
    staging.keep = true;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    sync_dir(&parent)
}

fn write_synced(path: &Path, data: &[u8]) -> Result<()> {
    let mut file = File::create(path).map_err(io_err("create", path))?;
    file.write_all(data).map_err(io_err("write", path))?;
    file.sync_all().map_err(io_err("sync", path))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", dir))
}
