//! [`SimStorage`]: a deterministic in-memory [`Storage`] that models power loss.
//!
//! Every file keeps two images: the *written* image (what reads see now) and the *durable*
//! image (what survives a power loss for certain), plus the ordered list of writes and size
//! changes made since its last `sync_data`/`sync_all`. Directory entries (creations, removals,
//! renames) become durable only when their directory is synced.
//!
//! [`SimStorage::crash`] replaces the state with one that a power loss could leave behind (see
//! [`crate::crash`]) and detaches every handle opened before it, so a log instance that was
//! running at the crash can no longer touch the files its successor recovers from.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sessionlog_log::{DirLock, OpenMode, Storage, StorageFile};

use crate::crash::{self, CrashPolicy, CrashReport};
use crate::fault::{Fault, FaultPlan, Firing, OpKind};

/// Identifies a file's contents independently of the names it has.
pub(crate) type InodeId = u64;

/// A change to a file made since its last sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PendingOp {
    /// Bytes written at an offset.
    Write { offset: u64, data: Vec<u8> },
    /// The size set by `set_len` or grown by `allocate`.
    SetLen { len: u64 },
}

/// A file's contents.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inode {
    pub written: Vec<u8>,
    pub durable: Vec<u8>,
    pub pending: Vec<PendingOp>,
}

impl Inode {
    fn durable_only(image: Vec<u8>) -> Inode {
        Inode {
            written: image.clone(),
            durable: image,
            pending: Vec::new(),
        }
    }

    fn sync(&mut self) {
        self.durable.clone_from(&self.written);
        self.pending.clear();
    }
}

/// Applies one write to an image, growing it with zeros as needed.
pub(crate) fn apply_write(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = usize::try_from(offset).expect("simulated files fit in memory");
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// Applies one size change to an image.
pub(crate) fn apply_set_len(image: &mut Vec<u8>, len: u64) {
    image.resize(
        usize::try_from(len).expect("simulated files fit in memory"),
        0,
    );
}

/// One atomic unit of directory change: each entry is `path → inode` or `path → removed`.
/// A rename is one unit of two entries, so a crash never keeps half of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DirChange {
    pub entries: Vec<(PathBuf, Option<InodeId>)>,
}

/// Counters of what the storage has done since it was created (crashes do not reset them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// `read_at` and `map_readonly` calls.
    pub reads: u64,
    /// Bytes returned by reads.
    pub bytes_read: u64,
    /// `write_all_at` calls.
    pub writes: u64,
    /// Bytes written (a short write counts the prefix that landed).
    pub bytes_written: u64,
    /// `sync_data` calls that succeeded.
    pub sync_data: u64,
    /// `sync_all` calls that succeeded.
    pub sync_all: u64,
    /// `sync_dir` calls that succeeded.
    pub sync_dir: u64,
    /// `set_len` and `allocate` calls.
    pub resizes: u64,
    /// File creations, removals and renames.
    pub namespace_ops: u64,
    /// Operations failed by an injected fault.
    pub faults_fired: u64,
    /// Simulated power losses.
    pub crashes: u64,
}

impl SimStats {
    /// File syncs of either kind.
    pub fn file_syncs(&self) -> u64 {
        self.sync_data + self.sync_all
    }
}

/// Tunables of the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Writes tear at multiples of this many bytes (512 for a classic sector, 4096 for 4Kn).
    pub sector_size: u64,
    /// `read_at` may return fewer bytes than asked for (at least one), as `pread` may: catches
    /// callers that treat one `read_at` as a full read.
    pub short_reads: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            sector_size: 512,
            short_reads: false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct State {
    /// Bumped by every crash; handles and locks from an older generation are detached.
    pub generation: u64,
    pub dirs: BTreeSet<PathBuf>,
    pub entries: BTreeMap<PathBuf, InodeId>,
    pub durable_entries: BTreeMap<PathBuf, InodeId>,
    pub pending_dir_changes: Vec<DirChange>,
    pub inodes: BTreeMap<InodeId, Inode>,
    pub next_inode: InodeId,
    locks: BTreeMap<PathBuf, u64>,
    next_lock: u64,
    faults: FaultPlan,
    stats: SimStats,
    /// Chooses short read and write lengths; seeded, so runs repeat.
    rng: SplitMix64,
    pub config: SimConfig,
}

