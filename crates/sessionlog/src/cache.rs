//! The checkpoint cache: per session, the checkpoint of its state machine together with the
//! watermark (records folded) and the identity of the log it was folded from.
//! spec: format-spec/cache.md
//!
//! The cache is disposable. A file that is missing, torn, corrupt, of another format or state
//! version, from another store or stream, or ahead of the log (a tail was cut) is detected and
//! the state is rebuilt from the log. A file is written only for a watermark whose records
//! are durable, so a crash can never take back records the cache has folded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use sessionlog_log::storage::OpenMode;
use sessionlog_log::{Storage, StorageFile, StreamId};

/// `SLPC` in little-endian byte order.
pub const CACHE_MAGIC: u32 = u32::from_le_bytes(*b"SLPC");

/// Version of the cache file layout: 3, a file of frames (one or more checkpoints, each
/// framed as a whole version 2 file was, appended one after another).
pub const CACHE_FORMAT_VERSION: u32 = 3;

/// The version 2 layout, a file of exactly one frame of the same layout, which is read as
/// such.
const ONE_FRAME_VERSION: u32 = 2;

/// The cache directory inside a store directory.
pub const CACHE_DIR: &str = "cache";

/// The fixed part of a cache file. spec: cache.md#file
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHeader {
    /// The store the state was folded from.
    pub store_id: [u8; 16],
    /// The stream (session) it was folded from.
    pub stream_id: u64,
    /// Records folded: the header record and events `0..watermark - 1`.
    pub watermark: u64,
    /// CRC-32 of the payload of record `watermark - 1`, re-checked against the log.
    pub last_record_crc: u32,
}

/// One named, versioned section of a cache file (the session state's checkpoint, or a
/// projection's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section<'a> {
    /// What the bytes are.
    pub name: &'a str,
    /// The version of their encoding.
    pub version: u32,
    /// The encoded bytes.
    pub bytes: &'a [u8],
}

/// Why a cache file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheMiss {
    /// No file.
    Missing,
    /// The file fails verification (torn, bit rot, wrong magic or format version).
    Corrupt(String),
    /// The file is intact but does not match this log (store, stream, watermark, record).
    Stale(String),
    /// A section is of another version, or does not decode.
    Incompatible(String),
}

impl std::fmt::Display for CacheMiss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheMiss::Missing => f.write_str("missing"),
            CacheMiss::Corrupt(w) => write!(f, "corrupt: {w}"),
            CacheMiss::Stale(w) => write!(f, "stale: {w}"),
            CacheMiss::Incompatible(w) => write!(f, "incompatible: {w}"),
        }
    }
}

pub(crate) fn cache_path(dir: &Path, stream: StreamId) -> PathBuf {
    dir.join(CACHE_DIR).join(format!("{:020}.slpc", stream.0))
}

/// The checkpoint file of projection `projection` of `stream`. spec: cache.md#projections
pub(crate) fn projection_path(dir: &Path, stream: StreamId, projection: &str) -> PathBuf {
    dir.join(CACHE_DIR)
        .join(format!("{:020}.{projection}.slpv", stream.0))
}

/// The file of appended part `part` of generation `generation` of projection `projection`
/// of `stream`. spec: cache.md#appended-parts
pub(crate) fn appended_path(
    dir: &Path,
    stream: StreamId,
    projection: &str,
    generation: u64,
    part: usize,
) -> PathBuf {
    dir.join(CACHE_DIR).join(format!(
        "{:020}.{projection}.{generation:016x}.{part}.slpa",
        stream.0
    ))
}

/// The generations of appended parts of projection `projection` of `stream` that have a
/// file in the cache directory, each with the names of its files.
pub(crate) fn appended_generations(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    stream: StreamId,
    projection: &str,
) -> std::io::Result<Vec<(u64, String)>> {
    let names = match storage.list_dir(&dir.join(CACHE_DIR)) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let prefix = format!("{:020}.{projection}.", stream.0);
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let rest = name.strip_prefix(&prefix)?.strip_suffix(".slpa")?;
            let (generation, part) = rest.split_once('.')?;
            if generation.len() != 16
                || part.is_empty()
                || !part.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            let generation = u64::from_str_radix(generation, 16).ok()?;
            Some((generation, name))
        })
        .collect())
}

