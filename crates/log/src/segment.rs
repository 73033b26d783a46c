//! Segment files: naming, the sealed segment (mapped, with its footer), and the batch scan
//! shared by recovery of the active segment, footer rebuilds and `verify`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use sessionlog_format::{
    decode_record_header, encode_footer, read_record_of_checked_block, segment_file_name,
    verify_batch_in, verify_record_in, CatalogEntry, CatalogOp, FooterView, IndexEntry,
    RecordHeader, RecordView, SegmentCrc, StreamSummary, CATALOG_STREAM, KIND_CATALOG_CHECKPOINT,
    KIND_CATALOG_CREATE, KIND_CATALOG_DELETE, KIND_CATALOG_RENAME, RECORD_ALIGN, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN,
};

use crate::compress::Blocks;
use crate::error::{corrupted, Result};
use crate::ids::SegmentId;
use crate::index::{anchor_for, ActiveStreamIndex, Anchor};
use crate::options::RecoveryMode;
use crate::recovery::{
    after_fact, decide_tail, here_fact, is_zero, next_valid_batch_in, AfterFact, HereFact,
    RoleFact, TailDecision,
};
use crate::Record;

pub(crate) fn segment_path(dir: &Path, id: SegmentId) -> PathBuf {
    dir.join(segment_file_name(id.0))
}

/// A sealed, immutable segment mapped into memory, with its verified footer. A compressed
/// segment (spec: segment.md#compressed-segments) also has its blocks; its offsets are those
/// of its logical image, and records are read from the block that holds them.
#[derive(Debug)]
pub(crate) struct SealedSegment {
    pub id: SegmentId,
    pub bytes: Bytes,
    pub footer: FooterView,
    pub blocks: Option<Blocks>,
    /// The checksum state every record checksum of the segment starts from (its id hashed),
    /// seeded once instead of for each record read.
    pub crc: SegmentCrc,
}

impl SealedSegment {
    /// A sealed segment over `bytes` with its verified footer (and block directory, when
    /// compressed); its record checksum state is seeded here, once.
    pub fn new(id: SegmentId, bytes: Bytes, footer: FooterView, blocks: Option<Blocks>) -> Self {
        SealedSegment {
            id,
            bytes,
            footer,
            blocks,
            crc: SegmentCrc::new(id.0),
        }
    }

    /// A sealed segment over the whole file `bytes`, compressed or not, whose footer (and
    /// block directory) must verify.
    pub fn decode(id: SegmentId, bytes: Bytes) -> Result<SealedSegment> {
        if crate::compress::is_compressed(&bytes) {
            let blocks = Blocks::decode(&bytes, id)?;
            return Ok(SealedSegment::new(id, bytes, blocks.footer(), Some(blocks)));
        }
        let footer = FooterView::decode(&bytes, id.0)
            .map_err(|e| corrupted(id, 0, "footer of a sealed segment", Some(e)))?;
        Ok(SealedSegment::new(id, bytes, footer, None))
    }

    /// The bytes holding logical `offset`, and where `offset` is in them: the mapping of an
    /// uncompressed segment, or the decompressed block of a compressed one.
    fn holding(&self, offset: u64) -> Result<(Bytes, usize)> {
        let (bytes, start) = match &self.blocks {
            None => (self.bytes.clone(), 0),
            Some(b) => b.holding(&self.bytes, self.id, offset)?,
        };
        let at = usize::try_from(offset - start)
            .ok()
            .filter(|&at| at < bytes.len())
            .ok_or_else(|| {
                corrupted(self.id, offset, "record offset lies past the segment", None)
            })?;
        Ok((bytes, at))
    }

    /// The segment's logical image: the file itself, or a compressed file expanded.
    pub fn logical_image(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        match &self.blocks {
            None => Ok(std::borrow::Cow::Borrowed(&self.bytes[..])),
            Some(b) => b.expand(&self.bytes, self.id).map(std::borrow::Cow::Owned),
        }
    }

    pub fn header_at(&self, offset: u64) -> Result<RecordHeader> {
        let decoded = match &self.blocks {
            // The mapping is read in place: a walk over a window's headers takes no share
            // of it per header.
            None => decode_record_header(&self.bytes[self.offset_in_mapping(offset)?..]),
            Some(_) => {
                let (bytes, at) = self.holding(offset)?;
                decode_record_header(&bytes[at..])
            }
        };
        decoded.map_err(|e| corrupted(self.id, offset, "bad record header", Some(e)))
    }

    pub fn anchor(&self, summary: &StreamSummary, seq: u64) -> Anchor {
        let seg = &self.bytes[..];
        anchor_for(
            seq,
            summary.index_count,
            |i| {
                self.footer
                    .index_entry(seg, summary.index_start + i)
                    .unwrap_or(sessionlog_format::IndexEntry {
                        seq: u64::MAX,
                        offset: 0,
                    })
            },
            (summary.last_seq, summary.last_offset),
        )
    }

    /// The verified record at `offset`, its payload sharing the mapping (or the block).
    pub fn record_at(&self, offset: u64) -> Result<Record> {
        match &self.blocks {
            // The payload is sliced from the mapping itself (one share of it taken, not a
            // share for the lookup and another for the slice).
            None => self.record_in(&self.bytes, self.offset_in_mapping(offset)?, offset),
            Some(_) => {
                let (bytes, at) = self.holding(offset)?;
                self.record_in(&bytes, at, offset)
            }
        }
    }