impl State {
    /// Counts one operation and asks the fault plan whether it fails.
    fn begin(&mut self, kind: OpKind) -> Option<Firing> {
        let firing = self.faults.on_operation(kind);
        if firing.is_some() {
            self.stats.faults_fired += 1;
        }
        firing
    }

    fn check_fault(&mut self, kind: OpKind) -> io::Result<()> {
        match self.begin(kind) {
            Some(firing) => Err(firing.error.to_io_error()),
            None => Ok(()),
        }
    }

    fn new_inode(&mut self, inode: Inode) -> InodeId {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, inode);
        id
    }

    fn require_dir(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().unwrap_or_else(|| Path::new(""));
        if self.dirs.contains(parent) {
            Ok(())
        } else {
            Err(not_found(parent))
        }
    }

    fn record_dir_change(&mut self, entries: Vec<(PathBuf, Option<InodeId>)>) {
        for (path, inode) in &entries {
            match inode {
                Some(id) => self.entries.insert(path.clone(), *id),
                None => self.entries.remove(path),
            };
        }
        self.pending_dir_changes.push(DirChange { entries });
    }

    fn inode_mut(&mut self, id: InodeId) -> &mut Inode {
        self.inodes
            .get_mut(&id)
            .expect("open handles keep their inode alive until a crash")
    }
}

/// A tiny deterministic generator for the per-operation choices (short read and write
/// lengths): these run on every read, where a cryptographic generator would dominate the
/// cost of a crash schedule. Crashes themselves draw from the caller's `StdRng`.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl rand::RngCore for SplitMix64 {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        rand_core_fill(self, dest);
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        rand_core_fill(self, dest);
        Ok(())
    }
}

fn rand_core_fill(rng: &mut SplitMix64, dest: &mut [u8]) {
    for chunk in dest.chunks_mut(8) {
        let bytes = rand::RngCore::next_u64(rng).to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Handles created before the last crash fail with this error.
fn detached() -> io::Error {
    io::Error::other("file handle detached by a simulated power loss")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", path.display()),
    )
}

/// A simulated file system with power loss and fault injection. Cloning shares the state.
///
/// ```
/// use std::path::Path;
/// use sessionlog_log::{OpenMode, Storage};
/// use sessionlog_testkit::SimStorage;
///
/// let sim = SimStorage::new(7);
/// let dir = Path::new("/store");
/// sim.create_dir_all(dir).unwrap();
/// let file = sim.open_file(&dir.join("a"), OpenMode::CreateNew).unwrap();
/// sim.sync_dir(dir).unwrap();
/// file.write_all_at(b"synced", 0).unwrap();
/// file.sync_data().unwrap();
/// file.write_all_at(b", then not", 6).unwrap();
///
/// let report = sim.crash(42);
/// let after = sim.file_contents(&dir.join("a")).unwrap();
/// assert!(after.starts_with(b"synced"), "{report}");
/// assert!(file.write_all_at(b"x", 0).is_err(), "old handles are detached");
/// ```
#[derive(Clone)]
pub struct SimStorage {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("SimStorage")
            .field("generation", &state.generation)
            .field("files", &state.entries.len())
            .field("stats", &state.stats)
            .finish()
    }
}

impl SimStorage {
    /// An empty file system; `seed` drives short-write lengths.
    pub fn new(seed: u64) -> SimStorage {
        SimStorage::with_config(seed, SimConfig::default())
    }

