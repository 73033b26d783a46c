//! The one place that maps files into memory.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::path::Path;

use bytes::Bytes;

/// Maps a sealed segment (or a cache file) read-only and hands it out as `Bytes` that own the mapping.
pub(crate) fn map_file(file: &File, path: &Path) -> io::Result<Bytes> {
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: a mapping is sound only while no one modifies or truncates the file under it.
    // Two kinds of file are mapped. (1) The active segment, during an open for writing only:
    // the mapping is scanned and dropped before `open` writes to or truncates the file, and
    // that open holds the store's LOCK, so nothing else writes it meanwhile. (2) Sealed
    // segments, for good. A sealed segment is immutable by construction: the log writes a
    // segment only while it is the active segment, seals it (footer, fsync) before this
    // long-lived mapping is made, and from then on neither writes nor truncates it. Reclaim
    // never writes a mapped file either: it removes a whole file (unlink), or rewrites a
    // segment by writing a new file under another name and renaming it over the segment's
    // name, which unlinks the old file without touching its bytes. An unlinked file's blocks
    // stay valid for every mapping of it until the last one is dropped. Other writers are kept out by the
    // store's exclusive LOCK file, which every sessionlog process opening for writing takes.
    // (3) Large cache files of the sessionlog facade (projection checkpoints): each is written
    // whole under a temporary name, then renamed into place, and from then on only appended
    // to (a newer checkpoint as a frame after its end), never truncated or rewritten; a
    // mapping covers the length the file had when it was made, which no append touches. A
    // newer file replaces it by another rename and a deleted session's by an unlink,
    // neither of which touches the mapped bytes.
    // A read-only open takes no lock, so it maps only segments that a later segment follows:
    // a writer created that next segment only after sealing this one, and never changes it
    // again. The last segment, which a live writer may still append to, seal or cut, is
    // copied by a read-only open, never mapped. The one exception is a writer's open
    // rebuilding a damaged footer of such a segment, which is damage an operator repairs
    // while no reader runs. A program that ignores the lock and edits segment files by hand
    // is outside this contract, as it is for any database file.
    let map = unsafe { memmap2::MmapOptions::new().map(file) }
        .map_err(|e| io::Error::new(e.kind(), format!("mapping {}: {e}", path.display())))?;
    Ok(Bytes::from_owner(map))
}