    /// The verified record at logical `offset`, found at `at` in `bytes` (the mapping or
    /// the decompressed block holding it); its payload shares `bytes`. A record of a masked
    /// block was verified with its block (spec: segment.md#reading-a-compressed-block).
    pub fn record_in(&self, bytes: &Bytes, at: usize, offset: u64) -> Result<Record> {
        let buf = bytes.get(at..).unwrap_or_default();
        let read = match &self.blocks {
            Some(blocks) if blocks.checksums_left_zero() => {
                read_record_of_checked_block(buf, offset)
            }
            _ => verify_record_in(buf, &self.crc, offset),
        };
        let (h, _) =
            read.map_err(|e| corrupted(self.id, offset, "record fails verification", Some(e)))?;
        let start = at + RECORD_HEADER_LEN;
        Ok(Record::new(
            h,
            bytes.slice(start..start + h.payload_len as usize),
        ))
    }

    /// Where logical `offset` is in the mapping of an uncompressed segment.
    fn offset_in_mapping(&self, offset: u64) -> Result<usize> {
        usize::try_from(offset)
            .ok()
            .filter(|&at| at < self.bytes.len())
            .ok_or_else(|| corrupted(self.id, offset, "record offset lies past the segment", None))
    }
}

/// The outcome of scanning a segment's batches.
#[derive(Debug, Default)]
pub(crate) struct ScanOutcome {
    /// Offset where valid data ends.
    pub data_end: u64,
    /// Records per stream in this segment.
    pub streams: BTreeMap<u64, ActiveStreamIndex>,
    /// Catalog records in this segment.
    pub catalog: Vec<CatalogEntry>,
    /// Set when the tail from `data_end` on was cut.
    pub cut: Option<TailCut>,
    /// Records found, catalog records included.
    pub records: u64,
}

impl ScanOutcome {
    /// The footer describing what was scanned (or copied): a damaged footer's rebuild, or a
    /// rewritten segment's.
    pub fn footer(&self, id: SegmentId) -> Vec<u8> {
        let mut summaries: Vec<StreamSummary> = Vec::new();
        let mut index: Vec<IndexEntry> = Vec::new();
        for (&k, ix) in &self.streams {
            summaries.push(ix.summary(k, index.len() as u32));
            index.extend(ix.entries());
        }
        let mut footer = Vec::new();
        encode_footer(
            &mut footer,
            id.0,
            self.data_end,
            &summaries,
            &index,
            &self.catalog,
        );
        footer
    }
}

/// A torn tail cut off the active segment on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    /// The segment.
    pub segment: SegmentId,
    /// Where the cut was made; everything from here on was dropped.
    pub offset: u64,
    /// Bytes dropped (from the cut to the end of the file, zero fill included).
    pub bytes: u64,
    /// Non-zero bytes among them.
    pub nonzero_bytes: u64,
    /// Verifiable records found after the cut (unsynced batches that reached the disk out of
    /// order); they are dropped with the rest, since the log keeps only a gap-free prefix.
    pub records_dropped: u64,
    /// The decision-table row that made the cut.
    pub reason: &'static str,
}

/// What the scan needs to know about streams to check that records continue them.
pub(crate) trait StreamBook {
    /// Next expected seq of a stream, `None` when the stream does not exist.
    fn next_seq(&self, stream: u64) -> Option<u64>;
    /// Whether a catalog checkpoint is accepted at any seq (the store starts at it).
    fn accepts_starting_checkpoint(&self) -> bool {
        false
    }
    /// Applies a verified record (its catalog meaning, its seq).
    fn apply(&mut self, header: &RecordHeader, payload: &[u8]) -> std::result::Result<(), String>;
}

/// Scans the batches of a segment from its header on, applying each to `book`, until the
/// decision table says where the data ends. Returns an error when the table says `Corrupt`.
pub(crate) fn scan_segment(
    seg: &[u8],
    id: SegmentId,
    role: RoleFact,
    mode: RecoveryMode,
    book: &mut dyn StreamBook,
    interval: u32,
) -> Result<ScanOutcome> {
    scan_segment_with(seg, id, role, mode, book, interval, scan_workers(seg.len()))
}

/// Below this many bytes a segment is scanned on the calling thread alone.
const PARALLEL_SCAN_MIN_BYTES: usize = 4 << 20;
/// At most this many threads check a segment's batches.
const MAX_SCAN_WORKERS: usize = 4;

/// Threads to check a segment of `len` bytes on: one for a small segment, otherwise one per
/// CPU up to [`MAX_SCAN_WORKERS`].
fn scan_workers(len: usize) -> usize {
    if len < PARALLEL_SCAN_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_SCAN_WORKERS))
}

