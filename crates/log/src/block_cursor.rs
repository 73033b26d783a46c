//! The blocks of a compressed sealed segment as a read of a stream's records walks them
//! (spec: segment.md#compressed-segments). A cursor holds the few blocks its windows read
//! last, so a window's walk back and the records it then reads find their block without a
//! lookup in the segment's shared recent blocks per header and per record. An iteration's
//! cursor, once the iteration has gone on from one block to the next, also has the blocks
//! holding the stream's later index entries decompressed ahead on a thread of its own, so
//! that a long scan decompresses on another core while it folds or copies what it read
//! (on two cores, decompressing a long session's blocks takes about as long as the rest of
//! its cold `view`).
//!
//! Read-ahead changes where a block is decompressed, not what is read: every block is still
//! checked against its checksum and its frame's content checksum and decompressed to its
//! stated length, every record is still read as on the reader's thread, and a damaged block
//! the reader reaches is reported as corruption just as a read on the reader's thread
//! reports it.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use sessionlog_format::{decode_record_header, RecordHeader, StreamSummary};

use crate::error::{corrupted, Result};
use crate::segment::SealedSegment;
use crate::Record;

/// Blocks a cursor holds. A window's walk back starts at its anchor and ends in the block
/// before at most (anchors are a few KiB of the stream apart, blocks about 8 KiB), and its
/// records are then read forward over the same blocks.
const HELD_BLOCKS: usize = 4;

/// Blocks the read-ahead thread decompresses before handing them over together: handing
/// over block by block would wake the other thread once per block.
const AHEAD_BATCH: usize = 8;

/// Batches handed over and not yet taken. With the batch the thread is filling and the one
/// the reader is taking blocks from, at most `(AHEAD_QUEUED + 2) * AHEAD_BATCH` blocks are
/// decompressed ahead of the reader (about 290 KiB of 8 KiB blocks).
const AHEAD_QUEUED: usize = 2;

/// Blocks that must lie after the one just read for read-ahead to be worth its thread.
const AHEAD_MIN_BLOCKS: usize = 16;

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
    /// The block fetched last, to see a scan go on to the next one.
    last_fetched: Option<usize>,
    /// Whether reads through this cursor are an iteration's, which may read ahead.
    may_read_ahead: bool,
    /// The stream being read and the last seq the iteration wants (for read-ahead).
    wanted: Option<(StreamSummary, u64)>,
    ahead: Option<ReadAhead>,
}

impl BlockCursor {
    /// A cursor for an iteration, which reads ahead on a long scan.
    pub fn for_iteration() -> BlockCursor {
        BlockCursor {
            may_read_ahead: true,
            ..BlockCursor::default()
        }
    }

    /// Prepares to read records of the stream `summary` describes in `segment`, up to seq
    /// `last`; blocks of another segment held before are let go.
    pub fn enter(&mut self, segment: &Arc<SealedSegment>, summary: StreamSummary, last: u64) {
        self.switch_to(segment);
        self.wanted = Some((summary, last));
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
        self.last_fetched = None;
        self.ahead = None;
        self.wanted = None;
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

    /// Fetches the block holding `offset` into `held`: from the read-ahead when it has it,
    /// else from the segment's recent blocks or decompressed here.
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
        let mut passed = Vec::new();
        let ahead = match self.ahead.as_mut() {
            Some(ahead) => ahead.take(index, &mut passed),
            None => Taken::NotAhead,
        };
        let bytes = match ahead {
            Taken::Block(block) => {
                let bytes = block?;
                // Later reads of the segment (a point read near the scan) find it there.
                blocks.keep(index, bytes.clone());
                bytes
            }
            Taken::NotAhead => blocks.block(&segment.bytes, id, index)?,
            Taken::Ended => {
                self.ahead = None;
                blocks.block(&segment.bytes, id, index)?
            }
        };
        if self.ahead.is_none()
            && self.may_read_ahead
            && self.last_fetched.is_some_and(|last| last + 1 == index)
            && blocks.count() > index + AHEAD_MIN_BLOCKS
        {
            if let Some((summary, last)) = self.wanted {
                self.ahead = ReadAhead::start(segment.clone(), summary, last, index + 1);
            }
        }
        self.last_fetched = Some(index);
        // The fetched block first, then those the read-ahead handed over before it.
        let passed = passed.into_iter().rev().filter_map(|(i, bytes)| {
            blocks.keep(i, bytes.clone());
            let start = blocks.logical_range(i)?.start;
            Some(Held { start, bytes })
        });
        let fetched = Held {
            start: range.start,
            bytes,
        };
        let older = std::mem::take(&mut self.held);
        self.held = std::iter::once(fetched)
            .chain(passed)
            .chain(older)
            .take(HELD_BLOCKS)
            .collect();
        Ok(())
    }
}