    /// An empty file system with explicit tunables.
    pub fn with_config(seed: u64, config: SimConfig) -> SimStorage {
        let mut dirs = BTreeSet::new();
        dirs.insert(PathBuf::from("/"));
        dirs.insert(PathBuf::new());
        SimStorage {
            state: Arc::new(Mutex::new(State {
                generation: 0,
                dirs,
                entries: BTreeMap::new(),
                durable_entries: BTreeMap::new(),
                pending_dir_changes: Vec::new(),
                inodes: BTreeMap::new(),
                next_inode: 1,
                locks: BTreeMap::new(),
                next_lock: 1,
                faults: FaultPlan::default(),
                stats: SimStats::default(),
                rng: SplitMix64(seed),
                config,
            })),
        }
    }

    /// This storage as the trait object the log opens stores with.
    pub fn as_storage(&self) -> Arc<dyn Storage> {
        Arc::new(self.clone())
    }

    /// Simulates a power loss with the default (random) policy, seeded by `seed`.
    pub fn crash(&self, seed: u64) -> CrashReport {
        self.crash_with(&mut StdRng::seed_from_u64(seed), &CrashPolicy::default())
    }

    /// Simulates a power loss: every file becomes its durable image plus some of its unsynced
    /// changes, unsynced directory changes may revert, handles and locks from before are
    /// detached, and armed faults are cleared (the new "boot" starts healthy).
    pub fn crash_with<R: Rng + ?Sized>(&self, rng: &mut R, policy: &CrashPolicy) -> CrashReport {
        let mut state = self.state.lock();
        let report = crash::power_loss(&mut state, rng, policy);
        state.generation += 1;
        state.locks.clear();
        state.faults.clear();
        state.stats.crashes += 1;
        report
    }

    /// Arms a fault; its countdown starts now.
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.add(fault);
    }

    /// Faults armed and not yet spent (a fired sticky fault stays armed).
    pub fn armed_faults(&self) -> usize {
        self.state.lock().faults.armed()
    }

    /// Disarms every fault (a sticky power cut included).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Counters since creation.
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats
    }

    /// Paths of the files that exist now, sorted.
    pub fn file_paths(&self) -> Vec<PathBuf> {
        self.state.lock().entries.keys().cloned().collect()
    }

    /// The written image of the file at `path` (what a read sees now).
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        let id = state.entries.get(path)?;
        Some(state.inodes[id].written.clone())
    }

    /// The durable image of the file at `path`, if its entry is durable too.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        let id = state.durable_entries.get(path)?;
        Some(state.inodes[id].durable.clone())
    }

    /// Writes and size changes of `path` not yet synced.
    pub fn unsynced_ops(&self, path: &Path) -> usize {
        let state = self.state.lock();
        state
            .entries
            .get(path)
            .map_or(0, |id| state.inodes[id].pending.len())
    }

    /// Directory changes not yet made durable by a directory sync.
    pub fn unsynced_dir_changes(&self) -> usize {
        self.state.lock().pending_dir_changes.len()
    }

    /// Replaces the file at `path` with `contents`, durably, bypassing faults and counters:
    /// for tests that plant damage or fixtures. The parent directory is created if needed.
    pub fn put_file(&self, path: &Path, contents: Vec<u8>) {
        let mut state = self.state.lock();
        if let Some(parent) = path.parent() {
            add_dir_all(&mut state.dirs, parent);
        }
        let id = state.new_inode(Inode::durable_only(contents));
        state.entries.insert(path.to_owned(), id);
        state.durable_entries.insert(path.to_owned(), id);
    }
}

fn add_dir_all(dirs: &mut BTreeSet<PathBuf>, dir: &Path) {
    for ancestor in dir.ancestors() {
        dirs.insert(ancestor.to_owned());
    }
}

/// A handle to a simulated file.
pub struct SimFile {
    state: Arc<Mutex<State>>,
    generation: u64,
    inode: InodeId,
    writable: bool,
    path: PathBuf,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("generation", &self.generation)
            .finish()
    }
}