/// Where a checkpoint's appended parts are: their generation, and each part's length and
/// CRC-32 as far as the checkpoint covers it. spec: cache.md#appended-parts
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppendedParts {
    pub(crate) generation: u64,
    pub(crate) parts: Vec<(u64, u32)>,
}

impl AppendedParts {
    /// The most parts a checkpoint may name.
    const MAX_PARTS: usize = 16;

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        for &(len, crc) in &self.parts {
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&crc.to_le_bytes());
        }
    }

    /// The descriptor at the start of `section`, and the bytes after it.
    pub(crate) fn decode(section: &[u8]) -> Option<(AppendedParts, &[u8])> {
        let generation = u64::from_le_bytes(section.get(..8)?.try_into().ok()?);
        let count = u32::from_le_bytes(section.get(8..12)?.try_into().ok()?) as usize;
        if count > Self::MAX_PARTS {
            return None;
        }
        let mut at = 12;
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            let len = u64::from_le_bytes(section.get(at..at + 8)?.try_into().ok()?);
            let crc = u32::from_le_bytes(section.get(at + 8..at + 12)?.try_into().ok()?);
            parts.push((len, crc));
            at += 12;
        }
        Some((AppendedParts { generation, parts }, section.get(at..)?))
    }
}

/// The checkpoint file of store-wide projection `projection`. spec: cache.md#store-wide-projections
pub(crate) fn store_projection_path(dir: &Path, projection: &str) -> PathBuf {
    dir.join(CACHE_DIR).join(format!("store.{projection}.slpw"))
}

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 of a record payload, as stored in [`CacheHeader::last_record_crc`].
pub fn record_crc(payload: &[u8]) -> u32 {
    crc(payload)
}

/// Encodes a cache file. spec: cache.md#file
pub fn encode(header: &CacheHeader, sections: &[Section<'_>]) -> Vec<u8> {
    let len: usize = sections
        .iter()
        .map(|s| 16 + s.name.len() + s.bytes.len())
        .sum();
    let mut out = Vec::with_capacity(48 + len);
    put_header(&mut out, header, sections.len());
    for s in sections {
        put_section_head(&mut out, s.name, s.version, s.bytes.len());
        out.extend_from_slice(s.bytes);
    }
    finish(out)
}

/// The framing of a cache file of one section whose bytes are `pieces` in order: what goes
/// before them and the checksum that goes after them (a large projection checkpoint is
/// then written from the buffers its state keeps, not copied into the file's bytes first).
/// spec: cache.md#file
pub(crate) fn frame_one(
    header: &CacheHeader,
    name: &str,
    version: u32,
    pieces: &[&[u8]],
) -> (Vec<u8>, [u8; 4]) {
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    let mut head = Vec::with_capacity(64 + name.len());
    put_header(&mut head, header, 1);
    put_section_head(&mut head, name, version, len);
    let mut sum = crc32fast::Hasher::new();
    sum.update(&head);
    for piece in pieces {
        sum.update(piece);
    }
    (head, sum.finalize().to_le_bytes())
}

/// The fixed part of a cache file, up to its section count.
fn put_header(out: &mut Vec<u8>, header: &CacheHeader, sections: usize) {
    out.extend_from_slice(&CACHE_MAGIC.to_le_bytes());
    out.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&header.store_id);
    out.extend_from_slice(&header.stream_id.to_le_bytes());
    out.extend_from_slice(&header.watermark.to_le_bytes());
    out.extend_from_slice(&header.last_record_crc.to_le_bytes());
    out.extend_from_slice(&(sections as u32).to_le_bytes());
}

