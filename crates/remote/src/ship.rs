//! Shipping: uploading what is new in a store, then the manifest that makes it a shipped
//! state. design: docs/distributed.md#shipping

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::Mutex;
use sessionlog_format::{parse_segment_file_name, segment_file_name};
use sessionlog_log::{Log, Lsn, StreamInfo};

use crate::error::{io_err, Error, Result};
use crate::manifest::{
    cache_key, is_checkpoint_file, manifest_key, manifest_key_parts, pointed_manifest_key,
    segment_key, store_id_hex, tail_key, Manifest, ObjectRef, ShippedCheckpoint, ShippedSegment,
    ShippedStream, CACHE_DIR, MANIFEST_DIR, MANIFEST_FORMAT, SEGMENT_DIR, TAIL_DIR,
};
use crate::object::ObjectStore;
use crate::owner::Owner;
use crate::parallel;
use crate::pointer::{ManifestPointers, PublishedManifest};

/// An active segment shipped in more parts than this is shipped again as one part.
pub const MAX_TAIL_PARTS: usize = 64;

/// Queued upload bytes at which a ship sends what it queued before it reads more files.
const SEND_AT_BYTES: usize = 64 << 20;

/// How often a ship starts over when the store rolled a segment under it.
const PLAN_ATTEMPTS: usize = 5;

/// What a ship reads from a store: its directory, identity, durable position and streams.
/// Implemented for the log and for a [`sessionlog::Store`]'s [`sessionlog::LogReader`].
pub trait ShipSource {
    /// The store directory.
    fn dir(&self) -> &Path;
    /// The store id.
    fn store_id(&self) -> [u8; 16];
    /// The log position up to which everything is durable.
    fn durable_lsn(&self) -> Lsn;
    /// The live streams.
    fn streams(&self) -> Vec<StreamInfo>;
    /// Whether the store was opened read-only (then nothing is known durable: refused).
    fn is_read_only(&self) -> bool;
}

impl ShipSource for Log {
    fn dir(&self) -> &Path {
        Log::dir(self)
    }
    fn store_id(&self) -> [u8; 16] {
        Log::store_id(self)
    }
    fn durable_lsn(&self) -> Lsn {
        Log::durable_lsn(self)
    }
    fn streams(&self) -> Vec<StreamInfo> {
        Log::streams(self)
    }
    fn is_read_only(&self) -> bool {
        Log::is_read_only(self)
    }
}

impl ShipSource for sessionlog::LogReader<'_> {
    fn dir(&self) -> &Path {
        sessionlog::LogReader::dir(self)
    }
    fn store_id(&self) -> [u8; 16] {
        sessionlog::LogReader::store_id(self)
    }
    fn durable_lsn(&self) -> Lsn {
        sessionlog::LogReader::durable_lsn(self)
    }
    fn streams(&self) -> Vec<StreamInfo> {
        sessionlog::LogReader::streams(self)
    }
    fn is_read_only(&self) -> bool {
        sessionlog::LogReader::is_read_only(self)
    }
}

/// What one ship did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipReport {
    /// The generation of the newest manifest after the ship.
    pub generation: u64,
    /// The log position that manifest reaches.
    pub durable_lsn: Lsn,
    /// Whether a new manifest was written (false: nothing had changed).
    pub wrote_manifest: bool,
    /// Segments in the shipped state.
    pub segments: usize,
    /// Data objects uploaded by this ship.
    pub uploaded_objects: usize,
    /// Bytes of those objects.
    pub uploaded_bytes: u64,
    /// Objects no kept manifest names that this ship deleted.
    pub deleted_objects: usize,
    /// Deletes that failed (the objects stay as garbage for a later ship).
    pub failed_deletes: usize,
}

/// Ships one store to one location. Concurrent callers of [`Shipper::ship_through`] share
/// ships (group shipping): a caller whose commit a ship in flight covers waits for that ship.
/// Ships run in two stages, pipelined: while one ship writes its manifest, the next one
/// already uploads its objects; manifests are written one at a time, in the order their ships
/// were planned.
#[derive(Debug)]
pub struct Shipper {
    objects: Arc<dyn ObjectStore>,
    fencing_token: u64,
    /// When set, every upload and the manifest wait for a valid lease of this owner.
    owner: Option<Arc<Owner>>,
    /// When set (always with an owner), manifests are published by moving the shard's
    /// pointer there, and named with the owner's token. design:
    /// docs/distributed.md#manifest-pointer
    pointer: Option<Arc<dyn ManifestPointers>>,
    /// The first stage, one ship at a time: planning and uploading objects.
    state: Mutex<State>,
    /// The second stage, one ship at a time: writing the manifest. A ship takes it before it
    /// lets go of `state`, so manifests are written in planning order.
    publish: Mutex<()>,
    /// The manifests written, and the plan waiting for its manifest; held only briefly.
    manifests: Mutex<Published>,
}