impl SimFile {
    /// Locks the state for one operation of `kind`; fails if the handle is detached or a
    /// fault fires. Returns the guard and whether the fault (if any) asks for a short write.
    fn begin(
        &self,
        kind: OpKind,
    ) -> io::Result<(parking_lot::MutexGuard<'_, State>, Option<Firing>)> {
        let mut state = self.state.lock();
        if state.generation != self.generation {
            return Err(detached());
        }
        if (kind == OpKind::Write || kind == OpKind::Resize) && !self.writable {
            return Err(io::Error::from_raw_os_error(9)); // EBADF
        }
        match state.begin(kind) {
            Some(firing) if !firing.short_write => Err(firing.error.to_io_error()),
            firing => Ok((state, firing)),
        }
    }
}

impl StorageFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let (mut state, _) = self.begin(OpKind::Read)?;
        let image = &state.inode_mut(self.inode).written;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(image.len());
        let mut n = buf.len().min(image.len() - start);
        if state.config.short_reads && n > 1 {
            n = state.rng.gen_range(1..=n);
        }
        let image = &state.inode_mut(self.inode).written;
        buf[..n].copy_from_slice(&image[start..start + n]);
        state.stats.reads += 1;
        state.stats.bytes_read += n as u64;
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let (mut state, firing) = self.begin(OpKind::Write)?;
        let landed = match firing {
            Some(_) if buf.is_empty() => 0,
            Some(_) => state.rng.gen_range(0..buf.len()),
            None => buf.len(),
        };
        state.stats.writes += 1;
        state.stats.bytes_written += landed as u64;
        if landed > 0 {
            let data = buf[..landed].to_vec();
            let inode = state.inode_mut(self.inode);
            apply_write(&mut inode.written, offset, &data);
            inode.pending.push(PendingOp::Write { offset, data });
        }
        match firing {
            Some(firing) => Err(firing.error.to_io_error()),
            None => Ok(()),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        let (mut state, _) = self.begin(OpKind::SyncData)?;
        state.inode_mut(self.inode).sync();
        state.stats.sync_data += 1;
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        let (mut state, _) = self.begin(OpKind::SyncAll)?;
        state.inode_mut(self.inode).sync();
        state.stats.sync_all += 1;
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.state.lock();
        if state.generation != self.generation {
            return Err(detached());
        }
        state.check_fault(OpKind::Any)?;
        Ok(state.inode_mut(self.inode).written.len() as u64)
    }

    fn len_if_named(&self) -> io::Result<Option<u64>> {
        let len = self.len()?;
        let state = self.state.lock();
        Ok(state
            .entries
            .values()
            .any(|id| *id == self.inode)
            .then_some(len))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let (mut state, _) = self.begin(OpKind::Resize)?;
        state.stats.resizes += 1;
        let inode = state.inode_mut(self.inode);
        apply_set_len(&mut inode.written, len);
        inode.pending.push(PendingOp::SetLen { len });
        Ok(())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let (mut state, _) = self.begin(OpKind::Resize)?;
        state.stats.resizes += 1;
        let inode = state.inode_mut(self.inode);
        if (inode.written.len() as u64) < len {
            apply_set_len(&mut inode.written, len);
            inode.pending.push(PendingOp::SetLen { len });
        }
        Ok(())
    }

    /// Reports the trailing all-zero 4 KiB blocks as a hole, as a file system reports the
    /// unwritten extents of a preallocated file, so opens exercise the path that does not
    /// read them.
    fn data_end(&self) -> io::Result<u64> {
        const BLOCK: usize = 4096;
        let (mut state, _) = self.begin(OpKind::Read)?;
        let image = &state.inode_mut(self.inode).written;
        let last_data = image.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(last_data.next_multiple_of(BLOCK).min(image.len()) as u64)
    }

    fn map_readonly(&self) -> io::Result<Bytes> {
        let (mut state, _) = self.begin(OpKind::Read)?;
        let image = Bytes::from(state.inode_mut(self.inode).written.clone());
        state.stats.reads += 1;
        state.stats.bytes_read += image.len() as u64;
        Ok(image)
    }
}