/// [`scan_segment`] with the batches' checksums computed on `workers` threads ahead of the
/// scan ([`Parts`]). The outcome is the same for any number of workers: the scan still
/// takes the batches one by one, in order, and decides at the first that fails exactly as a
/// scan on one thread does.
pub(crate) fn scan_segment_with(
    seg: &[u8],
    id: SegmentId,
    role: RoleFact,
    mode: RecoveryMode,
    book: &mut dyn StreamBook,
    interval: u32,
    workers: usize,
) -> Result<ScanOutcome> {
    // Every checksum of the segment starts from its id: hashed once here, copied per batch
    // and per record.
    let seeded = SegmentCrc::new(id.0);
    let parts = (workers > 1).then(|| Parts::new(seg, &seeded, workers));
    std::thread::scope(|s| {
        if let Some(parts) = &parts {
            for _ in 1..workers.min(parts.count) {
                let spawned = std::thread::Builder::new()
                    .name("sessionlog-scan".into())
                    .spawn_scoped(s, || while parts.check_next(true) {});
                // A thread that could not start leaves its share to the others.
                if spawned.is_err() {
                    break;
                }
            }
        }
        // However the scan ends (an error included), the threads stop claiming parts.
        let _stop = StopOnDrop(parts.as_ref());
        let mut ahead = Ahead::new(parts.as_ref());
        let mut out = ScanOutcome::default();
        let mut at = SEGMENT_HEADER_LEN;
        // The records of the batch being checked and the running seqs of its streams, kept
        // between batches so that checking one does not allocate.
        let mut records = Vec::new();
        let mut pending = Vec::new();
        loop {
            let checked = match ahead.batch(at) {
                // Verified ahead: its records' headers come from the thread that checked it,
                // so the segment's bytes are not read again here.
                Some(verified) => Ok(verified),
                None => {
                    verify_batch_in(seg.get(at..).unwrap_or(&[]), &seeded, at as u64).map(|batch| {
                        records.clear();
                        records.extend(batch.records());
                        (&records[..], batch.end_offset() as usize)
                    })
                }
            };
            let (here, batch_error) = match checked {
                Ok((batch, end)) => {
                    match apply_batch(seg, batch, book, &mut pending, &mut out, id, interval)? {
                        Ok(()) => {
                            at = end;
                            continue;
                        }
                        Err(why) => (HereFact::OutOfSequence, Some(why)),
                    }
                }
                Err(e) => (here_fact(seg, at), Some(e.to_string())),
            };
            // The zeros after a chain that failed here, when the parts found them.
            let after = if ahead.zeros_after == Some(at) {
                AfterFact::OnlyZeros
            } else {
                after_fact(seg, id.0, at)
            };
            let row = decide_tail(here, after, role, mode);
            out.data_end = at as u64;
            match row.decision {
                TailDecision::EndOfData => return Ok(out),
                TailDecision::Corrupt => {
                    let detail = format!(
                        "{} ({here:?}, {after:?}): {}",
                        row.why,
                        batch_error.unwrap_or_default()
                    );
                    return Err(corrupted(id, at as u64, detail, None));
                }
                TailDecision::CutTornTail => {
                    out.cut = Some(TailCut {
                        segment: id,
                        offset: at as u64,
                        bytes: (seg.len() - at) as u64,
                        nonzero_bytes: seg[at..].iter().filter(|&&b| b != 0).count() as u64,
                        records_dropped: count_valid_records_after(seg, id.0, at),
                        reason: row.why,
                    });
                    return Ok(out);
                }
            }
        }
    })
}

/// The payload of a record of a verified batch of `seg`.
fn payload_of<'s>(seg: &'s [u8], r: &RecordView) -> &'s [u8] {
    let at = r.payload_offset() as usize;
    &seg[at..at + r.header.payload_len as usize]
}

/// Applies the records of one verified batch of `seg` when they continue their streams:
/// `Ok(Err(why))` when they do not (nothing applied), an error when the book refuses one.
fn apply_batch(
    seg: &[u8],
    records: &[RecordView],
    book: &mut dyn StreamBook,
    pending: &mut Vec<(u64, u64)>,
    out: &mut ScanOutcome,
    id: SegmentId,
    interval: u32,
) -> Result<std::result::Result<(), String>> {
    if let Err(why) = check_sequence(seg, records, book, pending) {
        return Ok(Err(why));
    }
    for r in records {
        let payload = payload_of(seg, r);
        book.apply(&r.header, payload)
            .map_err(|e| corrupted(id, r.offset, e, None))?;
        note_record(out, &r.header, r.offset, payload, interval);
    }
    Ok(Ok(()))
}

/// A batch of a part's chain: where it starts and ends, and its records among the part's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AheadBatch {
    offset: usize,
    end: usize,
    records: Range<usize>,
}

/// What one part of [`Parts`] holds, as checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PartFact {
    /// Where the part's chain of batches starts: the first offset in the part where a batch
    /// verifies (the segment header's end for the first part); `None` when the part holds
    /// none.
    start: Option<usize>,
    /// Where the chain ends: at the first batch that starts past the part, or at the first
    /// that does not verify (the part's start without a chain).
    end: usize,
    /// Whether a batch at `end` failed to verify (the chain ends inside the part).
    failed: bool,
    /// Whether the part's bytes after the chain (from one alignment unit past its end, or all
    /// of them without a chain) are zeros.
    zeros: bool,
    /// Where the part ends.
    part_end: usize,
    /// The chain's batches, in order.
    batches: Vec<AheadBatch>,
    /// Their records' headers and places.
    records: Vec<RecordView>,
}