/// The newest manifests written (or found) and the newest plan handed to the second stage.
#[derive(Debug, Default)]
struct Published {
    last: Option<Manifest>,
    before_last: Option<Manifest>,
    /// What the newest planned ship will name, while its manifest is not written yet.
    pending: Option<Pending>,
    /// What the shard's manifest pointer says, as far as this shipper knows (with a
    /// pointer): read when the shipper loads, then each manifest it publishes.
    pointer_says: Option<PublishedManifest>,
}

/// A planned ship whose manifest is not written yet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    segments: Vec<ShippedSegment>,
    cache: Vec<ShippedCheckpoint>,
    durable_lsn: u64,
}

/// What the first stage of a ship found.
enum Planned {
    /// Nothing is new since the newest manifest.
    Unchanged(ShipReport),
    /// Nothing is new since a ship whose manifest is being written: wait for it.
    Pending,
    /// A manifest to write, and the uploads made for it.
    New(Manifest, Uploads),
}

/// A file as it was when its bytes were shipped: a later ship re-reads it only when this
/// changed (a rewrite renames a new file over a sealed segment: another inode).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    dev: u64,
    ino: u64,
}

impl FileStamp {
    fn of(meta: &fs::Metadata) -> FileStamp {
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    loaded: bool,
    sealed: HashMap<u64, (FileStamp, ObjectRef)>,
    checkpoints: HashMap<String, (FileStamp, ObjectRef)>,
    tail: Option<Tail>,
}

/// The parts of the active segment shipped so far.
#[derive(Debug, Clone)]
struct Tail {
    id: u64,
    parts: Vec<ObjectRef>,
    /// Whether the local file was checked to hold these parts' bytes (parts adopted from a
    /// manifest another process wrote are checked before more are added).
    checked: bool,
}

impl Tail {
    fn end(&self) -> u64 {
        self.parts.last().map_or(0, |p| p.offset + p.length)
    }
}

/// One ship's uploads: the objects planned, sent together once the plan is complete.
#[derive(Debug, Default)]
struct Uploads {
    objects: usize,
    bytes: u64,
    queue: Vec<(String, Bytes)>,
    /// The bytes in `queue`.
    queued_bytes: usize,
}

/// Queues `bytes` for upload under `key`.
fn upload(key: &str, bytes: Bytes, uploads: &mut Uploads) {
    uploads.objects += 1;
    uploads.bytes += bytes.len() as u64;
    uploads.queued_bytes += bytes.len();
    uploads.queue.push((key.to_owned(), bytes));
}

impl Shipper {
    /// A shipper to `objects`, writing `fencing_token` into its manifests (0 without
    /// ownership).
    pub fn new(objects: Arc<dyn ObjectStore>, fencing_token: u64) -> Shipper {
        Shipper {
            objects,
            fencing_token,
            owner: None,
            pointer: None,
            state: Mutex::new(State::default()),
            publish: Mutex::new(()),
            manifests: Mutex::new(Published::default()),
        }
    }

    /// A shipper for the store `owner` owns: its manifests carry the owner's fencing token,
    /// and it checks the lease before every object it uploads and before the manifest, so a
    /// writer whose lease was lost ships nothing more. Keep the lease renewed
    /// ([`Owner::keep_alive`]).
    pub fn owned(objects: Arc<dyn ObjectStore>, owner: Arc<Owner>) -> Shipper {
        Shipper {
            objects,
            fencing_token: owner.token(),
            owner: Some(owner),
            pointer: None,
            state: Mutex::new(State::default()),
            publish: Mutex::new(()),
            manifests: Mutex::new(Published::default()),
        }
    }

