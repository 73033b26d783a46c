//! The sparse index: where a stream's records are, without one entry per record.
//!
//! Every stream has, per segment, one index entry per ~`index_interval_bytes` of its data (the
//! first record always has one) plus the position of its last record. Each record names the
//! previous record of its stream in the same segment (`prev_offset`), so finding seq `s` is a
//! binary search for the first entry after `s` (or the last record) and a short walk back
//! along those links, never a scan over other streams' records. spec: segment.md#sparse-index

use sessionlog_format::{IndexEntry, RecordHeader, StreamSummary, RECORD_HEADER_LEN};

use crate::error::{corrupted, Result};
use crate::ids::SegmentId;

/// One stream's index inside the active segment, kept in memory. The first record is the
/// first index entry and is not stored twice; counters are 32-bit because segment offsets are.
#[derive(Debug, Clone)]
pub(crate) struct ActiveStreamIndex {
    pub first_seq: u64,
    pub last_seq: u64,
    pub first_offset: u32,
    pub last_offset: u32,
    data_bytes: u32,
    bytes_since_entry: u32,
    /// Index entries after the first record's.
    later_entries: Vec<IndexEntry>,
}

impl ActiveStreamIndex {
    pub fn new(seq: u64, offset: u32, record_bytes: u64) -> Self {
        ActiveStreamIndex {
            first_seq: seq,
            last_seq: seq,
            first_offset: offset,
            last_offset: offset,
            data_bytes: record_bytes as u32,
            bytes_since_entry: record_bytes as u32,
            later_entries: Vec::new(),
        }
    }

    /// The index a footer summary and its entries describe (a clean-close file).
    pub fn from_summary(s: &StreamSummary, entries: &[IndexEntry]) -> Option<Self> {
        let (first, later) = entries.split_first()?;
        if first.seq != s.first_seq || first.offset != s.first_offset {
            return None;
        }
        Some(ActiveStreamIndex {
            first_seq: s.first_seq,
            last_seq: s.last_seq,
            first_offset: s.first_offset,
            last_offset: s.last_offset,
            data_bytes: u32::try_from(s.data_bytes).ok()?,
            bytes_since_entry: 0,
            later_entries: later.to_vec(),
        })
    }

    /// Records the next record of the stream.
    pub fn push(&mut self, seq: u64, offset: u32, record_bytes: u64, interval: u32) {
        debug_assert_eq!(seq, self.last_seq + 1);
        if self.bytes_since_entry >= interval {
            self.later_entries.push(IndexEntry { seq, offset });
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry = self.bytes_since_entry.saturating_add(record_bytes as u32);
        self.last_seq = seq;
        self.last_offset = offset;
        self.data_bytes = self.data_bytes.saturating_add(record_bytes as u32);
    }

    /// Every index entry, the first record's included.
    pub fn entries(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        std::iter::once(self.entry(0)).chain(self.later_entries.iter().copied())
    }

    fn entry(&self, i: u32) -> IndexEntry {
        match i.checked_sub(1) {
            None => IndexEntry {
                seq: self.first_seq,
                offset: self.first_offset,
            },
            Some(j) => self.later_entries[j as usize],
        }
    }

    pub fn summary(&self, stream_id: u64, index_start: u32) -> StreamSummary {
        StreamSummary {
            stream_id,
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            data_bytes: u64::from(self.data_bytes),
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            index_start,
            index_count: 1 + self.later_entries.len() as u32,
        }
    }

    /// Where to start walking back to find `seq` (see [`anchor_for`]).
    pub fn anchor(&self, seq: u64) -> Anchor {
        anchor_for(
            seq,
            1 + self.later_entries.len() as u32,
            |i| self.entry(i),
            (self.last_seq, self.last_offset),
        )
    }

    /// The mean length of the stream's records in the segment, headers included.
    pub fn mean_record_bytes(&self) -> u64 {
        u64::from(self.data_bytes) / (self.last_seq - self.first_seq + 1)
    }

    /// The offset of the index entry at or before `seq` (the first record's when `seq` is
    /// before every later entry): a walk back to `seq` from any anchor after it never goes
    /// below it.
    pub fn floor(&self, seq: u64) -> u32 {
        // Later entries are in seq order: the last one at or before `seq`, if any.
        let after = self.later_entries.partition_point(|e| e.seq <= seq);
        match after.checked_sub(1) {
            Some(i) => self.later_entries[i].offset,
            None => self.first_offset,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.later_entries.capacity() * std::mem::size_of::<IndexEntry>()
    }
}

/// A record known by position, from which a walk back along `prev_offset` reaches the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub seq: u64,
    pub offset: u32,
}

/// The nearest indexed record at or after `seq`: the entry itself when `seq` is indexed, else
/// the next entry, else the stream's last record in the segment. `seq` must lie within the
/// segment's range for the stream.
pub(crate) fn anchor_for(
    seq: u64,
    count: u32,
    entry: impl Fn(u32) -> IndexEntry,
    last: (u64, u32),
) -> Anchor {
    // First entry whose seq is >= `seq`.
    let (mut lo, mut hi) = (0u32, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if entry(mid).seq < seq {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo < count {
        let e = entry(lo);
        Anchor {
            seq: e.seq,
            offset: e.offset,
        }
    } else {
        Anchor {
            seq: last.0,
            offset: last.1,
        }
    }
}

/// Walks back from `anchor` to `target` along `prev_offset` links, checking every hop, and
/// returns the target's offset. `header_at` reads the record header at a segment offset.
pub(crate) fn walk_back(
    segment: SegmentId,
    stream_id: u64,
    anchor: Anchor,
    target: u64,
    mut header_at: impl FnMut(u64) -> Result<RecordHeader>,
    mut visit: impl FnMut(u64, u64),
) -> Result<u64> {
    let mut seq = anchor.seq;
    let mut offset = u64::from(anchor.offset);
    loop {
        let h = header_at(offset)?;
        if h.stream_id != stream_id || h.seq != seq {
            return Err(corrupted(
                segment,
                offset,
                format!(
                    "index expected stream {stream_id} seq {seq}, record holds stream {} seq {}",
                    h.stream_id, h.seq
                ),
                None,
            ));
        }
        visit(seq, offset);
        if seq == target {
            return Ok(offset);
        }
        if h.prev_offset == 0 || u64::from(h.prev_offset) + RECORD_HEADER_LEN as u64 > offset {
            return Err(corrupted(
                segment,
                offset,
                format!("record link of stream {stream_id} seq {seq} is broken"),
                None,
            ));
        }
        offset = u64::from(h.prev_offset);
        seq -= 1;
    }
}

/// Where one stream's records in one sealed segment are: 16 bytes per stream and segment.
/// The rest of the stream's summary stays in the segment's mapped footer and is decoded when
/// a read needs it, which keeps index memory a small fraction of the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SealedExtent {
    /// Seq of the stream's first record in the segment.
    pub first_seq: u64,
    /// The segment (numbers stay below 2^32).
    pub segment: u32,
    /// Position of the stream's summary in the segment's footer.
    pub summary_index: u32,
}

/// A hasher for stream ids, which are small sequential integers: one multiply spreads
/// them over the table (Fibonacci hashing), far cheaper than SipHash on every commit.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by stream id.
pub(crate) type IdMap<V> =
    std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;