/// The lock guard of [`SimStorage::try_lock`].
struct SimLock {
    state: Arc<Mutex<State>>,
    generation: u64,
    path: PathBuf,
    id: u64,
}

impl fmt::Debug for SimLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish()
    }
}

impl DirLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if state.generation == self.generation && state.locks.get(&self.path) == Some(&self.id) {
            state.locks.remove(&self.path);
        }
    }
}

impl Storage for SimStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        // Directories are durable at once: the log creates its store directory before
        // anything that matters is written, and models no crash during that step.
        let mut state = self.state.lock();
        state.check_fault(OpKind::Any)?;
        add_dir_all(&mut state.dirs, dir);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::Any)?;
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = state.entries.keys();
        let subdirs = state.dirs.iter();
        let names: BTreeSet<String> = files
            .chain(subdirs)
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        Ok(names.into_iter().collect())
    }

    fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        let mut state = self.state.lock();
        let kind = match mode {
            OpenMode::CreateNew => OpKind::Namespace,
            OpenMode::ReadWrite | OpenMode::ReadOnly => OpKind::Any,
        };
        state.check_fault(kind)?;
        let inode = match mode {
            OpenMode::CreateNew => {
                state.require_dir(path)?;
                if state.entries.contains_key(path) || state.dirs.contains(path) {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{}: file exists", path.display()),
                    ));
                }
                let id = state.new_inode(Inode::default());
                state.record_dir_change(vec![(path.to_owned(), Some(id))]);
                state.stats.namespace_ops += 1;
                id
            }
            OpenMode::ReadWrite | OpenMode::ReadOnly => {
                *state.entries.get(path).ok_or_else(|| not_found(path))?
            }
        };
        Ok(Arc::new(SimFile {
            state: Arc::clone(&self.state),
            generation: state.generation,
            inode,
            writable: mode != OpenMode::ReadOnly,
            path: path.to_owned(),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::Namespace)?;
        if !state.entries.contains_key(path) {
            return Err(not_found(path));
        }
        state.record_dir_change(vec![(path.to_owned(), None)]);
        state.stats.namespace_ops += 1;
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::Namespace)?;
        let id = *state.entries.get(from).ok_or_else(|| not_found(from))?;
        state.require_dir(to)?;
        if from != to {
            state.record_dir_change(vec![(to.to_owned(), Some(id)), (from.to_owned(), None)]);
        }
        state.stats.namespace_ops += 1;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::SyncDir)?;
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        for change in &mut state.pending_dir_changes {
            change.entries.retain(|(p, _)| !in_dir(p));
        }
        state.pending_dir_changes.retain(|c| !c.entries.is_empty());
        let State {
            entries,
            durable_entries,
            ..
        } = &mut *state;
        durable_entries.retain(|p, _| !in_dir(p));
        durable_entries.extend(
            entries
                .iter()
                .filter(|(p, _)| in_dir(p))
                .map(|(p, i)| (p.clone(), *i)),
        );
        state.stats.sync_dir += 1;
        Ok(())
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::Any)?;
        state.require_dir(path)?;
        if state.locks.contains_key(path) {
            return Ok(None);
        }
        if !state.entries.contains_key(path) {
            // Like the real implementation, the lock file is created when missing.
            let id = state.new_inode(Inode::default());
            state.record_dir_change(vec![(path.to_owned(), Some(id))]);
        }
        let id = state.next_lock;
        state.next_lock += 1;
        state.locks.insert(path.to_owned(), id);
        Ok(Some(Box::new(SimLock {
            state: Arc::clone(&self.state),
            generation: state.generation,
            path: path.to_owned(),
            id,
        })))
    }
}