    /// [`Shipper::owned`] for an object store that ignores conditional writes (Garage): a
    /// manifest is shipped once the shard's pointer in `pointers` moves to it, in a
    /// transaction that checks `owner`'s lease, and each manifest's key carries the owner's
    /// fencing token, so a stale owner's manifest never replaces a newer owner's. Restore
    /// with [`RestoreOptions::pointer`](crate::RestoreOptions::pointer) set to the same
    /// pointers and shard. design: docs/distributed.md#manifest-pointer
    pub fn pointed(
        objects: Arc<dyn ObjectStore>,
        owner: Arc<Owner>,
        pointers: Arc<dyn ManifestPointers>,
    ) -> Shipper {
        Shipper {
            pointer: Some(pointers),
            ..Shipper::owned(objects, owner)
        }
    }

    /// The key a manifest is written under by this shipper.
    fn key_of(&self, generation: u64, fencing_token: u64) -> String {
        match self.pointer {
            Some(_) => pointed_manifest_key(generation, fencing_token),
            None => manifest_key(generation),
        }
    }

    /// A commit at the shipped durability level: checks the lease (for an owned shipper),
    /// runs `commit`, which must commit with `Durability::Sync`, then waits until a manifest
    /// covers everything durable in `store` ([`Shipper::ship_through`]). A writer that lost
    /// its lease is refused before `commit` runs, so it writes nothing more. An error after
    /// `commit` ran means its events may be durable locally but are not acknowledged as
    /// shipped.
    pub fn commit<T, E>(
        &self,
        store: &sessionlog::Store,
        commit: impl FnOnce() -> Result<T, E>,
    ) -> Result<T>
    where
        Error: From<E>,
    {
        let committed = match &self.owner {
            Some(owner) => owner.commit(commit)?,
            None => commit()?,
        };
        let reader = store.log_reader();
        self.ship_through(&reader, reader.durable_lsn())?;
        Ok(committed)
    }

    /// Fails with [`Error::LeaseLost`] when this shipper's owner lost its lease.
    fn check_owner(&self) -> Result<()> {
        self.owner.as_ref().map_or(Ok(()), |owner| owner.check())
    }

    /// Ships what is new in `source`: sealed segments not shipped yet, the durable bytes of
    /// the active segment since the last ship, changed checkpoints, then a manifest (unless
    /// nothing changed).
    pub fn ship(&self, source: &dyn ShipSource) -> Result<ShipReport> {
        self.run(source, None)
    }

    /// Returns once a manifest reaches `position` (everything before it is shipped),
    /// shipping if none does yet: the shipped durability level. Pass the log's
    /// `durable_lsn()` read after a commit with `Durability::Sync` returned (or the end of the
    /// commit's batch). Callers waiting at the same time share one ship.
    pub fn ship_through(&self, source: &dyn ShipSource, position: Lsn) -> Result<u64> {
        let report = self.run(source, Some(position))?;
        if report.durable_lsn.0 < position.0 {
            return Err(Error::NotDurable { lsn: position.0 });
        }
        Ok(report.generation)
    }

    /// The newest manifest this shipper wrote or found.
    pub fn last_manifest(&self) -> Option<Manifest> {
        self.manifests.lock().last.clone()
    }

    /// One ship, or (with `position`) as many as it takes until a manifest reaches
    /// `position`, sharing ships with concurrent callers.
    fn run(&self, source: &dyn ShipSource, position: Option<Lsn>) -> Result<ShipReport> {
        loop {
            if let Some(report) = position.and_then(|p| self.covering(p)) {
                return Ok(report);
            }
            let mut state = self.state.lock();
            if let Some(p) = position {
                if let Some(report) = self.covering(p) {
                    return Ok(report);
                }
                let pending = self
                    .manifests
                    .lock()
                    .pending
                    .as_ref()
                    .map(|p| p.durable_lsn);
                if pending.is_some_and(|lsn| lsn >= p.0) {
                    // A ship whose manifest is being written covers it: wait for that one.
                    drop(state);
                    drop(self.publish.lock());
                    continue;
                }
            }
            match self.plan(source, &mut state)? {
                Planned::Unchanged(report) => return Ok(report),
                Planned::Pending => {
                    // Nothing new since the ship being written: wait for it, then look again
                    // (it may have failed).
                    drop(state);
                    drop(self.publish.lock());
                }
                Planned::New(manifest, uploads) => {
                    // Take the second stage before the next ship can plan, so manifests are
                    // written in planning order; then let the next ship upload meanwhile.
                    let publishing = self.publish.lock();
                    drop(state);
                    let written = self.write_manifest(manifest, &uploads);
                    drop(publishing);
                    return written;
                }
            }
        }
    }