/// Verifies the chain of batches of `part` (starting at `first`, or at the first batch that
/// verifies in the part) and whether the bytes after it are zeros; keeps the batches'
/// bounds and records.
fn check_part(
    seg: &[u8],
    seeded: &SegmentCrc,
    part: Range<usize>,
    first: Option<usize>,
) -> PartFact {
    let mut fact = PartFact {
        end: part.start,
        part_end: part.end,
        ..PartFact::default()
    };
    // The first batch, when the search verified it already.
    let (start, mut found) = match first {
        Some(at) => (at, None),
        None if is_zero(&seg[part.clone()]) => {
            fact.zeros = true;
            return fact;
        }
        None => match next_valid_batch_in(seg, seeded, part.start, part.end) {
            Some(batch) => (batch.offset() as usize, Some(batch)),
            None => return fact,
        },
    };
    fact.start = Some(start);
    let mut at = start;
    while at < part.end {
        let checked = match found.take() {
            Some(batch) => Ok(batch),
            None => verify_batch_in(&seg[at..], seeded, at as u64),
        };
        match checked {
            Ok(batch) => {
                let from = fact.records.len();
                fact.records.extend(batch.records());
                let end = batch.end_offset() as usize;
                fact.batches.push(AheadBatch {
                    offset: at,
                    end,
                    records: from..fact.records.len(),
                });
                at = end;
            }
            Err(_) => {
                let after = (at + RECORD_ALIGN).min(part.end);
                fact.end = at;
                fact.failed = true;
                fact.zeros = is_zero(&seg[after..part.end]);
                return fact;
            }
        }
    }
    fact.end = at;
    fact.zeros = true;
    fact
}

/// Parts a segment is cut into so that several threads check its batches ahead of the scan.
/// Every thread, the scanning one included, claims the next part nobody has claimed and
/// checks it: the chain of batches in it (the first part's from the segment header on, every
/// other part's from the first batch in it that verifies, so none waits for another to find
/// its start), each batch verified in order up to the first that starts past the part, stopping
/// at one that fails; and whether the bytes after that chain are zeros. The scanning thread
/// takes the facts in order ([`Ahead`]) and, while the part it needs next is still being
/// checked, checks another instead of waiting. A fact holds its batches' record headers, so
/// the scanning thread applies them without reading the segment's bytes, which another CPU's
/// cache holds. At most [`PARTS_AHEAD_PER_THREAD`] parts per thread are checked and not yet
/// taken: memory stays bounded whatever the segment's size.
struct Parts<'a> {
    seg: &'a [u8],
    seeded: &'a SegmentCrc,
    /// Bytes per part (the last may be shorter).
    len: usize,
    count: usize,
    /// Parts checked and not yet taken, at most.
    ahead: usize,
    state: Mutex<PartsState>,
    /// Signalled when a part is checked or taken, and when the scan stops.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct PartsState {
    /// The next part nobody has claimed.
    next: usize,
    /// The parts the scan has taken (all below this).
    taken: usize,
    /// Set once the scan needs no more parts: threads stop claiming them.
    stop: bool,
    facts: Vec<Option<PartFact>>,
}

/// Parts are this long at most, and at least [`MIN_PART_BYTES`]: small enough that the
/// scanning thread applies one part while other threads check the next ones.
const MAX_PART_BYTES: usize = 1 << 20;
/// See [`MAX_PART_BYTES`].
const MIN_PART_BYTES: usize = 64 << 10;
/// See [`Parts`].
const PARTS_AHEAD_PER_THREAD: usize = 4;

impl<'a> Parts<'a> {
    /// The parts of `seg`, about eight per thread within the bounds on a part's length.
    fn new(seg: &'a [u8], seeded: &'a SegmentCrc, workers: usize) -> Self {
        let data = seg.len().saturating_sub(SEGMENT_HEADER_LEN);
        let len = (data / (8 * workers.max(1)))
            .clamp(MIN_PART_BYTES, MAX_PART_BYTES)
            .next_multiple_of(RECORD_ALIGN);
        let count = data.div_ceil(len);
        Parts {
            seg,
            seeded,
            len,
            count,
            ahead: PARTS_AHEAD_PER_THREAD * workers.max(1),
            state: Mutex::new(PartsState {
                facts: vec![None; count],
                ..PartsState::default()
            }),
            changed: Condvar::new(),
        }
    }

    /// Claims the next part nobody has claimed and checks it; `false` when none is left or
    /// the scan stopped. While as many parts as allowed are checked and not taken, waits for
    /// the scan to take one (`wait`) or returns `false`.
    fn check_next(&self, wait: bool) -> bool {
        let k = {
            let mut state = self.state.lock();
            loop {
                if state.stop || state.next >= self.count {
                    return false;
                }
                if state.next < state.taken + self.ahead {
                    break;
                }
                if !wait {
                    return false;
                }
                self.changed.wait(&mut state);
            }
            state.next += 1;
            state.next - 1
        };
        let from = SEGMENT_HEADER_LEN + k * self.len;
        let part = from..(from + self.len).min(self.seg.len());
        let first = (k == 0).then_some(SEGMENT_HEADER_LEN);
        let fact = check_part(self.seg, self.seeded, part, first);
        self.state.lock().facts[k] = Some(fact);
        self.changed.notify_all();
        true
    }

    /// Takes part `k`'s fact, the parts before it taken already: checks other parts while it
    /// is not ready, and waits for it once that is all there is to do. Only the scanning
    /// thread takes, and never after it set `stop`.
    fn take(&self, k: usize) -> PartFact {
        loop {
            let mut state = self.state.lock();
            if let Some(fact) = state.facts[k].take() {
                state.taken = k + 1;
                drop(state);
                self.changed.notify_all();
                return fact;
            }
            drop(state);
            if !self.check_next(false) {
                let mut state = self.state.lock();
                while state.facts[k].is_none() {
                    self.changed.wait(&mut state);
                }
            }
        }
    }

