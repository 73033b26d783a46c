//! The log's in-memory state: streams, their names, and where their records are.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use sessionlog_format::{
    CatalogCheckpoint, CatalogEntry, CatalogOp, CheckpointStream, RecordHeader, CATALOG_STREAM,
    KIND_CATALOG_CHECKPOINT, KIND_CATALOG_CREATE, KIND_CATALOG_DELETE, KIND_CATALOG_RENAME,
};

use crate::ids::{Lsn, SegmentId};
use crate::index::{ActiveStreamIndex, IdMap, SealedExtent};
use crate::segment::{catalog_entry, SealedSegment, StreamBook};
use crate::storage::StorageFile;

/// One stream.
#[derive(Debug, Default, Clone)]
pub(crate) struct StreamState {
    pub name: String,
    pub next_seq: u64,
    pub deleted: bool,
    /// Extents in sealed segments, in seq order.
    pub sealed: Vec<SealedExtent>,
    /// Records in the active segment.
    pub active: Option<ActiveStreamIndex>,
}

/// Streams and names; the catalog stream is tracked by `catalog_next_seq`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Catalog {
    pub streams: IdMap<StreamState>,
    /// Ordered, so listing pages by name is a range query.
    pub names: BTreeMap<String, u64>,
    pub next_stream_id: u64,
    pub catalog_next_seq: u64,
    /// The store's first segment is above 1 (older ones were reclaimed): the catalog starts
    /// from the checkpoint that opens it, at whatever seq that has. spec: segment.md#reclaim
    pub starts_at_checkpoint: bool,
    /// Streams whose records skip seqs because a rewritten segment dropped them (stream ->
    /// the first and the last seq missing). Only a deleted stream may keep one: checked once
    /// the whole log is read. spec: segment.md#rewriting-a-segment
    pub holes: BTreeMap<u64, (u64, u64)>,
}

impl Catalog {
    pub fn new() -> Self {
        Catalog {
            next_stream_id: 1,
            ..Default::default()
        }
    }

    /// Whether the next catalog record may be a checkpoint at any seq: the history before
    /// it was reclaimed and nothing has been applied yet.
    pub fn awaits_starting_checkpoint(&self) -> bool {
        self.starts_at_checkpoint && self.catalog_next_seq == 0 && self.streams.is_empty()
    }