    /// A report of the newest manifest when it reaches `position`.
    fn covering(&self, position: Lsn) -> Option<ShipReport> {
        let manifests = self.manifests.lock();
        let last = manifests
            .last
            .as_ref()
            .filter(|m| m.durable_lsn >= position.0)?;
        Some(unchanged(last, &Uploads::default()))
    }

    /// The first stage: uploads what is new and drafts the manifest naming it.
    fn plan(&self, source: &dyn ShipSource, state: &mut State) -> Result<Planned> {
        if source.is_read_only() {
            return Err(Error::ReadOnlySource);
        }
        self.check_owner()?;
        let ours = store_id_hex(source.store_id());
        if !state.loaded {
            self.load(state, &ours)?;
        }
        let mut uploads = Uploads::default();
        let planned = self
            .plan_objects(source, state, &mut uploads)
            .and_then(|planned| self.send(&mut uploads).map(|()| planned));
        let (segments, durable_lsn, cache) = match planned {
            Ok(planned) => planned,
            Err(e) => {
                // What this plan recorded as shipped may not have been uploaded: forget it,
                // so the next ship reads the files again (and ships the tail from its start).
                *state = State {
                    loaded: state.loaded,
                    ..State::default()
                };
                return Err(e);
            }
        };
        let mut manifests = self.manifests.lock();
        let same = |s: &[ShippedSegment], c: &[ShippedCheckpoint]| s == segments && c == cache;
        match (&manifests.pending, &manifests.last) {
            (Some(pending), _) if same(&pending.segments, &pending.cache) => {
                return Ok(Planned::Pending)
            }
            (None, Some(last)) if same(&last.segments, &last.cache) => {
                return Ok(Planned::Unchanged(unchanged(last, &uploads)))
            }
            _ => {}
        }
        manifests.pending = Some(Pending {
            segments: segments.clone(),
            cache: cache.clone(),
            durable_lsn: durable_lsn.0,
        });
        drop(manifests);
        // Listed only for a manifest that will be written, and outside the manifests lock.
        let sessions = source
            .streams()
            .into_iter()
            .map(|s| ShippedStream {
                name: s.name,
                stream: s.id.0,
                next_seq: s.next_seq.0,
            })
            .collect();
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            store_id: ours,
            // Numbered when it is written: see `write_manifest`.
            generation: 0,
            fencing_token: self.fencing_token,
            durable_lsn: durable_lsn.0,
            segments,
            cache,
            sessions,
        };
        Ok(Planned::New(manifest, uploads))
    }

    /// The segments and checkpoints of the shipped state, their new objects queued in
    /// `uploads`.
    fn plan_objects(
        &self,
        source: &dyn ShipSource,
        state: &mut State,
        uploads: &mut Uploads,
    ) -> Result<(Vec<ShippedSegment>, Lsn, Vec<ShippedCheckpoint>)> {
        let mut planned = None;
        for _ in 0..PLAN_ATTEMPTS {
            planned = self.plan_segments(source, state, uploads)?;
            if planned.is_some() {
                break;
            }
        }
        let Some((segments, durable_lsn)) = planned else {
            return Err(Error::StoreChanging);
        };
        let cache = self.plan_checkpoints(source.dir(), state, uploads)?;
        Ok((segments, durable_lsn, cache))
    }

