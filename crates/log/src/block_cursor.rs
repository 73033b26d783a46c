//! The blocks of a compressed sealed segment as a read of a stream's records walks them
//! (spec: segment.md#compressed-segments). A cursor holds the few blocks its windows read
//! last, so a window's walk back and the records it then reads find their block without a
//! lookup in the segment's shared recent blocks per header and per record.

use std::sync::Arc;

use bytes::Bytes;
use sessionlog_format::{decode_record_header, RecordHeader};

use crate::error::{corrupted, Result};
use crate::segment::SealedSegment;
use crate::Record;

/// Blocks a cursor holds. A window's walk back starts at its anchor and ends in the block
/// before at most (anchors are a few KiB of the stream apart, blocks about 8 KiB), and its
/// records are then read forward over the same blocks.
const HELD_BLOCKS: usize = 4;

/// A decompressed block of the cursor's segment and the logical offset it starts at.
#[derive(Debug)]
struct Held {
    start: u64,
    bytes: Bytes,
}

impl Held {
    fn holds(&self, offset: u64) -> bool {
        offset >= self.start && offset - self.start < self.bytes.len() as u64
    }
}

/// What a window reads from a compressed sealed segment is served from; kept by an
/// iteration from window to window.
#[derive(Debug, Default)]
pub(crate) struct BlockCursor {
    /// The segment whose blocks are held (a rewrite swaps in a new segment under the same
    /// number, so it is told apart by identity, not by number).
    segment: Option<Arc<SealedSegment>>,
    /// Its blocks read last, the latest first.
    held: Vec<Held>,
}

impl BlockCursor {
    /// Prepares to read records of `segment`; blocks of another segment held before are
    /// let go.
    pub fn enter(&mut self, segment: &Arc<SealedSegment>) {
        self.switch_to(segment);
    }

    /// Lets go of what is held of another segment than `segment`.
    fn switch_to(&mut self, segment: &Arc<SealedSegment>) {
        if self
            .segment
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, segment))
        {
            return;
        }
        self.held.clear();
        self.segment = Some(segment.clone());
    }

    /// The record header at logical `offset` of `segment`.
    pub fn header(&mut self, segment: &Arc<SealedSegment>, offset: u64) -> Result<RecordHeader> {
        let (bytes, at) = self.holding(segment, offset)?;
        decode_record_header(bytes.get(at..).unwrap_or_default())
            .map_err(|e| corrupted(segment.id, offset, "bad record header", Some(e)))
    }

    /// The verified record at logical `offset` of `segment`, its payload sharing its block.
    pub fn record(&mut self, segment: &Arc<SealedSegment>, offset: u64) -> Result<Record> {
        let (bytes, at) = self.holding(segment, offset)?;
        segment.record_in(bytes, at, offset)
    }

    /// The held block holding `offset` (fetched first when none does), and where `offset`
    /// lies in it.
    fn holding(&mut self, segment: &Arc<SealedSegment>, offset: u64) -> Result<(&Bytes, usize)> {
        self.switch_to(segment);
        let at = match self.held.iter().position(|h| h.holds(offset)) {
            Some(at) => at,
            None => {
                self.fetch(segment, offset)?;
                0
            }
        };
        let held = &self.held[at];
        Ok((&held.bytes, (offset - held.start) as usize))
    }

    /// Fetches the block holding `offset` into `held`, from the segment's recent blocks or
    /// decompressed here.
    fn fetch(&mut self, segment: &Arc<SealedSegment>, offset: u64) -> Result<()> {
        let id = segment.id;
        let blocks = segment
            .blocks
            .as_ref()
            .ok_or_else(|| corrupted(id, offset, "segment is not compressed", None))?;
        let index = blocks
            .index_holding(offset)
            .ok_or_else(|| corrupted(id, offset, "offset lies in no compressed block", None))?;
        let range = blocks
            .logical_range(index)
            .ok_or_else(|| corrupted(id, offset, "offset lies in no compressed block", None))?;
        let bytes = blocks.block(&segment.bytes, id, index)?;
        self.held.truncate(HELD_BLOCKS - 1);
        self.held.insert(
            0,
            Held {
                start: range.start,
                bytes,
            },
        );
        Ok(())
    }
}