    /// No more parts are needed: threads stop claiming them, and waiting ones return.
    fn stop(&self) {
        self.state.lock().stop = true;
        self.changed.notify_all();
    }
}

/// Stops the threads of [`Parts`] when dropped.
struct StopOnDrop<'p, 'a>(Option<&'p Parts<'a>>);

impl Drop for StopOnDrop<'_, '_> {
    fn drop(&mut self) {
        if let Some(parts) = self.0 {
            parts.stop();
        }
    }
}

/// What the scan knows of the batches checked ahead of it ([`Parts`]), taken part by part as
/// the scan reaches them. A part's chain counts only where it starts exactly where the chain
/// so far ends: a part that found a batch the chain does not reach (a payload's bytes that
/// happen to verify as one), or none, ends what is verified ahead, and the scan checks the
/// rest itself. So the scan decides the same for any number of threads.
struct Ahead<'p, 'a> {
    parts: Option<&'p Parts<'a>>,
    /// The next part whose fact the chain takes.
    next: usize,
    /// Every batch starting below this offset passed [`verify_batch_in`].
    verified_to: usize,
    /// Whether a later part may still extend the chain.
    open: bool,
    /// Set to `verified_to` when every byte from one alignment unit past it to the end of the
    /// segment is zero: the tail table's `OnlyZeros` there.
    zeros_after: Option<usize>,
    /// The part that last extended the chain, and its next batch the scan takes.
    current: PartFact,
    cursor: usize,
}

impl<'p, 'a> Ahead<'p, 'a> {
    fn new(parts: Option<&'p Parts<'a>>) -> Self {
        Ahead {
            parts,
            next: 0,
            verified_to: SEGMENT_HEADER_LEN,
            open: parts.is_some(),
            zeros_after: None,
            current: PartFact::default(),
            cursor: 0,
        }
    }

    /// The records of the batch at `at` and where it ends, when it was verified ahead.
    fn batch(&mut self, at: usize) -> Option<(&[RecordView], usize)> {
        if !self.verified(at) {
            return None;
        }
        let batch = self.current.batches.get(self.cursor)?;
        if batch.offset != at {
            return None;
        }
        self.cursor += 1;
        Some((&self.current.records[batch.records.clone()], batch.end))
    }

    /// Whether the batch at `at` (on the chain) was verified ahead; takes the facts of the
    /// parts up to the one holding it, as they are checked.
    fn verified(&mut self, at: usize) -> bool {
        while self.open && at >= self.verified_to {
            let Some(parts) = self.parts.filter(|p| self.next < p.count) else {
                self.open = false;
                break;
            };
            let fact = parts.take(self.next);
            self.next += 1;
            match fact.start {
                // A batch of the chain spans this part whole.
                _ if fact.part_end <= self.verified_to => {}
                Some(start) if start == self.verified_to => {
                    self.verified_to = fact.end;
                    let (failed, zeros) = (fact.failed, fact.zeros);
                    self.current = fact;
                    self.cursor = 0;
                    if failed {
                        self.settle(zeros);
                    }
                }
                // The chain ended where this part starts.
                None if fact.end == self.verified_to => self.settle(fact.zeros),
                _ => self.settle(false),
            }
        }
        at < self.verified_to
    }

    /// The chain ends at `verified_to`: notes whether nothing but zeros follows (`zeros`: the
    /// bytes after it in its own part are), and stops the threads.
    fn settle(&mut self, zeros: bool) {
        self.open = false;
        let mut zeros = zeros;
        if let Some(parts) = self.parts {
            while zeros && self.next < parts.count {
                let fact = parts.take(self.next);
                self.next += 1;
                zeros = fact.start.is_none() && fact.zeros;
            }
            parts.stop();
        }
        self.zeros_after = zeros.then_some(self.verified_to);
    }
}

fn check_sequence(
    seg: &[u8],
    records: &[RecordView],
    book: &dyn StreamBook,
    pending: &mut Vec<(u64, u64)>,
) -> std::result::Result<(), String> {
    // Records of one stream may repeat within a batch; check them against a running copy.
    pending.clear();
    for r in records {
        let h = r.header;
        let expected = match pending.iter().find(|(s, _)| *s == h.stream_id) {
            Some(&(_, next)) => Some(next),
            None if h.stream_id == CATALOG_STREAM
                && h.kind == KIND_CATALOG_CHECKPOINT
                && book.accepts_starting_checkpoint() =>
            {
                Some(h.seq)
            }
            None if h.stream_id == CATALOG_STREAM => {
                Some(book.next_seq(CATALOG_STREAM).unwrap_or(0))
            }
            None => book
                .next_seq(h.stream_id)
                .or_else(|| created_in_batch(seg, records, h.stream_id)),
        };
        match expected {
            Some(next) if next == h.seq => {}
            Some(next) => {
                return Err(format!(
                    "stream {} record seq {} where {next} was expected",
                    h.stream_id, h.seq
                ))
            }
            None => {
                return Err(format!(
                    "record of stream {} that no catalog record created",
                    h.stream_id
                ))
            }
        }
        match pending.iter_mut().find(|(s, _)| *s == h.stream_id) {
            Some(p) => p.1 += 1,
            None => pending.push((h.stream_id, h.seq + 1)),
        }
    }
    Ok(())
}

