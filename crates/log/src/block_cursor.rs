//! The blocks of a compressed sealed segment as a read of a stream's records walks them
//! (spec: segment.md#compressed-segments). A cursor holds the few blocks its windows read
//! last, so a window's walk back and the records it then reads find their block without a
//! lookup in the segment's shared recent blocks per header and per record. An iteration's
//! cursor, once the iteration has gone on from one block to the next, also has the blocks
//! holding the stream's later index entries decompressed ahead on a thread of its own, so
//! that a long scan decompresses on another core while it folds or copies what it read
//! (on two cores, decompressing a long session's blocks takes about as long as the rest of
//! its cold `view`). The reader never waits idle for that thread while blocks are left to
//! decompress: a block it needs that the thread has not begun it decompresses itself, and
//! while the thread finishes the one it needs, it decompresses a later one.
//!
//! Read-ahead changes where a block is decompressed, not what is read: every block is still
//! checked against its checksum and its frame's content checksum and decompressed to its
//! stated length, every record is still read as on the reader's thread, and a damaged block
//! the reader reaches is reported as corruption just as a read on the reader's thread
//! reports it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
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

/// How far ahead of the reader blocks are decompressed: at most this many planned blocks
/// past the one the reader takes (about 290 KiB of 8 KiB blocks). The thread, once this far
/// ahead, waits until the reader has taken half of them, so it is woken once per half.
const AHEAD_BLOCKS: usize = 32;

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
            Taken::NotAhead | Taken::Claimed => blocks.block(&segment.bytes, id, index)?,
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
    /// The read-ahead has it planned and nobody has begun it: the reader decompresses it
    /// itself, instead of waiting for the thread.
    Claimed,
    /// The read-ahead is over (every block it was to read was handed over).
    Ended,
}

/// What the reader and the read-ahead thread share: which planned blocks are begun, the
/// ones decompressed and not yet taken, where the reader is, and who waits for whom.
#[derive(Debug)]
struct AheadState {
    /// Blocks are begun in plan order: every planned block from the reader's on and before
    /// this one is begun, and none from this one on.
    first_free: usize,
    /// Planned blocks.
    planned: usize,
    /// Decompressed blocks not yet taken, with their plan positions.
    done: VecDeque<(usize, Result<Bytes>)>,
    /// The plan position of the block the reader needs next.
    reader_at: usize,
    reader_waits: bool,
    thread_waits: bool,
    /// Set when the reader lets go (the thread ends at its next look).
    stop: bool,
    /// Set when the thread has ended, whatever ended it.
    thread_ended: bool,
}

impl AheadState {
    /// Begins the first planned block nobody has begun from the reader's on, when it lies
    /// before `until`.
    fn claim(&mut self, until: usize) -> Option<usize> {
        let next = self.first_free.max(self.reader_at);
        (next < until.min(self.planned)).then(|| {
            self.first_free = next + 1;
            next
        })
    }

    /// Keeps a block decompressed at plan position `at`, unless the reader has passed it.
    fn finish(&mut self, at: usize, block: Result<Bytes>) {
        if at >= self.reader_at {
            self.done.push_back((at, block));
        }
    }

    /// The block decompressed at plan position `at`, taken out, when it is there.
    fn take_done(&mut self, at: usize) -> Option<Result<Bytes>> {
        let i = self.done.iter().position(|&(p, _)| p == at)?;
        self.done.remove(i).map(|(_, block)| block)
    }
}

/// The blocks a read-ahead plans to decompress, the reader's and its thread's shared state,
/// and the two waits.
#[derive(Debug)]
struct AheadShared {
    segment: Arc<SealedSegment>,
    /// Block indexes, ascending.
    plan: Vec<usize>,
    state: Mutex<AheadState>,
    /// The reader waits here for a block the thread has begun.
    reader_wakes: Condvar,
    /// The thread waits here while it is [`AHEAD_BLOCKS`] ahead of the reader.
    thread_wakes: Condvar,
}

impl AheadShared {
    fn lock(&self) -> MutexGuard<'_, AheadState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decompresses planned block `at` (outside the lock) and keeps it.
    fn decompress(&self, at: usize) -> bool {
        let block = match self.segment.blocks.as_ref() {
            Some(blocks) => {
                blocks.block_unkept(&self.segment.bytes, self.segment.id, self.plan[at])
            }
            None => Err(corrupted(
                self.segment.id,
                0,
                "segment is not compressed",
                None,
            )),
        };
        let failed = block.is_err();
        let mut state = self.lock();
        state.finish(at, block);
        if state.reader_waits {
            state.reader_waits = false;
            self.reader_wakes.notify_one();
        }
        !failed
    }
}