    /// The second stage: writes `manifest` as the generation after the newest one, then
    /// forgets the manifest before the last one. Called holding `publish`.
    fn write_manifest(&self, mut manifest: Manifest, uploads: &Uploads) -> Result<ShipReport> {
        let written = (|| {
            manifest.generation = self
                .manifests
                .lock()
                .last
                .as_ref()
                .map_or(1, |m| m.generation + 1);
            let key = self.key_of(manifest.generation, manifest.fencing_token);
            self.check_owner()?;
            let fenced = || Error::Fenced {
                generation: manifest.generation,
                location: self.objects.location(),
            };
            if self.pointer.is_some() {
                // The key is this owner's alone (its token is in it); an object there is this
                // shipper's own, from an attempt whose pointer move failed: written again.
                self.objects.put(&key, manifest.encode())?;
            } else if !self.objects.put_if_absent(&key, manifest.encode())? {
                return Err(fenced());
            }
            if let (Some(pointers), Some(owner)) = (&self.pointer, &self.owner) {
                let from = self.manifests.lock().pointer_says;
                self.check_owner()?;
                if !pointers.advance(
                    owner.shard(),
                    owner.grant().lease_id,
                    from,
                    published(&manifest),
                )? {
                    return Err(fenced());
                }
            }
            Ok(())
        })();
        let mut manifests = self.manifests.lock();
        // The pending plan is this manifest's only if it names the same checkpoints too: a
        // later plan that differs in checkpoints alone must stay pending until it is written.
        let mine = manifests.pending.as_ref().is_some_and(|p| {
            p.durable_lsn == manifest.durable_lsn
                && p.segments == manifest.segments
                && p.cache == manifest.cache
        });
        if mine {
            manifests.pending = None;
        }
        written?;
        let doomed = doomed_keys(&manifests, &manifest, |m| {
            self.key_of(m.generation, m.fencing_token)
        });
        manifests.before_last = manifests.last.take();
        if self.pointer.is_some() {
            manifests.pointer_says = Some(published(&manifest));
        }
        let report = ShipReport {
            generation: manifest.generation,
            durable_lsn: Lsn(manifest.durable_lsn),
            wrote_manifest: true,
            segments: manifest.segments.len(),
            uploaded_objects: uploads.objects,
            uploaded_bytes: uploads.bytes,
            deleted_objects: 0,
            failed_deletes: 0,
        };
        manifests.last = Some(manifest);
        drop(manifests);
        let (deleted_objects, failed_deletes) = self.delete_all(doomed);
        Ok(ShipReport {
            deleted_objects,
            failed_deletes,
            ..report
        })
    }

    /// Reads the newest manifest at the location (and the one before it), adopts the active
    /// segment's parts from it, and removes every object neither names: garbage of ships that
    /// failed before their manifest.
    fn load(&self, state: &mut State, ours: &str) -> Result<()> {
        let listed = manifest_keys(&*self.objects)?;
        let pointed = match (&self.pointer, &self.owner) {
            (Some(pointers), Some(owner)) => pointers.read(owner.shard())?,
            _ => None,
        };
        // Under a pointer the newest manifest is the one it names; without one (or before a
        // pointer was ever moved), the newest listed.
        let newest = match pointed {
            Some(p) => Some((
                p.generation,
                pointed_manifest_key(p.generation, p.fencing_token),
            )),
            None => {
                // A location another shard's pointer publishes to is not this shard's to
                // continue: shipping on would fork its history.
                if let (Some(owner), Some(_), Some((_, Some(_), _))) =
                    (&self.owner, &self.pointer, listed.last())
                {
                    return Err(Error::NoManifestPointer {
                        shard: owner.shard().to_owned(),
                        location: self.objects.location(),
                    });
                }
                listed.last().map(|(g, _, key)| (*g, key.clone()))
            }
        };
        if let Some((generation, key)) = &newest {
            let last = read_manifest_at(&*self.objects, key, *generation)?;
            if last.store_id != ours {
                return Err(Error::ForeignStore {
                    location: self.objects.location(),
                    theirs: last.store_id,
                    ours: ours.to_owned(),
                });
            }
            // The one before it: of the manifests of the generation before, the one whose
            // owner was the newest not newer than this one's (a stale owner's manifest has an
            // older token).
            let before_last = generation.checked_sub(1).and_then(|g| {
                listed
                    .iter()
                    .rfind(|(lg, token, _)| {
                        *lg == g && token.is_none_or(|t| t <= last.fencing_token)
                    })
                    .and_then(|(_, _, key)| read_manifest_at(&*self.objects, key, g).ok())
            });
            state.tail = last.segments.last().filter(|s| !s.sealed).map(|s| Tail {
                id: s.id,
                parts: s.objects.clone(),
                checked: false,
            });
            let mut manifests = self.manifests.lock();
            manifests.last = Some(last);
            manifests.before_last = before_last;
        }
        self.manifests.lock().pointer_says = pointed;
        let manifests = self.manifests.lock();
        let keep: HashSet<String> = [manifests.last.as_ref(), manifests.before_last.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|m| m.object_keys())
            .map(str::to_owned)
            .collect();
        drop(manifests);
        let keep_generation = newest.as_ref().map_or(0, |(g, _)| g.saturating_sub(1));
        for dir in [SEGMENT_DIR, TAIL_DIR, CACHE_DIR] {
            for key in self.objects.list(dir)? {
                if !keep.contains(&key) {
                    self.objects.delete(&key)?;
                }
            }
        }
        for (_, _, key) in listed.iter().filter(|(g, _, _)| *g < keep_generation) {
            self.objects.delete(key)?;
        }
        state.loaded = true;
        Ok(())
    }