fn created_in_batch(seg: &[u8], records: &[RecordView], stream: u64) -> Option<u64> {
    records
        .iter()
        .any(|r| {
            r.header.stream_id == CATALOG_STREAM
                && r.header.kind == KIND_CATALOG_CREATE
                && payload_of(seg, r).get(..8) == Some(&stream.to_le_bytes()[..])
        })
        .then_some(0)
}

pub(crate) fn note_record(
    out: &mut ScanOutcome,
    h: &RecordHeader,
    offset: u64,
    payload: &[u8],
    interval: u32,
) {
    let bytes = (RECORD_HEADER_LEN + sessionlog_format::padded_len(h.payload_len as usize)) as u64;
    let off = offset as u32;
    match out.streams.get_mut(&h.stream_id) {
        Some(ix) => ix.push(h.seq, off, bytes, interval),
        None => {
            out.streams
                .insert(h.stream_id, ActiveStreamIndex::new(h.seq, off, bytes));
        }
    }
    out.records += 1;
    if h.stream_id == CATALOG_STREAM {
        if let Some(entry) = catalog_entry(h, payload) {
            out.catalog.push(entry);
        }
    }
}

/// The catalog meaning of a catalog record. spec: segment.md#streams-and-the-catalog
pub(crate) fn catalog_entry(h: &RecordHeader, payload: &[u8]) -> Option<CatalogEntry> {
    let id = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    let (op, name) = match h.kind {
        KIND_CATALOG_CREATE => (CatalogOp::Create, payload[8..].to_vec()),
        KIND_CATALOG_DELETE if payload.len() == 8 => (CatalogOp::Delete, Vec::new()),
        KIND_CATALOG_RENAME => (CatalogOp::Rename, payload[8..].to_vec()),
        // The entry carries the payload after `next_stream_id`. spec: segment.md#catalog-entry
        KIND_CATALOG_CHECKPOINT => (CatalogOp::Checkpoint, payload[8..].to_vec()),
        _ => return None,
    };
    Some(CatalogEntry {
        op,
        stream_id: id,
        seq: h.seq,
        name,
    })
}