/// A section's name, version and length, which its bytes follow.
fn put_section_head(out: &mut Vec<u8>, name: &str, version: u32, len: usize) {
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

/// Appends the checksum of everything before it.
fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let sum = crc(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Verifies a cache file and returns the header of its newest checkpoint and the bytes of
/// each of the `expected` sections (name and version), in that order. The file is a run of
/// frames: the newest is the last one that verifies, among those whose bounds lie in the
/// file one after another from its start (a torn or damaged frame ends the run). A
/// checkpoint with other sections, or sections of other versions, is
/// [`CacheMiss::Incompatible`]. spec: cache.md#frames
pub fn decode<'a>(
    bytes: &'a [u8],
    expected: &[(&str, u32)],
) -> Result<(CacheHeader, Vec<&'a [u8]>), CacheMiss> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Some(end) = frame_end(bytes, at) {
        frames.push(at..end);
        at = end;
    }
    let mut damage = None;
    for frame in frames.into_iter().rev() {
        match decode_frame(&bytes[frame], expected) {
            Err(miss @ CacheMiss::Corrupt(_)) => {
                damage.get_or_insert(miss);
            }
            decoded => return decoded,
        }
    }
    // No frame verifies: the whole file read as one says why.
    match damage {
        Some(miss) => Err(miss),
        None => decode_frame(bytes, expected),
    }
}

/// Where the frame that starts at `at` ends, from the lengths its head and section heads
/// give (not yet verified), when the file holds all of it.
fn frame_end(bytes: &[u8], at: usize) -> Option<usize> {
    let frame = bytes.get(at..)?;
    let mut r = Reader(frame);
    if r.u32().ok()? != CACHE_MAGIC || !readable_version(r.u32().ok()?) {
        return None;
    }
    // Store id, stream id, watermark and record CRC, then the sections.
    r.take(16 + 8 + 8 + 4).ok()?;
    for _ in 0..r.u32().ok()? {
        let name = r.u32().ok()? as usize;
        // The name, then the section's version.
        r.take(name.checked_add(4)?).ok()?;
        let len = usize::try_from(r.u64().ok()?).ok()?;
        r.take(len).ok()?;
    }
    r.take(4).ok()?;
    Some(at + frame.len() - r.0.len())
}

/// Whether a frame of cache format `version` is read: this build's, or the one-frame
/// layout before it.
fn readable_version(version: u32) -> bool {
    version == CACHE_FORMAT_VERSION || version == ONE_FRAME_VERSION
}

/// [`decode`] of one frame.
fn decode_frame<'a>(
    bytes: &'a [u8],
    expected: &[(&str, u32)],
) -> Result<(CacheHeader, Vec<&'a [u8]>), CacheMiss> {
    let corrupt = |w: &str| CacheMiss::Corrupt(w.to_owned());
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err(corrupt("shorter than a checksum"));
    };
    let (body, sum) = bytes.split_at(body_len);
    let stored = u32::from_le_bytes(sum.try_into().map_err(|_| corrupt("checksum"))?);
    if crc(body) != stored {
        return Err(corrupt("checksum mismatch"));
    }
    let mut r = Reader(body);
    if r.u32()? != CACHE_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let version = r.u32()?;
    if !readable_version(version) {
        return Err(CacheMiss::Incompatible(format!(
            "cache format version {version}, this build reads {CACHE_FORMAT_VERSION}"
        )));
    }
    let store_id: [u8; 16] = r.take(16)?.try_into().map_err(|_| corrupt("store id"))?;
    let header = CacheHeader {
        store_id,
        stream_id: r.u64()?,
        watermark: r.u64()?,
        last_record_crc: r.u32()?,
    };
    let count = r.u32()? as usize;
    if count != expected.len() {
        return Err(CacheMiss::Incompatible(format!(
            "{count} sections cached, {} expected",
            expected.len()
        )));
    }
    let mut sections = Vec::with_capacity(count);
    for (want_name, want_version) in expected {
        let name_len = r.u32()? as usize;
        let name = r.take(name_len)?;
        let version = r.u32()?;
        let len = usize::try_from(r.u64()?).map_err(|_| corrupt("section length"))?;
        let section = r.take(len)?;
        if name != want_name.as_bytes() || version != *want_version {
            return Err(CacheMiss::Incompatible(format!(
                "section {} v{version} cached, {want_name} v{want_version} expected",
                String::from_utf8_lossy(name),
            )));
        }
        sections.push(section);
    }
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes after the sections"));
    }
    Ok((header, sections))
}