/// Blocks of a segment decompressed on a thread of their own ahead of the reader, in
/// order: the blocks that hold a stream's index entries from a given block on. When the
/// reader needs a planned block nobody has begun, it decompresses it itself; when the
/// thread has begun it, the reader decompresses a later planned block meanwhile; so on two
/// cores neither waits for the other while blocks are left to decompress.
#[derive(Debug)]
struct ReadAhead {
    shared: Arc<AheadShared>,
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
        let plan = plan(&segment, summary, last, first);
        if plan.is_empty() {
            return None;
        }
        let shared = Arc::new(AheadShared {
            state: Mutex::new(AheadState {
                first_free: 0,
                planned: plan.len(),
                done: VecDeque::new(),
                reader_at: 0,
                reader_waits: false,
                thread_waits: false,
                stop: false,
                thread_ended: false,
            }),
            segment,
            plan,
            reader_wakes: Condvar::new(),
            thread_wakes: Condvar::new(),
        });
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sessionlog-read-ahead".into())
            .spawn(move || read_ahead(&for_thread))
            .ok()?;
        Some(ReadAhead {
            shared,
            thread: Some(thread),
        })
    }

    /// Block `index`, when it is the next planned block. Planned blocks before it that
    /// are decompressed go to `passed`: a window's walk starts in its anchor's block and
    /// may go back into them (one that failed is dropped, and fails again if the reader
    /// reads it). When the next planned block lies after `index`, `index` is not one the
    /// read-ahead reads.
    fn take(&mut self, index: usize, passed: &mut Vec<(usize, Bytes)>) -> Taken {
        let shared = &*self.shared;
        let mut state = shared.lock();
        while shared
            .plan
            .get(state.reader_at)
            .is_some_and(|&planned| planned < index)
        {
            let at = state.reader_at;
            if let Some(Ok(bytes)) = state.take_done(at) {
                passed.push((shared.plan[at], bytes));
            }
            state.reader_at += 1;
        }
        let at = state.reader_at;
        match shared.plan.get(at) {
            None => return Taken::Ended,
            Some(&planned) if planned != index => return Taken::NotAhead,
            Some(_) => {}
        }
        if state.thread_waits && state.first_free < at + 1 + AHEAD_BLOCKS / 2 {
            state.thread_waits = false;
            shared.thread_wakes.notify_one();
        }
        loop {
            if let Some(block) = state.take_done(at) {
                state.reader_at = at + 1;
                return Taken::Block(block);
            }
            if at >= state.first_free || state.thread_ended {
                state.first_free = state.first_free.max(at + 1);
                state.reader_at = at + 1;
                return Taken::Claimed;
            }
            // The thread is decompressing it: decompress a later planned block meanwhile.
            if let Some(later) = state.claim(at + 1 + AHEAD_BLOCKS) {
                drop(state);
                shared.decompress(later);
                state = shared.lock();
                continue;
            }
            state.reader_waits = true;
            state = shared
                .reader_wakes
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // The thread looks at `stop` before each block and whenever it wakes, so joining
        // it waits for one block at most.
        {
            let mut state = self.shared.lock();
            state.stop = true;
            self.shared.thread_wakes.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The blocks of `segment` from `first` on that hold index entries of the stream `summary`
/// describes, up to the first entry at or after seq `last`, in order.
fn plan(segment: &SealedSegment, summary: StreamSummary, last: u64, first: usize) -> Vec<usize> {
    let mut plan = Vec::new();
    let Some(blocks) = segment.blocks.as_ref() else {
        return plan;
    };
    let Some(first_offset) = blocks.logical_range(first).map(|r| r.start) else {
        return plan;
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
            if let Some(between) = previous.filter(|&p| p + 2 == index).map(|p| p + 1) {
                plan.push(between);
            }
            plan.push(index);
            previous = Some(index);
        }
        // The window that reads `last` anchors at the first entry at or after it.
        if seq >= last {
            break;
        }
    }
    plan
}

/// The read-ahead thread's work; see [`ReadAhead`]. After a block that fails to verify or
/// decompress, nothing more is read here.
fn read_ahead(shared: &AheadShared) {
    /// Marks the thread ended however it ends, so the reader never waits for it in vain.
    struct Ended<'a>(&'a AheadShared);
    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            let mut state = self.0.lock();
            state.thread_ended = true;
            self.0.reader_wakes.notify_one();
        }
    }
    let _ended = Ended(shared);
    let mut state = shared.lock();
    loop {
        if state.stop {
            return;
        }
        if state.first_free.max(state.reader_at) >= state.planned {
            return;
        }
        let until = state.reader_at + AHEAD_BLOCKS;
        let Some(at) = state.claim(until) else {
            // Too far ahead: wait for the reader.
            state.thread_waits = true;
            state = shared
                .thread_wakes
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            continue;
        };
        drop(state);
        if !shared.decompress(at) {
            return;
        }
        state = shared.lock();
    }
}