fn count_valid_records_after(seg: &[u8], id: u64, from: usize) -> u64 {
    crate::recovery::valid_batches_from(seg, id, from + sessionlog_format::RECORD_ALIGN)
        .map(|b| u64::from(b.header.record_count))
        .sum()
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use proptest::prelude::*;
    use sessionlog_format::{BatchEncoder, BATCH_HEADER_LEN, BATCH_TRAILER_LEN};

    use super::*;
    use crate::state::Catalog;
    use crate::{Append, Durability, Log, LogOptions};

    /// The first segment of a log the writer filled, cut a little past its last non-zero byte:
    /// `big` mixes records larger than the parts a scan of it is cut into.
    fn write_image(big: bool) -> Vec<u8> {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = LogOptions {
            segment_size_bytes: 16 << 20,
            ..LogOptions::default()
        };
        let log = Log::open(dir.path(), options).expect("open");
        let mut streams: Vec<_> = (0..5)
            .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
            .collect();
        let mut x = 7u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..600u64 {
            let records = 1 + (next() % 4) as usize;
            let payloads: Vec<Vec<u8>> = (0..records)
                .map(|k| {
                    let len = if big && next() % 9 == 0 {
                        20_000 + (next() % 30_000) as usize
                    } else {
                        (next() % 600) as usize
                    };
                    vec![b'a' + (k as u8 % 26); len]
                })
                .collect();
            let appends: Vec<Append<'_>> = payloads
                .iter()
                .map(|p| Append::new(streams[(next() % 5) as usize], 1, p))
                .collect();
            let durability = if i % 17 == 0 {
                Durability::Sync
            } else {
                Durability::Buffered
            };
            log.commit(&appends, durability).expect("commit");
            match i {
                200 => log
                    .rename_stream(streams[1], "renamed", Durability::Buffered)
                    .expect("rename"),
                300 => {
                    log.delete_stream(streams[2], Durability::Buffered)
                        .expect("delete");
                    streams[2] = log.create_stream("s2-again").expect("create");
                }
                _ => {}
            }
        }
        log.close().expect("close");
        let bytes = std::fs::read(segment_path(dir.path(), SegmentId(1))).expect("read");
        let end = bytes.iter().rposition(|&b| b != 0).unwrap_or(0) + 1;
        bytes[..(end + (16 << 10)).min(bytes.len())].to_vec()
    }

    fn images() -> &'static [Vec<u8>; 2] {
        static IMAGES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
        IMAGES.get_or_init(|| [write_image(false), write_image(true)])
    }

    /// The scan's outcome (or error) and the catalog it left, as text.
    fn scan_with(seg: &[u8], workers: usize) -> String {
        let mut catalog = Catalog::new();
        let out = scan_segment_with(
            seg,
            SegmentId(1),
            RoleFact::Active,
            RecoveryMode::TolerateTornTail,
            &mut catalog,
            LogOptions::default().index_interval_bytes,
            workers,
        );
        format!("{out:?}\n{catalog:?}")
    }

    /// Where the chain of batches ends in `seg`, and the offsets of its batches.
    fn chain(seg: &[u8]) -> Vec<usize> {
        let seeded = SegmentCrc::new(1);
        let mut at = SEGMENT_HEADER_LEN;
        let mut starts = Vec::new();
        while let Ok(b) = verify_batch_in(&seg[at..], &seeded, at as u64) {
            starts.push(at);
            at = b.end_offset() as usize;
        }
        starts.push(at);
        starts
    }

    /// A batch framed for offset `at` of segment 1, as a writer would have framed it there,
    /// of one record of stream 1 at `seq`.
    fn batch_for(at: usize, payload_len: usize, synced_through: u64, seq: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut enc = BatchEncoder::begin(&mut buf, 1, at as u64, synced_through);
        enc.push(
            RecordHeader {
                stream_id: 1,
                seq,
                kind: 1,
                flags: 0,
                prev_offset: 0,
                payload_len: payload_len as u32,
            },
            &vec![b'z'; payload_len],
        );
        enc.finish();
        buf
    }

    #[test]
    fn the_chain_is_verified_ahead_across_every_part() {
        for seg in images() {
            let starts = chain(seg);
            let chain_end = *starts.last().expect("end");
            let seeded = SegmentCrc::new(1);
            let parts = Parts::new(seg, &seeded, 2);
            assert!(parts.count >= 8, "{} parts", parts.count);
            let mut ahead = Ahead::new(Some(&parts));
            for w in starts.windows(2) {
                let expected: Vec<RecordView> = verify_batch_in(&seg[w[0]..], &seeded, w[0] as u64)
                    .expect("a batch of the chain")
                    .records()
                    .collect();
                let (records, end) = ahead.batch(w[0]).expect("verified ahead");
                assert_eq!(
                    records,
                    &expected[..],
                    "the records of the batch at {}",
                    w[0]
                );
                assert_eq!(end, w[1]);
            }
            assert!(ahead.batch(chain_end).is_none());
            assert_eq!(ahead.verified_to, chain_end);
            assert_eq!(ahead.zeros_after, Some(chain_end));
            assert_eq!(ahead.next, parts.count, "every part was taken");
            for workers in 2..=4 {
                assert_eq!(scan_with(seg, 1), scan_with(seg, workers));
            }
        }
    }

    #[test]
    fn threads_check_no_more_parts_ahead_of_the_scan_than_allowed() {
        let mut seg = images()[1].clone();
        seg.resize(seg.len() + (4 << 20), 0);
        let seeded = SegmentCrc::new(1);
        let parts = Parts::new(&seg, &seeded, 2);
        assert!(parts.count > parts.ahead, "{} parts", parts.count);
        let checked = || parts.state.lock().facts.iter().flatten().count();
        std::thread::scope(|s| {
            s.spawn(|| while parts.check_next(true) {});
            s.spawn(|| while parts.check_next(true) {});
            // A failed assertion still lets the threads go.
            let _stop = StopOnDrop(Some(&parts));
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert_eq!(checked(), parts.ahead, "checked and not taken");
            for k in 0..parts.count {
                let _ = parts.take(k);
                assert!(checked() <= parts.ahead);
            }
            assert_eq!(parts.state.lock().next, parts.count);
        });
    }

    #[test]
    fn a_damaged_batch_ends_what_is_verified_ahead() {
        let seg = &images()[0];
        let starts = chain(seg);
        // A batch framed inside another's payload, in the middle of the data.
        let inside = starts[starts.len() / 2];
        let q = inside + BATCH_HEADER_LEN + RECORD_HEADER_LEN;
        let mut damaged = seg.clone();
        let fake = batch_for(q, 8, 0, 0);
        damaged[q..q + fake.len()].copy_from_slice(&fake);
        let seeded = SegmentCrc::new(1);
        let parts = Parts::new(&damaged, &seeded, 2);
        let mut ahead = Ahead::new(Some(&parts));
        assert!(
            !ahead.verified(inside),
            "the damaged batch was not verified"
        );
        assert_eq!(ahead.verified_to, inside);
        assert_eq!(ahead.zeros_after, None);
        assert_eq!(scan_with(&damaged, 1), scan_with(&damaged, 2));
    }

    #[test]
    fn parts_count_only_while_each_starts_where_the_last_ended() {
        let fact = |start, end, failed, zeros, part_end| PartFact {
            start,
            end,
            failed,
            zeros,
            part_end,
            ..PartFact::default()
        };
        let ahead = |facts: Vec<PartFact>| {
            let seg = [0u8; 0];
            let seeded = SegmentCrc::new(1);
            let mut parts = Parts::new(&seg, &seeded, 2);
            parts.count = facts.len();
            parts.state = Mutex::new(PartsState {
                next: facts.len(),
                facts: facts.into_iter().map(Some).collect(),
                ..PartsState::default()
            });
            let mut ahead = Ahead::new(Some(&parts));
            ahead.verified(usize::MAX);
            (ahead.verified_to, ahead.zeros_after)
        };
        // Each part starts where the last ended: the chain runs through all of them.
        let joined = vec![
            fact(Some(64), 1000, false, true, 1000),
            fact(Some(1000), 2008, false, true, 2000),
            fact(Some(2008), 2500, true, true, 3000),
            fact(None, 3000, false, true, 4000),
        ];
        assert_eq!(ahead(joined), (2500, Some(2500)));
        // A part that starts elsewhere (a header inside a payload) ends what is verified,
        // whatever it verified itself.
        let elsewhere = vec![
            fact(Some(64), 1000, false, true, 1000),
            fact(Some(1008), 2000, false, true, 2000),
            fact(Some(2000), 2500, true, true, 3000),
        ];
        assert_eq!(ahead(elsewhere), (1000, None));
        // A part that a batch of the chain spans whole is passed over.
        let spanned = vec![
            fact(Some(64), 2200, false, true, 1000),
            fact(None, 1000, false, false, 2000),
            fact(Some(2200), 2500, true, true, 3000),
        ];
        assert_eq!(ahead(spanned), (2500, Some(2500)));
        let spanned_to_its_end = vec![
            fact(Some(64), 2000, false, true, 1000),
            fact(Some(1504), 2000, false, true, 2000),
            fact(Some(2000), 2500, true, true, 3000),
        ];
        assert_eq!(ahead(spanned_to_its_end), (2500, Some(2500)));
        // Zeros count only if every later part holds nothing but zeros.
        let later_data = vec![
            fact(Some(64), 900, true, true, 1000),
            fact(None, 1000, false, true, 2000),
            fact(Some(2040), 2100, false, true, 3000),
        ];
        assert_eq!(ahead(later_data), (900, None));
        let later_garbage = vec![
            fact(Some(64), 900, true, true, 1000),
            fact(None, 1000, false, false, 2000),
        ];
        assert_eq!(ahead(later_garbage), (900, None));
        // The chain ends right where a part of zeros starts.
        let at_a_bound = vec![
            fact(Some(64), 1000, false, true, 1000),
            fact(None, 1000, false, true, 2000),
        ];
        assert_eq!(ahead(at_a_bound), (1000, Some(1000)));
        // A part with no header but bytes other than zeros says nothing of zeros.
        let no_header = vec![
            fact(Some(64), 1000, false, true, 1000),
            fact(None, 1000, false, false, 2000),
        ];
        assert_eq!(ahead(no_header), (1000, None));
    }

    #[derive(Debug, Clone)]
    enum Damage {
        /// Flip a bit at a point of the data.
        Flip(u32, u8),
        /// Zero a run of bytes.
        Zero(u32, u16),
        /// Write a batch framed for that (aligned) place: whole, or its header alone.
        Batch(u32, u16, bool, bool),
        /// Cut the image short.
        Truncate(u32),
        /// Replace a batch of the chain by a valid one of the same length whose record is
        /// out of sequence.
        Resequence(u32, bool),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            (any::<u32>(), 0u8..8).prop_map(|(p, b)| Damage::Flip(p, b)),
            (any::<u32>(), 1u16..4096).prop_map(|(p, l)| Damage::Zero(p, l)),
            (any::<u32>(), 0u16..2048, any::<bool>(), any::<bool>())
                .prop_map(|(p, l, a, h)| Damage::Batch(p, l, a, h)),
            any::<u32>().prop_map(Damage::Truncate),
            (any::<u32>(), any::<bool>()).prop_map(|(k, a)| Damage::Resequence(k, a)),
        ]
    }

    fn apply(seg: &mut Vec<u8>, damage: &Damage) {
        // Points spread over the data and a little past it.
        let at = |p: u32| (p as usize) % seg.len();
        match *damage {
            Damage::Flip(p, bit) => {
                let i = at(p);
                seg[i] ^= 1 << bit;
            }
            Damage::Zero(p, len) => {
                let i = at(p);
                let end = (i + len as usize).min(seg.len());
                seg[i..end].fill(0);
            }
            Damage::Batch(p, len, attested, header_only) => {
                let q = at(p) / RECORD_ALIGN * RECORD_ALIGN;
                let synced = if attested { seg.len() as u64 } else { 0 };
                let mut batch = batch_for(q, len as usize, synced, 0);
                if header_only {
                    batch.truncate(BATCH_HEADER_LEN);
                }
                let end = (q + batch.len()).min(seg.len());
                seg[q..end].copy_from_slice(&batch[..end - q]);
            }
            Damage::Truncate(p) => {
                let len = at(p).max(SEGMENT_HEADER_LEN);
                seg.truncate(len);
            }
            Damage::Resequence(k, attested) => {
                let starts = chain(seg);
                if starts.len() < 2 {
                    return;
                }
                let i = k as usize % (starts.len() - 1);
                let (q, end) = (starts[i], starts[i + 1]);
                let frame = BATCH_HEADER_LEN + RECORD_HEADER_LEN + BATCH_TRAILER_LEN;
                let synced = if attested { end as u64 } else { 0 };
                let batch = batch_for(q, (end - q).saturating_sub(frame), synced, 1 << 40);
                if batch.len() == end - q {
                    seg[q..end].copy_from_slice(&batch);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Whatever damage a segment holds, scanning it with batches verified ahead on any
        /// number of threads decides exactly as a scan on one thread does.
        #[test]
        fn verifying_ahead_never_changes_what_the_scan_decides(
            image in 0usize..2,
            zeros in prop_oneof![Just(0usize), Just(1usize << 20)],
            damages in prop::collection::vec(damage(), 0..4),
        ) {
            // With a long run of zeros after the data, as a copy of a preallocated segment has,
            // later parts hold nothing but zeros, or what damage put there.
            let mut seg = images()[image].clone();
            seg.resize(seg.len() + zeros, 0);
            for d in &damages {
                apply(&mut seg, d);
            }
            let alone = scan_with(&seg, 1);
            for workers in 2..=4 {
                prop_assert_eq!(&alone, &scan_with(&seg, workers), "workers {}", workers);
            }
        }
    }
}