/// A bounds-checked little-endian reader of the file framing.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CacheMiss> {
        if self.0.len() < n {
            return Err(CacheMiss::Corrupt("file is truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, CacheMiss> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, CacheMiss> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
}
/// Files at least this large are mapped rather than read: a large projection checkpoint
/// (a long session's transcript) is then read in place by the projection, page by page as
/// it is used, instead of being copied whole first.
const MAP_BYTES: u64 = 1 << 20;

/// Reads a cache file, if any: mapped when large, read into memory otherwise. A mapping of
/// the file never changes under its reader: a cache file is written under a temporary name
/// and put in place whole, and from then on only appended to (frames after the bytes
/// mapped), never truncated or rewritten (see `map_readonly`).
pub(crate) fn read(
    storage: &Arc<dyn Storage>,
    path: &Path,
) -> Result<Option<Bytes>, std::io::Error> {
    read_up_to(storage, path, None)
}

/// The first `len` bytes of the file at `path` (mapped when they are many), `None` when
/// there is no file; a file shorter than `len` is an error. An appended part is read so:
/// bytes a writer appended after the checkpoint naming `len` are not read, and since a
/// part file is only ever appended to (never truncated or rewritten), a mapping of it
/// never changes under its reader.
pub(crate) fn read_prefix(
    storage: &Arc<dyn Storage>,
    path: &Path,
    len: u64,
) -> Result<Option<Bytes>, std::io::Error> {
    read_up_to(storage, path, Some(len))
}

/// The file at `path` whole, or its first `len` bytes.
fn read_up_to(
    storage: &Arc<dyn Storage>,
    path: &Path,
    len: Option<u64>,
) -> Result<Option<Bytes>, std::io::Error> {
    let file = match storage.open_file(path, OpenMode::ReadOnly) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let have = file.len()?;
    let len = len.unwrap_or(have);
    if have < len {
        return Err(std::io::Error::other(format!(
            "{} holds {have} bytes, the checkpoint covers {len}",
            path.display()
        )));
    }
    let n = usize::try_from(len).map_err(|_| std::io::Error::other("cache file too large"))?;
    if len >= MAP_BYTES {
        return file.map_readonly().map(|b| Some(b.slice(..n)));
    }
    let mut buf = vec![0u8; n];
    file.read_exact_at(&mut buf, 0)?;
    Ok(Some(Bytes::from(buf)))
}

/// How long a cache file may grow by appended frames, for a frame of `frame` bytes: to
/// eight frames, but not past 64 KiB, and never less than one block of 4 KiB (which a file
/// takes on disk however short it is). The checkpoint that would take the file past it
/// replaces the file instead. So a small checkpoint is appended several times to one file
/// (no file created or removed for it), while one of more than 32 KiB, whose writing costs
/// more than a file's creation does, always starts a new file; a cache file holds at most
/// 64 KiB, or its one frame. spec: cache.md#frames
pub fn append_limit(frame: u64) -> u64 {
    frame.saturating_mul(8).clamp(4 << 10, 64 << 10)
}

/// The most files a store remembers the length of (about 100 bytes each); past it, the
/// store forgets them all, and each of their next checkpoints replaces its file.
const REMEMBERED_FILES: usize = 1 << 14;

/// The most cache files the stores of a process keep open between checkpoints, together
/// (so that a process with many stores open does not run out of file descriptors): past
/// it, the file a store held longest is closed (its next checkpoint opens it again by
/// name), or, when the others hold them all, the file written is not held. A checkpoint
/// appended to a file held open costs two calls (its size, the write) instead of four and
/// a path looked up (open, size, write, close).
const HELD_FILES: usize = 64;

/// Cache files held open by every store of the process.
static HELD_OPEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A cache file held open between checkpoints, counted in [`HELD_OPEN`] while it lives.
#[derive(Debug)]
struct HeldFile(Arc<dyn StorageFile>);

impl HeldFile {
    /// Holds `file`, unless the process holds [`HELD_FILES`] already.
    fn hold(file: Arc<dyn StorageFile>) -> Option<HeldFile> {
        use std::sync::atomic::Ordering::Relaxed;
        if HELD_OPEN.fetch_add(1, Relaxed) >= HELD_FILES {
            HELD_OPEN.fetch_sub(1, Relaxed);
            return None;
        }
        Some(HeldFile(file))
    }
}

impl Drop for HeldFile {
    fn drop(&mut self) {
        HELD_OPEN.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The cache files a store wrote and may append frames to: each with the length it left
/// it at, and the file itself while it is held open ([`HELD_FILES`]). Only a file this
/// store wrote, still of that length (and still under its name), is appended to: it then
/// ends with a whole frame (a file left by a crash may end torn, and a frame appended
/// after a torn one would never be read). A store writes cache files only under its
/// exclusive lock, so no other writer changes them.
#[derive(Debug, Default)]
pub(crate) struct Written(Mutex<WrittenFiles>);

#[derive(Debug, Default)]
struct WrittenFiles {
    files: HashMap<PathBuf, WrittenFile>,
    /// The paths whose files this store holds, oldest first.
    held: std::collections::VecDeque<PathBuf>,
}

#[derive(Debug)]
struct WrittenFile {
    len: u64,
    file: Option<HeldFile>,
}

impl WrittenFiles {
    /// Closes the file this store held longest, if it holds any; whether it closed one.
    fn close_oldest(&mut self) -> bool {
        while let Some(oldest) = self.held.pop_front() {
            if let Some(f) = self.files.get_mut(&oldest) {
                if f.file.take().is_some() {
                    return true;
                }
            }
        }
        false
    }
}

impl Written {
    /// Forgets `path` (its next checkpoint replaces it): a read found it damaged, or it was
    /// removed.
    pub(crate) fn forget(&self, path: &Path) {
        self.take(path);
    }

    /// The length this store left `path` at and the file if it is held, which it forgets
    /// meanwhile.
    fn take(&self, path: &Path) -> Option<WrittenFile> {
        let mut w = self.0.lock();
        let taken = w.files.remove(path);
        if taken.as_ref().is_some_and(|t| t.file.is_some()) {
            w.held.retain(|p| p != path);
        }
        taken
    }

    fn put(&self, path: &Path, len: u64, file: Arc<dyn StorageFile>) {
        let mut w = self.0.lock();
        if w.files.len() >= REMEMBERED_FILES {
            w.files.clear();
            w.held.clear();
        }
        // The process's bound is this store's too: a store holding all of them makes room
        // by closing its oldest.
        let mut held = HeldFile::hold(file.clone());
        if held.is_none() && w.close_oldest() {
            held = HeldFile::hold(file);
        }
        if held.is_some() {
            w.held.push_back(path.to_owned());
        }
        w.files
            .insert(path.to_owned(), WrittenFile { len, file: held });
    }
}

/// Writes a checkpoint, a frame whose bytes are `pieces` in order, to a cache file:
/// appended to the file when this store left it so and it has room ([`append_limit`]),
/// else in a new file put in place of the old one. Not synced: a cache that a crash tears
/// or loses is detected and rebuilt.
pub(crate) fn write_pieces(
    storage: &Arc<dyn Storage>,
    written: &Written,
    path: &Path,
    pieces: &[&[u8]],
) -> Result<(), std::io::Error> {
    let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
    // Taken out while the frame is written: a failed write leaves the file forgotten.
    if let Some(left) = written.take(path) {
        let at = left.len;
        if at.saturating_add(len) <= append_limit(len) {
            if let Some(file) = append(storage, path, left, pieces)? {
                written.put(path, at + len, file);
                return Ok(());
            }
        }
    }
    let file = replace(storage, path, pieces)?;
    written.put(path, len, file);
    Ok(())
}

/// Appends `pieces` to the file this store left at `path` (the one it holds, if it is
/// still under that name, else the one it opens there) if it holds the bytes it left;
/// `None` when it is missing or of another length.
fn append(
    storage: &Arc<dyn Storage>,
    path: &Path,
    left: WrittenFile,
    pieces: &[&[u8]],
) -> Result<Option<Arc<dyn StorageFile>>, std::io::Error> {
    let held = match left.file {
        // The file is held again, if it is appended to, when the store puts it back.
        Some(held) => {
            let file = held.0.clone();
            drop(held);
            file.len_if_named()?.map(|len| (file, len))
        }
        None => None,
    };
    let (file, len) = match held {
        Some(held) => held,
        None => match storage.open_file(path, OpenMode::ReadWrite) {
            Ok(f) => {
                let len = f.len()?;
                (f, len)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    if len != left.len {
        return Ok(None);
    }
    write_all(&*file, left.len, pieces)?;
    Ok(Some(file))
}

/// Writes `pieces` to a new file put in place of the one at `path`: under a temporary name
/// first, then exchanged for (or renamed over) the old file, so a reader opening the name
/// finds the old file or the new one, whole. Returns the new file.
fn replace(
    storage: &Arc<dyn Storage>,
    path: &Path,
    pieces: &[&[u8]],
) -> Result<Arc<dyn StorageFile>, std::io::Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = match storage.open_file(&tmp, OpenMode::CreateNew) {
        Ok(f) => f,
        // A temporary file a crash left behind.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            storage.remove_file(&tmp)?;
            storage.open_file(&tmp, OpenMode::CreateNew)?
        }
        // The first cache file of the store.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                storage.create_dir_all(dir)?;
            }
            storage.open_file(&tmp, OpenMode::CreateNew)?
        }
        Err(e) => return Err(e),
    };
    write_all(&*file, 0, pieces)?;
    storage.replace_unordered(&tmp, path)?;
    Ok(file)
}

/// Frames up to this long are gathered into one buffer and written by one call: a
/// checkpoint is a few pieces (a head, the state, a checksum), and at the store's cadence
/// a write call per piece costs more than copying them.
const GATHERED: usize = 64 << 10;

/// Writes `pieces` one after another from `at`: gathered into one write when they are
/// several and short in all ([`GATHERED`]), else one write per piece.
fn write_all(
    file: &dyn sessionlog_log::storage::StorageFile,
    mut at: u64,
    pieces: &[&[u8]],
) -> Result<(), std::io::Error> {
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    if pieces.len() > 1 && len <= GATHERED {
        let mut gathered = Vec::with_capacity(len);
        for piece in pieces {
            gathered.extend_from_slice(piece);
        }
        return file.write_all_at(&gathered, at);
    }
    for piece in pieces.iter().filter(|p| !p.is_empty()) {
        file.write_all_at(piece, at)?;
        at += piece.len() as u64;
    }
    Ok(())
}

/// Removes a session's cache file if there is one (and forgets it, if this store wrote
/// it).
pub(crate) fn remove(
    storage: &Arc<dyn Storage>,
    written: &Written,
    path: &Path,
) -> Result<(), std::io::Error> {
    written.forget(path);
    match storage.remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sessionlog_log::storage::RealStorage;
    use sessionlog_log::Storage;

    use super::{
        append_limit, decode, encode, frame_one, write_pieces, CacheHeader, CacheMiss, Section,
        Written, CACHE_MAGIC, HELD_FILES, HELD_OPEN,
    };

    fn header(watermark: u64) -> CacheHeader {
        CacheHeader {
            store_id: [7; 16],
            stream_id: 3,
            watermark,
            last_record_crc: 0xDEAD_BEEF,
        }
    }

    fn frame(watermark: u64, bytes: &[u8]) -> Vec<u8> {
        let section = Section {
            name: "stats",
            version: 1,
            bytes,
        };
        encode(&header(watermark), &[section])
    }

    fn newest(file: &[u8]) -> Result<(u64, Vec<u8>), CacheMiss> {
        decode(file, &[("stats", 1)]).map(|(h, parts)| (h.watermark, parts[0].to_vec()))
    }

    #[test]
    fn the_newest_frame_that_verifies_is_the_checkpoint() {
        let (a, b, c) = (frame(5, b"five"), frame(9, b"nine!"), frame(14, &[3; 300]));
        let file = [&a[..], &b, &c].concat();
        assert_eq!(newest(&file), Ok((14, vec![3; 300])));
        // A frame torn anywhere (a prefix of it written) leaves the one before it.
        for cut in 1..c.len() {
            let torn = [&a[..], &b, &c[..cut]].concat();
            assert_eq!(newest(&torn), Ok((9, b"nine!".to_vec())), "cut at {cut}");
        }
        // A bit flipped anywhere in the newest frame leaves one of the frames before it
        // (a flip in its lengths may make it end where the file does not).
        for at in 0..c.len() {
            let mut flipped = file.clone();
            flipped[a.len() + b.len() + at] ^= 0x10;
            let got = newest(&flipped);
            assert!(
                got == Ok((9, b"nine!".to_vec())) || got == Ok((5, b"five".to_vec())),
                "flip at {at}: {got:?}"
            );
        }
        // A flip in the first frame's lengths ends the run there: nothing verifies.
        let mut lost = file.clone();
        lost[44] ^= 1;
        assert!(matches!(newest(&lost), Err(CacheMiss::Corrupt(_))));
        // Zeros where a frame would start (a power loss kept the length, not the data).
        let zeroed = [&a[..], &vec![0; b.len()], &c].concat();
        assert_eq!(newest(&zeroed), Ok((5, b"five".to_vec())));
    }

    #[test]
    fn a_file_of_the_one_frame_layout_is_read_as_one_frame() {
        let with_version = |version: u32, bytes: &[u8]| {
            let mut file = frame(7, bytes);
            file[4..8].copy_from_slice(&version.to_le_bytes());
            let body = file.len() - 4;
            let sum = crc32fast::hash(&file[..body]);
            file[body..].copy_from_slice(&sum.to_le_bytes());
            file
        };
        let file = with_version(2, b"older layout");
        assert_eq!(newest(&file), Ok((7, b"older layout".to_vec())));
        // Another version, or nothing that verifies, says why.
        assert!(matches!(
            newest(&with_version(4, b"x")),
            Err(CacheMiss::Incompatible(_))
        ));
        assert_eq!(CACHE_MAGIC.to_le_bytes(), *b"SLPC");
        assert!(matches!(newest(b"SL"), Err(CacheMiss::Corrupt(_))));
    }

    #[test]
    fn a_file_grows_to_eight_frames_within_64_kib_or_a_block() {
        for (frame, limit) in [
            (0, 4096),
            (300, 4096),
            (1000, 8000),
            (8192, 65_536),
            (10_000, 65_536),
            (40_000, 65_536),
            (u64::MAX, 65_536),
        ] {
            assert_eq!(append_limit(frame), limit, "frame of {frame} bytes");
        }
    }

    #[test]
    fn files_past_those_held_open_are_appended_to_by_name() {
        let dir = tempfile::tempdir().expect("dir");
        let storage: Arc<dyn Storage> = Arc::new(RealStorage);
        let written = Written::default();
        let paths: Vec<_> = (0..HELD_FILES + 3)
            .map(|i| dir.path().join("cache").join(format!("{i}.slpv")))
            .collect();
        let inode = |p: &std::path::Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).expect("file").ino()
        };
        // A second store of the process writes as many files beside: the two hold no more
        // than the process may, and the files they do not hold are appended to by name.
        let beside = Written::default();
        let others: Vec<_> = (0..HELD_FILES)
            .map(|i| dir.path().join("cache").join(format!("beside-{i}.slpv")))
            .collect();
        for round in 1..=3u64 {
            let f = frame(round, b"state");
            for (store, path) in paths
                .iter()
                .map(|p| (&written, p))
                .chain(others.iter().map(|p| (&beside, p)))
            {
                write_pieces(&storage, store, path, &[&f[..10], &f[10..]]).expect("write");
                assert!(HELD_OPEN.load(std::sync::atomic::Ordering::Relaxed) <= HELD_FILES);
            }
            assert!(written.0.lock().held.len() <= HELD_FILES);
        }
        drop(beside);
        for path in &others {
            let file = std::fs::read(path).expect("read");
            assert_eq!(newest(&file), Ok((3, b"state".to_vec())));
            assert_eq!(
                file.len(),
                3 * frame(1, b"state").len(),
                "{}",
                path.display()
            );
        }
        let first = inode(&paths[0]);
        for path in &paths {
            // Every file took its three checkpoints as frames, held open or not.
            let file = std::fs::read(path).expect("read");
            assert_eq!(
                file.len(),
                3 * frame(1, b"state").len(),
                "{}",
                path.display()
            );
            assert_eq!(newest(&file), Ok((3, b"state".to_vec())));
        }
        // A held file renamed over by another is not appended to: the one now under the
        // name is, if it is as long as the store left its own, else it is replaced.
        let last = paths.last().expect("a path");
        let other = dir.path().join("other");
        std::fs::write(&other, b"a file of another length").expect("other");
        std::fs::rename(&other, last).expect("rename");
        let f = frame(4, b"after");
        write_pieces(&storage, &written, last, &[&f[..]]).expect("write");
        assert_eq!(std::fs::read(last).expect("read"), f);
        assert_eq!(inode(&paths[0]), first);
    }

    #[test]
    fn a_store_appends_checkpoints_to_a_file_it_wrote_until_it_is_full() {
        let dir = tempfile::tempdir().expect("dir");
        let storage: Arc<dyn Storage> = Arc::new(RealStorage);
        let path = dir.path().join("cache").join("s.slpv");
        let written = Written::default();
        let write = |written: &Written, watermark: u64, bytes: &[u8]| {
            let f = frame(watermark, bytes);
            write_pieces(&storage, written, &path, &[&f[..10], &f[10..]]).expect("write");
            f.len() as u64
        };
        let len = |p: &std::path::Path| std::fs::metadata(p).expect("file").len();
        let inode = |p: &std::path::Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).expect("file").ino()
        };
        // The first creates the directory and the file; the next are appended to it.
        let one = write(&written, 1, &[1; 1000]);
        let first = inode(&path);
        let mut total = one;
        let mut n = 1;
        while total + one <= append_limit(one) {
            total += write(&written, 1 + n, &[1; 1000]);
            n += 1;
            assert_eq!((len(&path), inode(&path)), (total, first));
            let file = std::fs::read(&path).expect("read");
            assert_eq!(newest(&file), Ok((n, vec![1; 1000])));
        }
        // The one that would take it past the limit replaces it.
        write(&written, 100, &[2; 1000]);
        assert_eq!(len(&path), one);
        assert_ne!(inode(&path), first);
        assert!(!dir.path().join("cache").join("s.slpv.tmp").exists());
        // A checkpoint of more than 32 KiB always starts a new file.
        written.forget(&path);
        let big = write(&written, 101, &[3; 33_000]);
        let was = inode(&path);
        assert_eq!(len(&path), big);
        let bigger = write(&written, 102, &[4; 33_001]);
        assert_eq!(len(&path), bigger);
        assert_ne!(inode(&path), was);
        // A file this store did not leave so is replaced, not appended to: another store's
        // (one forgets every file), or one whose length changed under it.
        let other = Written::default();
        let was = inode(&path);
        write(&other, 104, b"other");
        assert_ne!(inode(&path), was);
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        use std::io::Write;
        (&f).write_all(b"junk").expect("junk");
        let was = inode(&path);
        let size = write(&other, 105, b"after junk");
        assert_eq!(
            (len(&path), newest(&std::fs::read(&path).unwrap())),
            (size, Ok((105, b"after junk".to_vec())))
        );
        assert_ne!(inode(&path), was);
        // A file removed is written again whole; a forgotten one is replaced.
        std::fs::remove_file(&path).expect("remove");
        let size = write(&other, 106, b"again");
        assert_eq!(len(&path), size);
        let was = inode(&path);
        other.forget(&path);
        write(&other, 107, b"forgotten");
        assert_ne!(inode(&path), was);
    }

    #[test]
    fn a_section_framed_around_its_pieces_encodes_as_a_section_handed_over() {
        let header = CacheHeader {
            store_id: [7; 16],
            stream_id: 3,
            watermark: 12,
            last_record_crc: 0xDEAD_BEEF,
        };
        for bytes in [&b""[..], b"x", &[5u8; 1000]] {
            let section = Section {
                name: "transcript",
                version: 2,
                bytes,
            };
            // The same bytes as one piece, and cut into three (one of them empty).
            let cut = bytes.len() / 3;
            let (a, rest) = bytes.split_at(cut);
            for pieces in [vec![bytes], vec![a, &rest[..0], rest]] {
                let (head, sum) = frame_one(&header, "transcript", 2, &pieces);
                let mut framed = head;
                for piece in &pieces {
                    framed.extend_from_slice(piece);
                }
                framed.extend_from_slice(&sum);
                assert_eq!(framed, encode(&header, &[section]));
                let (h, parts) = decode(&framed, &[("transcript", 2)]).expect("decodes");
                assert_eq!((h, parts), (header, vec![bytes]));
            }
        }
    }
}