    /// Uploads the new segment bytes and returns the shipped segments and the durable
    /// position they reach, or `None` when the store rolled a segment meanwhile (plan again).
    fn plan_segments(
        &self,
        source: &dyn ShipSource,
        state: &mut State,
        uploads: &mut Uploads,
    ) -> Result<Option<(Vec<ShippedSegment>, Lsn)>> {
        let dir = source.dir();
        let durable = source.durable_lsn();
        let active = durable.segment().0;
        let ids: Vec<u64> = segment_ids(dir)?
            .into_iter()
            .filter(|&id| id <= active)
            .collect();
        if ids.last() != Some(&active) || ids.windows(2).any(|w| w[1] != w[0] + 1) {
            return Ok(None);
        }
        let mut segments = Vec::with_capacity(ids.len());
        for &id in &ids[..ids.len() - 1] {
            let Some(object) = self.ship_sealed(dir, id, state, uploads)? else {
                return Ok(None);
            };
            if uploads.queued_bytes >= SEND_AT_BYTES {
                // A store shipped for the first time is not held in memory whole.
                self.send(uploads)?;
            }
            segments.push(ShippedSegment {
                id,
                sealed: true,
                objects: vec![object],
            });
        }
        state.sealed.retain(|id, _| ids.contains(id));
        let Some(parts) = self.ship_tail(dir, active, durable.offset(), state, uploads)? else {
            return Ok(None);
        };
        segments.push(ShippedSegment {
            id: active,
            sealed: false,
            objects: parts,
        });
        Ok(Some((segments, durable)))
    }

    /// The object of sealed segment `id`, uploaded when no shipped object holds its bytes;
    /// `None` when the file is gone (reclaimed meanwhile).
    fn ship_sealed(
        &self,
        dir: &Path,
        id: u64,
        state: &mut State,
        uploads: &mut Uploads,
    ) -> Result<Option<ObjectRef>> {
        let path = dir.join(segment_file_name(id));
        let key_of = |length, crc32| segment_key(id, length, crc32);
        let shipped = self.ship_file(&path, state.sealed.get(&id), key_of, uploads)?;
        Ok(shipped.map(|(stamp, object)| {
            state.sealed.insert(id, (stamp, object.clone()));
            object
        }))
    }

    /// The object holding the whole file at `path`: the one shipped before if the file is
    /// unchanged since (`seen`), else its bytes under `key_of(length, crc32)`, uploaded unless
    /// a kept manifest names that key already. `None` when the file is gone.
    fn ship_file(
        &self,
        path: &Path,
        seen: Option<&(FileStamp, ObjectRef)>,
        key_of: impl FnOnce(u64, u32) -> String,
        uploads: &mut Uploads,
    ) -> Result<Option<(FileStamp, ObjectRef)>> {
        let Some((stamp, bytes)) = read_whole(path, seen.map(|s| &s.0))? else {
            return Ok(None);
        };
        let Some(bytes) = bytes else {
            return Ok(seen.map(|s| (stamp, s.1.clone())));
        };
        let crc32 = crc32fast::hash(&bytes);
        let length = bytes.len() as u64;
        let object = ObjectRef {
            key: key_of(length, crc32),
            offset: 0,
            length,
            crc32,
        };
        if !self.was_shipped(&object.key) {
            upload(&object.key, bytes, uploads);
        }
        Ok(Some((stamp, object)))
    }