    /// The live catalog as a checkpoint states it. spec: segment.md#streams-and-the-catalog
    pub fn checkpoint(&self) -> CatalogCheckpoint {
        let mut streams: Vec<CheckpointStream> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.deleted)
            .map(|(id, s)| CheckpointStream {
                stream_id: *id,
                next_seq: s.next_seq,
                name: s.name.as_bytes().to_vec(),
            })
            .collect();
        streams.sort_unstable_by_key(|s| s.stream_id);
        CatalogCheckpoint {
            next_stream_id: self.next_stream_id,
            streams,
        }
    }

    /// Applies a checkpoint: checked against the catalog when every record before it was
    /// applied, taken as the catalog when the store starts at it.
    fn apply_checkpoint(&mut self, e: &CatalogEntry) -> Result<(), String> {
        if !self.awaits_starting_checkpoint() {
            return self.check_checkpoint(e);
        }
        let cp = CatalogCheckpoint::from_entry(e).map_err(|x| x.to_string())?;
        for s in cp.streams {
            let name = String::from_utf8(s.name).map_err(|_| "name is not UTF-8")?;
            self.names.insert(name.clone(), s.stream_id);
            self.streams.insert(
                s.stream_id,
                StreamState {
                    name,
                    next_seq: s.next_seq,
                    ..Default::default()
                },
            );
        }
        self.next_stream_id = cp.next_stream_id;
        self.catalog_next_seq = e.seq + 1;
        self.starts_at_checkpoint = false;
        Ok(())
    }

    /// Checks a checkpoint against the catalog every record before it built: the same next
    /// id and the same live streams by id and name, none behind the catalog. Every segment
    /// starts with one, so an open checks one per segment: it walks the checkpoint in place
    /// and looks each stream up, instead of copying both catalogs. A stream the checkpoint
    /// puts further on lost records to a segment rewrite: it takes the checkpoint's seq, and
    /// the hole is noted.
    fn check_checkpoint(&mut self, e: &CatalogEntry) -> Result<(), String> {
        if e.seq != self.catalog_next_seq {
            return Err(format!(
                "catalog checkpoint seq {} where {} was expected",
                e.seq, self.catalog_next_seq
            ));
        }
        let mismatch = || {
            format!(
                "catalog checkpoint at seq {} does not match the catalog before it",
                e.seq
            )
        };
        // The streams it puts further on: (id, the catalog's next seq, the checkpoint's).
        let mut ahead: Vec<(u64, u64, u64)> = Vec::new();
        let streams = &self.streams;
        let walked =
            CatalogCheckpoint::walk_entry(e, |id, next_seq, name| match streams.get(&id) {
                Some(s) if !s.deleted && s.name.as_bytes() == name && next_seq >= s.next_seq => {
                    if next_seq > s.next_seq {
                        ahead.push((id, s.next_seq, next_seq));
                    }
                    true
                }
                _ => false,
            });
        let Some((next_stream_id, listed)) = walked.map_err(|x| x.to_string())? else {
            return Err(mismatch());
        };
        // Its ids increase, so each live stream was matched at most once: as many as the
        // catalog's live streams means the same set.
        let live = self.streams.values().filter(|s| !s.deleted).count();
        if next_stream_id != self.next_stream_id || listed != live {
            return Err(mismatch());
        }
        for (id, before, after) in ahead {
            self.holes.entry(id).or_insert((before, after - 1)).1 = after - 1;
            if let Some(s) = self.streams.get_mut(&id) {
                s.next_seq = after;
            }
        }
        self.catalog_next_seq += 1;
        Ok(())
    }

    /// Refuses a hole in a stream that is not deleted: only a deleted stream's records may
    /// be dropped by a rewrite, so a live stream's hole is lost data.
    pub fn check_holes(&self) -> Result<(), String> {
        for (id, (first, last)) in &self.holes {
            if self.streams.get(id).is_some_and(|s| !s.deleted) {
                return Err(format!(
                    "stream {id} is missing seqs {first}..={last}: a live stream's records are gone"
                ));
            }
        }
        Ok(())
    }

    /// Applies a catalog entry (from a record or a footer).
    pub fn apply_entry(&mut self, e: &CatalogEntry) -> Result<(), String> {
        if e.op != CatalogOp::Checkpoint && e.seq != self.catalog_next_seq {
            return Err(format!(
                "catalog record seq {} where {} was expected",
                e.seq, self.catalog_next_seq
            ));
        }
        match e.op {
            CatalogOp::Create => {
                let name = self.unbound_name(&e.name)?;
                if e.stream_id == CATALOG_STREAM || self.streams.contains_key(&e.stream_id) {
                    return Err(format!("stream id {} created twice", e.stream_id));
                }
                self.names.insert(name.clone(), e.stream_id);
                self.streams.insert(
                    e.stream_id,
                    StreamState {
                        name,
                        ..Default::default()
                    },
                );
                self.next_stream_id = self.next_stream_id.max(e.stream_id + 1);
            }
            CatalogOp::Delete => {
                let s = self
                    .streams
                    .get_mut(&e.stream_id)
                    .filter(|s| !s.deleted)
                    .ok_or(format!("delete of unknown stream {}", e.stream_id))?;
                s.deleted = true;
                self.names.remove(&s.name);
            }
            CatalogOp::Rename => {
                let name = self.unbound_name(&e.name)?;
                let s = self
                    .streams
                    .get_mut(&e.stream_id)
                    .filter(|s| !s.deleted)
                    .ok_or(format!("rename of unknown stream {}", e.stream_id))?;
                let old = std::mem::replace(&mut s.name, name.clone());
                self.names.remove(&old);
                self.names.insert(name, e.stream_id);
            }
            // Checks its own seq: it may start a store whose history was reclaimed.
            CatalogOp::Checkpoint => return self.apply_checkpoint(e),
        }
        self.catalog_next_seq += 1;
        Ok(())
    }

    /// `name` as a stream name that a create or rename may bind: 1 to 4096 bytes of UTF-8,
    /// held by no live stream.
    fn unbound_name(&self, name: &[u8]) -> Result<String, String> {
        if name.is_empty() || name.len() > crate::writer::MAX_STREAM_NAME_BYTES {
            return Err(format!("stream name of {} bytes", name.len()));
        }
        let name =
            String::from_utf8(name.to_vec()).map_err(|_| "stream name is not UTF-8".to_owned())?;
        if self.names.contains_key(&name) {
            return Err(format!("stream name {name:?} bound twice"));
        }
        Ok(name)
    }
}