/// What the read-ahead says about a block the reader needs.
enum Taken {
    /// The block, decompressed ahead (or the error decompressing it met).
    Block(Result<Bytes>),
    /// The read-ahead does not reach it; the reader fetches it itself.
    NotAhead,
    /// The read-ahead is over (every block it was to read was handed over).
    Ended,
}

/// Blocks handed over at once: each block's index and its decompressed bytes.
type Batch = Vec<(usize, Result<Bytes>)>;

/// A thread decompressing, in order, the blocks that hold a stream's index entries from
/// a given block on, a bounded number ahead of the reader taking them.
#[derive(Debug)]
struct ReadAhead {
    receive: Option<Receiver<Batch>>,
    /// Blocks handed over and not yet taken, in block order.
    ready: VecDeque<(usize, Result<Bytes>)>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    /// Starts decompressing the blocks of `segment` from `first` on that hold index
    /// entries of the stream `summary` describes, up to the first entry at or after seq
    /// `last`. None when no thread could be started (the reader then reads on its own).
    fn start(
        segment: Arc<SealedSegment>,
        summary: StreamSummary,
        last: u64,
        first: usize,
    ) -> Option<ReadAhead> {
        let (send, receive) = sync_channel(AHEAD_QUEUED);
        let thread = std::thread::Builder::new()
            .name("sessionlog-read-ahead".into())
            .spawn(move || read_ahead(&segment, summary, last, first, &send))
            .ok()?;
        Some(ReadAhead {
            receive: Some(receive),
            ready: VecDeque::new(),
            thread: Some(thread),
        })
    }

    /// Block `index`, when it is the next one handed over. Blocks handed over before it
    /// go to `passed`: a window's walk starts in its anchor's block and may go back into
    /// them (one that failed is dropped, and fails again if the reader reads it). When the
    /// next block handed over lies after `index`, `index` is not one the thread reads.
    fn take(&mut self, index: usize, passed: &mut Vec<(usize, Bytes)>) -> Taken {
        loop {
            if self.ready.is_empty() {
                match self.receive.as_ref().map(Receiver::recv) {
                    Some(Ok(batch)) => self.ready.extend(batch),
                    _ => return Taken::Ended,
                }
            }
            match self.ready.front() {
                Some(&(next, _)) if next < index => {
                    if let Some((next, Ok(bytes))) = self.ready.pop_front() {
                        passed.push((next, bytes));
                    }
                }
                Some(&(next, _)) if next == index => {
                    return match self.ready.pop_front() {
                        Some((_, block)) => Taken::Block(block),
                        None => Taken::Ended,
                    };
                }
                Some(_) => return Taken::NotAhead,
                None => {}
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // Closing the hand-over ends the thread at its next hand-over (it never waits on
        // anything else), so joining it waits for one batch at most.
        drop(self.receive.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The read-ahead thread's work; see [`ReadAhead::start`]. A block that fails to verify or
/// decompress is handed over as its error, and nothing after it is read.
fn read_ahead(
    segment: &SealedSegment,
    summary: StreamSummary,
    last: u64,
    first: usize,
    send: &SyncSender<Batch>,
) {
    let Some(blocks) = segment.blocks.as_ref() else {
        return;
    };
    let Some(first_offset) = blocks.logical_range(first).map(|r| r.start) else {
        return;
    };
    let entries = (0..summary.index_count)
        .filter_map(|i| {
            let entry = summary.index_start.checked_add(i)?;
            segment.footer.index_entry(&segment.bytes, entry)
        })
        .map(|e| (e.seq, u64::from(e.offset)))
        .chain(std::iter::once((
            summary.last_seq,
            u64::from(summary.last_offset),
        )));
    let mut batch = Vec::with_capacity(AHEAD_BATCH);
    // Hands `index` over with the batch; false once nothing more is to be read.
    let mut read = |index: usize| -> bool {
        let block = blocks.block_unkept(&segment.bytes, segment.id, index);
        let failed = block.is_err();
        batch.push((index, block));
        if batch.len() == AHEAD_BATCH || failed {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(AHEAD_BATCH));
            if send.send(full).is_err() {
                return false;
            }
        }
        !failed
    };
    // The block before `first` was read by the reader; `first` is read when the first
    // entry lies in it or in the block after it.
    let mut previous = first.checked_sub(1);
    for (seq, offset) in entries {
        if offset < first_offset {
            continue;
        }
        let Some(index) = blocks.index_holding(offset) else {
            break;
        };
        if previous != Some(index) {
            // A block between two blocks holding entries one block apart holds records
            // of the stream between them (the entries are a few KiB of its data apart)
            // unless other streams' records fill it.
            let between = previous.filter(|&p| p + 2 == index).map(|p| p + 1);
            if between.is_some_and(|b| !read(b)) || !read(index) {
                return;
            }
            previous = Some(index);
        }
        // The window that reads `last` anchors at the first entry at or after it.
        if seq >= last {
            break;
        }
    }
    if !batch.is_empty() {
        let _ = send.send(batch);
    }
}