    /// The parts holding the active segment `id` up to `end`, the new bytes uploaded as one
    /// more part; `None` when the segment is no longer the last (it was sealed meanwhile).
    fn ship_tail(
        &self,
        dir: &Path,
        id: u64,
        end: u64,
        state: &mut State,
        uploads: &mut Uploads,
    ) -> Result<Option<Vec<ObjectRef>>> {
        let path = dir.join(segment_file_name(id));
        let file = File::open(&path).map_err(io_err("open", &path))?;
        let mut tail = match state.tail.take() {
            Some(tail) if tail.id == id => tail,
            _ => Tail {
                id,
                parts: Vec::new(),
                checked: true,
            },
        };
        if !tail.checked && !parts_match_file(&file, &tail.parts) {
            tail.parts.clear();
        }
        tail.checked = true;
        if tail.end() > end {
            // The local segment holds less than was shipped (the store was restored from an
            // older state): ship it afresh.
            tail.parts.clear();
        }
        if tail.parts.len() >= MAX_TAIL_PARTS {
            tail.parts.clear();
        }
        let start = tail.end();
        let mut new_part = None;
        if end > start {
            let mut bytes = vec![0; usize::try_from(end - start).unwrap_or(usize::MAX)];
            file.read_exact_at(&mut bytes, start)
                .map_err(io_err("read", &path))?;
            new_part = Some(bytes);
        }
        // Read before this check: the segment was still the last one when its bytes were
        // read, so no rewrite (which only replaces sealed segments) had touched them.
        if segment_ids(dir)?.last().is_some_and(|&last| last > id) {
            state.tail = Some(tail);
            return Ok(None);
        }
        if let Some(bytes) = new_part {
            let crc32 = crc32fast::hash(&bytes);
            let part = ObjectRef {
                key: tail_key(id, start, end, crc32),
                offset: start,
                length: end - start,
                crc32,
            };
            upload(&part.key, Bytes::from(bytes), uploads);
            tail.parts.push(part);
        }
        let parts = tail.parts.clone();
        state.tail = Some(tail);
        Ok(Some(parts))
    }

    /// The checkpoint files of the store's `cache/`, changed ones uploaded.
    fn plan_checkpoints(
        &self,
        dir: &Path,
        state: &mut State,
        uploads: &mut Uploads,
    ) -> Result<Vec<ShippedCheckpoint>> {
        let cache_dir = dir.join(CACHE_DIR);
        let mut names: Vec<String> = match fs::read_dir(&cache_dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| is_checkpoint_file(n))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("list", &cache_dir)(e)),
        };
        names.sort();
        let mut shipped = Vec::with_capacity(names.len());
        for name in names {
            let path = cache_dir.join(&name);
            let seen = state.checkpoints.get(&name);
            let key_of = |length, crc32| cache_key(&name, length, crc32);
            // A checkpoint removed meanwhile is simply not shipped: checkpoints are caches.
            let Some((stamp, object)) = self.ship_file(&path, seen, key_of, uploads)? else {
                continue;
            };
            state
                .checkpoints
                .insert(name.clone(), (stamp, object.clone()));
            shipped.push(ShippedCheckpoint { file: name, object });
        }
        let listed: HashSet<&str> = shipped.iter().map(|c| c.file.as_str()).collect();
        state
            .checkpoints
            .retain(|name, _| listed.contains(name.as_str()));
        Ok(shipped)
    }

    /// Whether the newest manifest names `key` (so its object is in the bucket, and stays
    /// there while a ship planned now is written: a manifest's writing deletes only objects
    /// of the manifest two generations back that neither of the newer two names).
    fn was_shipped(&self, key: &str) -> bool {
        let manifests = self.manifests.lock();
        manifests
            .last
            .as_ref()
            .is_some_and(|m| m.object_keys().any(|k| k == key))
    }

    /// Uploads the queued objects, several at a time, each after a lease check.
    fn send(&self, uploads: &mut Uploads) -> Result<()> {
        let queue = std::mem::take(&mut uploads.queue);
        uploads.queued_bytes = 0;
        parallel::for_each(&queue, |(key, bytes)| {
            self.check_owner()?;
            self.objects.put(key, bytes.clone())
        })
        .map(drop)
    }

    /// Deletes `keys`; failures leave garbage that the next shipper's load removes.
    fn delete_all(&self, keys: Vec<String>) -> (usize, usize) {
        let (mut deleted, mut failed) = (0, 0);
        for key in keys {
            match self.objects.delete(&key) {
                Ok(()) => deleted += 1,
                Err(_) => failed += 1,
            }
        }
        (deleted, failed)
    }
}