impl StreamBook for Catalog {
    fn accepts_starting_checkpoint(&self) -> bool {
        self.awaits_starting_checkpoint()
    }

    fn next_seq(&self, stream: u64) -> Option<u64> {
        if stream == CATALOG_STREAM {
            return Some(self.catalog_next_seq);
        }
        self.streams
            .get(&stream)
            .filter(|s| !s.deleted)
            .map(|s| s.next_seq)
    }

    fn apply(&mut self, h: &RecordHeader, payload: &[u8]) -> Result<(), String> {
        if h.stream_id == CATALOG_STREAM {
            if !matches!(
                h.kind,
                KIND_CATALOG_CREATE
                    | KIND_CATALOG_DELETE
                    | KIND_CATALOG_RENAME
                    | KIND_CATALOG_CHECKPOINT
            ) {
                return Err(format!("catalog record of unknown kind {:#x}", h.kind));
            }
            let entry = catalog_entry(h, payload).ok_or("malformed catalog record")?;
            return self.apply_entry(&entry);
        }
        if h.kind >= sessionlog_format::FIRST_RESERVED_KIND {
            return Err(format!(
                "record of stream {} has reserved kind {:#x}",
                h.stream_id, h.kind
            ));
        }
        let s = self
            .streams
            .get_mut(&h.stream_id)
            .ok_or("record of an unknown stream")?;
        if s.deleted {
            return Err("record of a deleted stream".into());
        }
        s.next_seq = h.seq + 1;
        Ok(())
    }
}

/// The segment being appended.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    pub id: SegmentId,
    pub file: Arc<dyn StorageFile>,
    pub path: PathBuf,
    /// Catalog entries written to this segment (for its footer).
    pub catalog: Vec<CatalogEntry>,
    /// Index of the catalog stream's records in this segment.
    pub catalog_index: Option<ActiveStreamIndex>,
    /// Bytes of the file reserved so far (its length once preallocated); appends past it
    /// grow the reservation first. spec: segment.md#zero-fill-and-preallocation
    pub allocated: u64,
    /// How far the writer has written zeros ahead of the data (or data itself): bytes of the
    /// reservation before this offset are written blocks, so a sync after appending into them
    /// has no unwritten extent to convert. 0 when unknown (after an open); never past
    /// `allocated`. spec: segment.md#zero-fill-and-preallocation
    pub zeroed: u64,
}

/// Everything behind the log's mutex.
#[derive(Debug)]
pub(crate) struct State {
    pub catalog: Catalog,
    pub sealed: BTreeMap<SegmentId, Arc<SealedSegment>>,
    pub active: ActiveSegment,
    /// Encoded batches not yet handed to the operating system.
    pub buf: Vec<u8>,
    /// The allocation of the last buffer written, emptied, which `buf` becomes at the next
    /// cycle, so a busy log does not grow a fresh buffer (and fault in its pages) per group.
    pub spare: Vec<u8>,
    /// Segment offset of `buf[0]`: everything before it has been written (or is being).
    pub buf_offset: u64,
    /// Segment offset after the last encoded batch.
    pub end: u64,
    pub written: Lsn,
    pub synced: Lsn,
    /// While a write of the buffer runs unlocked (writes are serialised; with one sync at a
    /// time, until its sync has returned too): the segment offset and bytes it writes, which
    /// the file may not hold yet. A read of a record among them copies it from here instead
    /// of waiting for the write.
    pub in_flight: Option<(u64, Arc<Vec<u8>>)>,
    /// Syncs running unlocked.
    pub syncs_in_flight: u32,
    /// End of the data the latest started sync covers.
    pub sync_started: Lsn,
    /// Number of the group that batches encoded now belong to; a sync cycle takes the
    /// forming group and the next one starts forming.
    pub forming: u64,
    pub poisoned: Option<Arc<str>>,
    pub closed: bool,
    pub counters: Counters,
}

/// Running totals for `stats`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub syncs: u64,
    pub writes: u64,
    pub commits: u64,
}

