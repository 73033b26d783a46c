//! The last segment of a read-only open, which is never mapped.
//!
//! A read-only open never maps a file that a live writer may still change: the last segment
//! (which a writer appends to, seals and truncates) is copied with positional reads, and
//! reads are then served from that copy; after a clean close it is read in place instead, by
//! positional reads up to the data the clean-close file describes. spec:
//! recovery.md#read-only-open

use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::storage::StorageFile;

/// Reads the whole file as it is now. A file that shrinks while it is read (a writer sealing
/// it) yields what was there; a file that grows yields at least its size when reading began.
pub(crate) fn read_copy(file: &dyn StorageFile) -> io::Result<Vec<u8>> {
    read_prefix(file, file.len()?)
}

/// Reads up to the first `len` bytes of the file (fewer if it ends first).
pub(crate) fn read_prefix(file: &dyn StorageFile, len: u64) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large to read"))?;
    read_span(file, 0, len)
}

/// Reads up to `len` bytes at `offset` (fewer if the file ends first).
pub(crate) fn read_span(file: &dyn StorageFile, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let got = read_full(file, &mut out, offset)?;
    out.truncate(got);
    Ok(out)
}

/// Reads into `buf` at `offset` until it is full or the file ends; the bytes read.
pub(crate) fn read_full(file: &dyn StorageFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match file.read_at(rest, offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Every write of a read-only stand-in for a segment file fails: a read-only log has
/// nothing to write.
macro_rules! refuse_writes {
    () => {
        fn write_all_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
            Err(read_only())
        }

        fn sync_data(&self) -> io::Result<()> {
            Err(read_only())
        }

        fn sync_all(&self) -> io::Result<()> {
            Err(read_only())
        }

        fn set_len(&self, _len: u64) -> io::Result<()> {
            Err(read_only())
        }

        fn allocate(&self, _len: u64) -> io::Result<()> {
            Err(read_only())
        }
    };
}

/// The last segment of a read-only log after a clean close, read in place: positional
/// reads of the file, up to the end of the data its clean-close file describes. Those
/// bytes were synced before that file was written, and a writer opening later only appends
/// after them (it seals after them too, and cuts only a torn tail, which lies after them):
/// so a reader may read them from the file instead of copying them at open, and a writer
/// never makes such a reader fault, as a mapping of a shrinking file would. Every attempt to
/// change it fails. spec: recovery.md#read-only-open
#[derive(Debug)]
pub(crate) struct PrefixFile {
    file: Arc<dyn StorageFile>,
    len: u64,
}

impl PrefixFile {
    pub(crate) fn new(file: Arc<dyn StorageFile>, len: u64) -> Self {
        PrefixFile { file, len }
    }
}

impl StorageFile for PrefixFile {
    refuse_writes!();

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let room = usize::try_from(self.len.saturating_sub(offset)).unwrap_or(usize::MAX);
        let want = buf.len().min(room);
        match buf.get_mut(..want) {
            Some(buf) if !buf.is_empty() => self.file.read_at(buf, offset),
            _ => Ok(0),
        }
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }

    /// A copy of the prefix: a mapping could see the file shrink.
    fn map_readonly(&self) -> io::Result<Bytes> {
        read_prefix(self, self.len).map(Bytes::from)
    }
}

/// A segment's bytes held in memory, standing in for the file in a read-only log. Every
/// attempt to change it fails: a read-only log has nothing to write.
#[derive(Debug)]
pub(crate) struct SnapshotFile {
    bytes: Bytes,
}

impl SnapshotFile {
    pub(crate) fn new(bytes: Bytes) -> Self {
        SnapshotFile { bytes }
    }
}

fn read_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "the store is open read-only",
    )
}

impl StorageFile for SnapshotFile {
    refuse_writes!();

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some(rest) = usize::try_from(offset)
            .ok()
            .and_then(|o| self.bytes.get(o..))
        else {
            return Ok(0);
        };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }

    fn map_readonly(&self) -> io::Result<Bytes> {
        Ok(self.bytes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_its_bytes_and_refuses_every_change() {
        let f = SnapshotFile::new(Bytes::from_static(b"abcdef"));
        let mut buf = [0u8; 4];
        assert_eq!(f.read_at(&mut buf, 4).unwrap(), 2);
        assert_eq!(&buf[..2], b"ef");
        assert_eq!(f.read_at(&mut buf, 99).unwrap(), 0);
        assert!(f.write_all_at(b"x", 0).is_err());
        assert!(f.set_len(0).is_err());
        assert!(f.sync_data().is_err());
        assert_eq!(read_copy(&f).unwrap(), b"abcdef");
    }
}