/// The report of a ship that found nothing new since `last`.
fn unchanged(last: &Manifest, uploads: &Uploads) -> ShipReport {
    ShipReport {
        generation: last.generation,
        durable_lsn: Lsn(last.durable_lsn),
        wrote_manifest: false,
        segments: last.segments.len(),
        uploaded_objects: uploads.objects,
        uploaded_bytes: uploads.bytes,
        deleted_objects: 0,
        failed_deletes: 0,
    }
}

/// Once `new` is written after `published.last`: the manifest before the last one and every
/// object that only it names.
fn doomed_keys(
    published: &Published,
    new: &Manifest,
    key_of: impl Fn(&Manifest) -> String,
) -> Vec<String> {
    let Some(old) = published.before_last.as_ref() else {
        return Vec::new();
    };
    let keep: HashSet<&str> = [published.last.as_ref(), Some(new)]
        .into_iter()
        .flatten()
        .flat_map(|m| m.object_keys())
        .collect();
    old.object_keys()
        .filter(|k| !keep.contains(k))
        .map(str::to_owned)
        .chain([key_of(old)])
        .collect()
}

/// A manifest as a pointer names it.
fn published(manifest: &Manifest) -> PublishedManifest {
    PublishedManifest {
        generation: manifest.generation,
        fencing_token: manifest.fencing_token,
    }
}

/// The manifests listed at `objects`, as (generation, fencing token in the key, key),
/// ascending by generation and then token (a key without a token first).
fn manifest_keys(objects: &dyn ObjectStore) -> Result<Vec<(u64, Option<u64>, String)>> {
    let mut keys: Vec<(u64, Option<u64>, String)> = objects
        .list(MANIFEST_DIR)?
        .into_iter()
        .filter_map(|k| manifest_key_parts(&k).map(|(g, t)| (g, t, k)))
        .collect();
    keys.sort_unstable();
    Ok(keys)
}

/// The key of the newest manifest at `objects` and its generation, by listing: the highest
/// generation, and of several manifests of it (written under a pointer by owners one after
/// the other), the newest owner's.
pub(crate) fn newest_listed(objects: &dyn ObjectStore) -> Result<Option<(u64, String)>> {
    Ok(manifest_keys(objects)?.pop().map(|(g, _, key)| (g, key)))
}

/// The newest generation at `objects`, by listing.
pub(crate) fn newest_generation(objects: &dyn ObjectStore) -> Result<Option<u64>> {
    Ok(newest_listed(objects)?.map(|(g, _)| g))
}

/// Reads and decodes manifest `generation`, stored under `key`.
pub(crate) fn read_manifest_at(
    objects: &dyn ObjectStore,
    key: &str,
    generation: u64,
) -> Result<Manifest> {
    let bytes = objects.get(key)?.ok_or_else(|| Error::MissingObject {
        key: key.to_owned(),
        generation,
    })?;
    Manifest::decode(key, &bytes)
}

/// The segment ids in `dir`, ascending.
fn segment_ids(dir: &Path) -> Result<Vec<u64>> {
    let mut ids: Vec<u64> = fs::read_dir(dir)
        .map_err(io_err("list", dir))?
        .filter_map(|e| parse_segment_file_name(e.ok()?.file_name().to_str()?))
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// The file's stamp, and its bytes unless the stamp equals `seen`; `None` when the file is
/// gone.
fn read_whole(path: &Path, seen: Option<&FileStamp>) -> Result<Option<(FileStamp, Option<Bytes>)>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open", path)(e)),
    };
    let stamp = FileStamp::of(&file.metadata().map_err(io_err("stat", path))?);
    if seen == Some(&stamp) {
        return Ok(Some((stamp, None)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(stamp.len).unwrap_or(0));
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io_err("read", path))?;
    // The stamp must describe the bytes read: take it again from the same open file.
    let stamp = FileStamp::of(&file.metadata().map_err(io_err("stat", path))?);
    Ok(Some((stamp, Some(Bytes::from(bytes)))))
}

/// Whether `file` holds the bytes of `parts` at their offsets.
fn parts_match_file(file: &File, parts: &[ObjectRef]) -> bool {
    parts.iter().all(|part| {
        let mut bytes = vec![0; usize::try_from(part.length).unwrap_or(usize::MAX)];
        file.read_exact_at(&mut bytes, part.offset).is_ok() && crc32fast::hash(&bytes) == part.crc32
    })
}