impl State {
    /// A write of the buffer is running unlocked.
    pub fn writing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// What is known durable in the active segment, as a segment offset.
    pub fn synced_offset_in_active(&self) -> u64 {
        if self.synced.segment() == self.active.id {
            self.synced.offset()
        } else {
            sessionlog_format::SEGMENT_HEADER_LEN as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Catalog;
    use sessionlog_format::{CatalogCheckpoint, CatalogEntry, CatalogOp, CheckpointStream};

    fn entry(op: CatalogOp, stream_id: u64, seq: u64, name: &str) -> CatalogEntry {
        CatalogEntry {
            op,
            stream_id,
            seq,
            name: name.as_bytes().to_vec(),
        }
    }

    /// A catalog of streams 1 "a" (5 records), 2 "b" (deleted), 3 "c" (renamed from "x", 2
    /// records), built from its records: catalog seqs 0 to 4.
    fn catalog() -> Catalog {
        let mut c = Catalog::new();
        for e in [
            entry(CatalogOp::Create, 1, 0, "a"),
            entry(CatalogOp::Create, 2, 1, "b"),
            entry(CatalogOp::Create, 3, 2, "x"),
            entry(CatalogOp::Delete, 2, 3, ""),
            entry(CatalogOp::Rename, 3, 4, "c"),
        ] {
            c.apply_entry(&e).expect("a valid catalog record");
        }
        c.streams.get_mut(&1).expect("a").next_seq = 5;
        c.streams.get_mut(&3).expect("c").next_seq = 2;
        c
    }

    fn stream(stream_id: u64, next_seq: u64, name: &str) -> CheckpointStream {
        CheckpointStream {
            stream_id,
            next_seq,
            name: name.as_bytes().to_vec(),
        }
    }

    fn checkpoint(next_stream_id: u64, streams: Vec<CheckpointStream>) -> CatalogEntry {
        CatalogCheckpoint {
            next_stream_id,
            streams,
        }
        .to_entry(5)
    }

    #[test]
    fn a_checkpoint_is_checked_against_the_catalog_its_records_built() {
        // The catalog's own checkpoint, and one whose streams are further on.
        let mut c = catalog();
        c.apply_entry(&checkpoint(4, vec![stream(1, 5, "a"), stream(3, 2, "c")]))
            .expect("the catalog's own checkpoint");
        assert_eq!(c.catalog_next_seq, 6);
        assert!(c.holes.is_empty());
        let mut c = catalog();
        c.apply_entry(&checkpoint(4, vec![stream(1, 9, "a"), stream(3, 2, "c")]))
            .expect("a stream a rewrite shortened");
        assert_eq!(c.holes.get(&1), Some(&(5, 8)));
        assert_eq!(c.streams.get(&1).map(|s| s.next_seq), Some(9));

        let refused = [
            (
                "a name differs",
                checkpoint(4, vec![stream(1, 5, "a"), stream(3, 2, "x")]),
            ),
            (
                "a live stream missing",
                checkpoint(4, vec![stream(1, 5, "a")]),
            ),
            (
                "a deleted stream listed",
                checkpoint(
                    4,
                    vec![stream(1, 5, "a"), stream(2, 0, "b"), stream(3, 2, "c")],
                ),
            ),
            (
                "an unknown stream listed",
                checkpoint(
                    5,
                    vec![stream(1, 5, "a"), stream(3, 2, "c"), stream(4, 0, "d")],
                ),
            ),
            (
                "a deleted stream in a live one's place",
                checkpoint(4, vec![stream(1, 5, "a"), stream(2, 0, "b")]),
            ),
            (
                "a stream behind",
                checkpoint(4, vec![stream(1, 4, "a"), stream(3, 2, "c")]),
            ),
            (
                "a stream ahead, then a name differs",
                checkpoint(4, vec![stream(1, 9, "a"), stream(3, 2, "x")]),
            ),
            (
                "another next id",
                checkpoint(5, vec![stream(1, 5, "a"), stream(3, 2, "c")]),
            ),
            (
                "a name twice",
                checkpoint(4, vec![stream(1, 5, "a"), stream(3, 2, "a")]),
            ),
        ];
        for (what, e) in refused {
            let mut c = catalog();
            let err = c.apply_entry(&e).expect_err(what);
            assert!(err.contains("does not match"), "{what}: {err}");
            assert_eq!(c.catalog_next_seq, 5, "{what}: nothing applied");
            assert!(c.holes.is_empty(), "{what}: no hole noted");
        }
        // Out of its place in the catalog stream.
        let mut c = catalog();
        let mut e = checkpoint(4, vec![stream(1, 5, "a"), stream(3, 2, "c")]);
        e.seq = 7;
        assert!(c.apply_entry(&e).is_err());
    }
}
