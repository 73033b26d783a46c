//! The projection cache: per session, the projections' states together with the watermark
//! (records folded) and the identity of the log they were folded from. spec: format-spec/cache.md
//!
//! The cache is disposable. A file that is missing, torn, corrupt, of another format or state
//! version, from another store or stream, or ahead of the log (a tail was cut) is detected and
//! the states are rebuilt from the log. A file is written only for a watermark whose records
//! are durable, so a crash can never take back records the cache has folded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sessionlog_log::storage::OpenMode;
use sessionlog_log::{Storage, StreamId};

use crate::projection::{Projection, Reader};

/// `SLPC` in little-endian byte order.
pub const CACHE_MAGIC: u32 = u32::from_le_bytes(*b"SLPC");
/// Version of the cache file layout.
pub const CACHE_FORMAT_VERSION: u32 = 1;
/// The cache directory inside a store directory.
pub const CACHE_DIR: &str = "cache";

/// The fixed part of a cache file. spec: cache.md#file
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHeader {
    /// The store the states were folded from.
    pub store_id: [u8; 16],
    /// The stream (session) they were folded from.
    pub stream_id: u64,
    /// Records folded: the header record and events `0..watermark - 1`.
    pub watermark: u64,
    /// CRC-32 of the payload of record `watermark - 1`, re-checked against the log.
    pub last_record_crc: u32,
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
    /// A projection's state is of another version or does not decode.
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

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 of a record payload, as stored in [`CacheHeader::last_record_crc`].
pub fn record_crc(payload: &[u8]) -> u32 {
    crc(payload)
}

/// Encodes a cache file. spec: cache.md#file
pub fn encode(header: &CacheHeader, projections: &[&dyn Projection]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(&CACHE_MAGIC.to_le_bytes());
    out.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&header.store_id);
    out.extend_from_slice(&header.stream_id.to_le_bytes());
    out.extend_from_slice(&header.watermark.to_le_bytes());
    out.extend_from_slice(&header.last_record_crc.to_le_bytes());
    out.extend_from_slice(&(projections.len() as u32).to_le_bytes());
    let mut state = Vec::new();
    for p in projections {
        let name = p.name().as_bytes();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&p.state_version().to_le_bytes());
        state.clear();
        p.encode(&mut state);
        out.extend_from_slice(&(state.len() as u64).to_le_bytes());
        out.extend_from_slice(&state);
    }
    let sum = crc(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Verifies a cache file and loads the projections' states from it. On success every
/// projection holds the cached state; on a miss they are untouched.
pub fn decode(
    bytes: &[u8],
    projections: &mut [&mut dyn Projection],
) -> Result<CacheHeader, CacheMiss> {
    let corrupt = |w: &str| CacheMiss::Corrupt(w.to_owned());
    if bytes.len() < 4 {
        return Err(corrupt("shorter than a checksum"));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(sum.try_into().map_err(|_| corrupt("checksum"))?);
    if crc(body) != stored {
        return Err(corrupt("checksum mismatch"));
    }
    let mut r = Reader(body);
    let c = |e: String| CacheMiss::Corrupt(e);
    if r.u32().map_err(c)? != CACHE_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let version = r.u32().map_err(c)?;
    if version != CACHE_FORMAT_VERSION {
        return Err(CacheMiss::Incompatible(format!(
            "cache format version {version}"
        )));
    }
    let store_id: [u8; 16] = r
        .take(16)
        .map_err(c)?
        .try_into()
        .map_err(|_| corrupt("store id"))?;
    let header = CacheHeader {
        store_id,
        stream_id: r.u64().map_err(c)?,
        watermark: r.u64().map_err(c)?,
        last_record_crc: r.u32().map_err(c)?,
    };
    let count = r.u32().map_err(c)? as usize;
    if count != projections.len() {
        return Err(CacheMiss::Incompatible(format!(
            "{count} projections cached, {} expected",
            projections.len()
        )));
    }
    let mut states: Vec<&[u8]> = Vec::with_capacity(count);
    for p in projections.iter() {
        let name_len = r.u32().map_err(c)? as usize;
        let name = r.take(name_len).map_err(c)?;
        let state_version = r.u32().map_err(c)?;
        let len = usize::try_from(r.u64().map_err(c)?).map_err(|_| corrupt("state length"))?;
        let state = r.take(len).map_err(c)?;
        if name != p.name().as_bytes() || state_version != p.state_version() {
            return Err(CacheMiss::Incompatible(format!(
                "projection {} v{state_version} cached, {} v{} expected",
                String::from_utf8_lossy(name),
                p.name(),
                p.state_version()
            )));
        }
        states.push(state);
    }
    r.end().map_err(c)?;
    // Decode into copies first so a failure leaves the projections untouched.
    for (p, state) in projections.iter_mut().zip(states) {
        p.decode(state)
            .map_err(|e| CacheMiss::Incompatible(format!("{}: {e}", p.name())))?;
    }
    Ok(header)
}

/// Reads a session's cache file, if any.
pub(crate) fn read(
    storage: &Arc<dyn Storage>,
    path: &Path,
) -> Result<Option<Vec<u8>>, std::io::Error> {
    let file = match storage.open_file(path, OpenMode::ReadOnly) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.len()?;
    let mut buf =
        vec![0u8; usize::try_from(len).map_err(|_| std::io::Error::other("cache file too large"))?];
    file.read_exact_at(&mut buf, 0)?;
    Ok(Some(buf))
}

/// Replaces a session's cache file: write a temporary file, then rename it over the old one.
/// Not synced: a cache that a crash tears or loses is detected and rebuilt.
pub(crate) fn write(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), std::io::Error> {
    storage.create_dir_all(&dir.join(CACHE_DIR))?;
    let tmp = path.with_extension("slpc.tmp");
    match storage.remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let file = storage.open_file(&tmp, OpenMode::CreateNew)?;
    file.write_all_at(bytes, 0)?;
    drop(file);
    storage.rename(&tmp, path)
}

/// Removes a session's cache file if there is one.
pub(crate) fn remove(storage: &Arc<dyn Storage>, path: &Path) -> Result<(), std::io::Error> {
    match storage.remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
