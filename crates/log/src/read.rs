//! The read path: a record by `(stream, seq)` and iteration over a seq range.
//!
//! Sealed segments are read from their mapping (payloads are slices of it); the active
//! segment through positional reads. Every record returned has been verified: against its
//! own checksum, or, in a block of a compressed segment, with its block (the block's stored
//! checksum and its frame's content checksum; spec: segment.md#reading-a-compressed-block).

use std::sync::Arc;

use bytes::Bytes;
use sessionlog_format::{
    decode_record_header, verify_record, RecordHeader, StreamSummary, RECORD_HEADER_LEN,
};

use crate::block_cursor::BlockCursor;
use crate::error::{corrupted, io_err, Error, Result};
use crate::ids::{SegmentId, Seq, StreamId};
use crate::index::{walk_back, Anchor};
use crate::log::{unknown, Inner, Record};
use crate::segment::SealedSegment;
use crate::state::State;
use crate::storage::StorageFile;

/// Where a seq of a stream lives, resolved under the lock and read outside it.
enum Location {
    Sealed {
        segment: Arc<SealedSegment>,
        summary: StreamSummary,
    },
    Active {
        reader: ActiveReader,
        anchor: Anchor,
    },
}

/// Reads records of the active segment: from the file up to where it has been written, and
/// from a copy of the write buffer after that, so a read never has to write anything.
struct ActiveReader {
    file: Arc<dyn StorageFile>,
    segment: SegmentId,
    /// Segment offset of the buffer's first byte, and a copy of the buffer.
    pending: Option<(u64, Bytes)>,
    /// The span of the file read around the walk's anchor: its segment offset and bytes.
    /// A window's headers and records are served from it instead of two reads per record;
    /// an iteration hands it on to its next window, which reads the file again only when
    /// its anchor lies outside it.
    around_anchor: Option<(u64, Bytes)>,
    /// Whether this window reads no span around the anchor: one was read for it already,
    /// or the walk's stretch is too long for one (see [`MAX_WALK_SPAN`]).
    read_for_window: bool,
    /// Segment offset up to which the file held written records when the window was
    /// located: a span read keeps no byte after it, so that a span handed on to a later
    /// window never shows it bytes that were written after the span was read.
    written_end: u64,
    /// Bytes read before the anchor: as far as the walk back can go (see [`MAX_WALK_SPAN`]).
    read_before: u64,
    /// Bytes read after the anchor: a hop read's worth when no later window follows (a
    /// point read, or an anchor that is its stream's last record), since only the anchor's
    /// own record is wanted there and the rest is other streams' records or nothing written
    /// yet (a longer record is read again by itself); more for an iteration, whose next
    /// windows lie after this one. A reader following a stream's newest records reads a
    /// hop read's worth past the anchor at every read.
    read_ahead: u64,
    /// The records the walk found outside the span, each read with up to `hop_read` bytes
    /// from its header on (segment offset, bytes): where other streams' records lie
    /// between a stream's own, each hop of the walk is one read that usually holds the
    /// record too, instead of one read for the header and another for the record.
    hops: Vec<(u64, Bytes)>,
    /// Bytes of a hop read.
    hop_read: u64,
}

/// A window's walk goes back from its anchor to the first record it wants, and never past
/// the index entry at or before that record: the span it reads is exactly that stretch,
/// when it is at most this long. A longer stretch holds mostly other streams' records (an
/// entry stands for about 4 KiB of the stream's own), and is read only at the records the
/// walk reaches, a hop read each: copying what lies between would cost more than a read
/// per record.
const MAX_WALK_SPAN: u64 = 64 * 1024;

/// Bytes of the active segment an iteration reads after a window's anchor: the span then
/// holds the next windows of a stream whose records lie close together too.
const ITERATION_READ_AHEAD: u64 = 64 * 1024;

/// Bytes read at a record the walk reaches outside the span around the anchor: its header
/// and, for most records, the whole record (half as much again as the stream's mean
/// record, within these bounds).
const HOP_READ: std::ops::RangeInclusive<u64> = 512..=64 * 1024;

/// The bytes `offset..offset + len` of the file when `span` (its segment offset and bytes)
/// holds them, and where they start in it.
fn holding(span: &(u64, Bytes), offset: u64, len: usize) -> Option<(&Bytes, usize)> {
    let (base, bytes) = span;
    let at = usize::try_from(offset.checked_sub(*base)?).ok()?;
    (at.checked_add(len)? <= bytes.len()).then_some((bytes, at))
}

impl ActiveReader {
    /// The pending bytes from `offset` on, when `offset` lies in the copied buffer.
    fn pending_at(&self, offset: u64) -> Option<&[u8]> {
        let (bytes, at) = self.pending_from(offset)?;
        Some(bytes.get(at..).unwrap_or(&[]))
    }

    /// The copied buffer and where `offset` lies in it, when it does.
    fn pending_from(&self, offset: u64) -> Option<(&Bytes, usize)> {
        let (base, bytes) = self.pending.as_ref()?;
        let at = usize::try_from(offset.checked_sub(*base)?).ok()?;
        Some((bytes, at))
    }

    /// The bytes `offset..offset + len` when the span read around the anchor or a hop read
    /// holds them.
    fn span_holding(&self, offset: u64, len: usize) -> Option<(&Bytes, usize)> {
        self.around_anchor
            .iter()
            .chain(self.hops.iter().rev())
            .find_map(|span| holding(span, offset, len))
    }

    /// Reads the file's bytes around `offset` (as many as it has, up to `read_before` before
    /// it and `read_ahead` after it, but none past `written_end`). The bytes past the
    /// last written record are never used: the walk only goes to records it found written,
    /// and the checksum of each is verified. Not reading them matters for a reader of a
    /// stream's newest records: the read-ahead would otherwise be mostly the zeros after
    /// the data, read and dropped at every read.
    fn read_around(&mut self, offset: u64) -> Result<()> {
        self.read_for_window = true;
        let start = offset.saturating_sub(self.read_before);
        let end = (offset + self.read_ahead).min(self.written_end).max(start);
        self.around_anchor = Some((start, self.read_file(start, end)?));
        Ok(())
    }

    /// The file's bytes `start..end`, as many as it has.
    fn read_file(&self, start: u64, end: u64) -> Result<Bytes> {
        let mut buf = vec![0u8; end.saturating_sub(start) as usize];
        let mut filled = 0;
        while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
            let n = self
                .file
                .read_at(rest, start + filled as u64)
                .map_err(io_err("reading", format!("segment {}", self.segment)))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        Ok(Bytes::from(buf))
    }

    fn header(&mut self, offset: u64) -> Result<RecordHeader> {
        if let Some(b) = self.pending_at(offset) {
            return decode_record_header(b)
                .map_err(|e| corrupted(self.segment, offset, "bad record header", Some(e)));
        }
        // A header the spans read so far do not hold: the window's span around its anchor
        // when none was read yet, then a hop read when that does not hold it either.
        if self.span_holding(offset, RECORD_HEADER_LEN).is_none() {
            if !self.read_for_window {
                self.read_around(offset)?;
            }
            if self.span_holding(offset, RECORD_HEADER_LEN).is_none() {
                self.read_hop(offset)?;
            }
        }
        match self.span_holding(offset, RECORD_HEADER_LEN) {
            Some((bytes, at)) => decode_record_header(bytes.get(at..).unwrap_or(&[]))
                .map_err(|e| corrupted(self.segment, offset, "bad record header", Some(e))),
            None => pread_header(&*self.file, self.segment, offset),
        }
    }

    /// Reads `hop_read` bytes on each side of `offset` (none past `written_end`) and keeps
    /// them for the walk's headers and the records' reads: the walk goes on to lower
    /// offsets, and a stream's records written in one batch lie next to each other, so one
    /// hop read often serves the next hops too.
    fn read_hop(&mut self, offset: u64) -> Result<()> {
        let start = offset.saturating_sub(self.hop_read);
        let end = (offset + self.hop_read).min(self.written_end).max(offset);
        let bytes = self.read_file(start, end)?;
        self.hops.push((start, bytes));
        Ok(())
    }

    /// The record at `offset`, whose header (read by the walk that found it) says its
    /// payload is `payload_len` bytes: from the buffer copy, the span read around the anchor
    /// or a hop read when one holds it, else a file read of exactly the record.
    fn record(&self, offset: u64, payload_len: u32) -> Result<Record> {
        let record_len = RECORD_HEADER_LEN + payload_len as usize;
        let Some((bytes, at)) = self
            .pending_from(offset)
            .or_else(|| self.span_holding(offset, record_len))
        else {
            return pread_record(&*self.file, self.segment, offset, payload_len);
        };
        let tail = bytes.get(at..).unwrap_or(&[]);
        let (h, _) = verify_record(tail, self.segment.0, offset)
            .map_err(|e| corrupted(self.segment, offset, "record fails verification", Some(e)))?;
        let end = RECORD_HEADER_LEN + h.payload_len as usize;
        if tail.len() < end {
            return Err(corrupted(
                self.segment,
                offset,
                "record runs past the buffer",
                None,
            ));
        }
        // The payload shares the buffer copy made for this read instead of being copied again.
        Ok(Record::new(
            h,
            bytes.slice(at + RECORD_HEADER_LEN..at + end),
        ))
    }
}

impl Inner {
    /// Finds the segment holding `seq` of `stream` and the anchor to walk back from: the
    /// nearest indexed record at or after `anchor_seq` (clamped to the segment).
    /// A window of an iteration (`iterating`) reads further past its anchor, for the windows
    /// after it.
    fn locate(
        &self,
        stream: StreamId,
        seq: Seq,
        anchor_seq: u64,
        iterating: bool,
    ) -> Result<Location> {
        let st = self.state.lock();
        Self::check_usable(&st)?;
        let s = st
            .catalog
            .streams
            .get(&stream.0)
            .filter(|s| !s.deleted && !crate::log::is_catalog(stream))
            .ok_or_else(|| unknown(stream))?;
        if seq.0 >= s.next_seq {
            return Err(Error::NoSuchRecord { stream, seq });
        }
        // Records of the active segment are read from the file once written, and from a copy
        // of the bytes in flight and the buffer before that: a read never waits for a write
        // or a sync, and never starts one.
        if let Some(a) = s.active.as_ref().filter(|a| seq.0 >= a.first_seq) {
            let written = st.written.segment() == st.active.id
                && st.written.offset() > u64::from(a.last_offset);
            let anchor = a.anchor(anchor_seq.min(a.last_seq));
            // No read of this window goes below the index entry at or before `seq`: the walk
            // back stops there.
            let floor = a.floor(seq.0);
            let walk_bytes = u64::from(anchor.offset.saturating_sub(floor));
            let hop_read =
                (a.mean_record_bytes() * 3 / 2).clamp(*HOP_READ.start(), *HOP_READ.end());
            let read_ahead = match iterating && anchor.seq != a.last_seq {
                true => ITERATION_READ_AHEAD,
                false => hop_read,
            };
            let pending = (!written)
                .then(|| unwritten_bytes(&st, u64::from(floor)))
                .flatten();
            // What the file holds: everything the writer has written, and everything
            // before the buffer when no write is running.
            let mut written_end = if st.written.segment() == st.active.id {
                st.written.offset()
            } else {
                0
            };
            if !st.writing() {
                written_end = written_end.max(st.buf_offset);
            }
            return Ok(Location::Active {
                reader: ActiveReader {
                    file: st.active.file.clone(),
                    segment: st.active.id,
                    pending,
                    around_anchor: None,
                    // One span holds the walk, or the walk reads at each record it
                    // reaches.
                    read_for_window: walk_bytes > MAX_WALK_SPAN,
                    written_end,
                    read_before: walk_bytes,
                    read_ahead,
                    hops: Vec::new(),
                    hop_read,
                },
                anchor,
            });
        }
        let s = st
            .catalog
            .streams
            .get(&stream.0)
            .ok_or_else(|| unknown(stream))?;
        let i = s.sealed.partition_point(|e| e.first_seq <= seq.0);
        let extent = i.checked_sub(1).and_then(|i| s.sealed.get(i)).copied();
        let found = extent.and_then(|e| {
            let segment = st.sealed.get(&SegmentId(u64::from(e.segment)))?.clone();
            let summary = segment.footer.stream(&segment.bytes, e.summary_index)?;
            (summary.stream_id == stream.0 && summary.last_seq >= seq.0)
                .then_some(Location::Sealed { segment, summary })
        });
        found.ok_or_else(|| {
            corrupted(
                SegmentId(0),
                0,
                format!("stream {stream} seq {seq} is in no segment"),
                None,
            )
        })
    }

    pub(crate) fn read(&self, stream: StreamId, seq: Seq) -> Result<Record> {
        let mut out = Vec::with_capacity(1);
        let mut scratch = WindowScratch::default();
        self.read_window(stream, seq, seq.0, Some(seq.0), &mut out, &mut scratch)?;
        out.pop().ok_or(Error::NoSuchRecord { stream, seq })
    }

    /// Reads the records from `seq` up to the window's anchor (at most up to `last`) into
    /// `out` in seq order. `anchor_seq` is the seq to anchor the walk at or after.
    fn read_window(
        &self,
        stream: StreamId,
        seq: Seq,
        anchor_seq: u64,
        last: Option<u64>,
        out: &mut Vec<Record>,
        scratch: &mut WindowScratch,
    ) -> Result<u64> {
        let offsets = &mut scratch.offsets;
        offsets.clear();
        match self.locate(stream, seq, anchor_seq, scratch.iterating)? {
            Location::Sealed {
                segment: seg,
                summary,
            } => {
                let anchor = seg.anchor(&summary, anchor_seq.min(summary.last_seq));
                // A compressed segment's records are read from the blocks the cursor holds.
                let compressed = seg.blocks.is_some();
                let cursor = &mut scratch.blocks;
                if compressed {
                    cursor.enter(&seg, summary, last.unwrap_or(u64::MAX));
                }
                walk_back(
                    seg.id,
                    stream.0,
                    anchor,
                    seq.0,
                    |o| match compressed {
                        true => cursor.header(&seg, o),
                        false => seg.header_at(o),
                    },
                    |s, o| offsets.push((s, o)),
                )?;
                for &(s, o) in offsets.iter().rev() {
                    if last.is_some_and(|l| s > l) {
                        break;
                    }
                    out.push(match compressed {
                        true => cursor.record(&seg, o)?,
                        false => seg.record_at(o)?,
                    });
                }
                Ok(anchor.seq)
            }
            Location::Active { mut reader, anchor } => {
                if let Some((segment, span)) = scratch.active_span.take() {
                    if segment == reader.segment {
                        reader.around_anchor = Some(span);
                    }
                }
                // The walk reads each header; its payload length sizes the record's read.
                let lengths = &mut scratch.lengths;
                lengths.clear();
                walk_back(
                    reader.segment,
                    stream.0,
                    anchor,
                    seq.0,
                    |o| {
                        let h = reader.header(o)?;
                        lengths.push(h.payload_len);
                        Ok(h)
                    },
                    |s, o| offsets.push((s, o)),
                )?;
                for (&(s, o), &len) in offsets.iter().zip(lengths.iter()).rev() {
                    if last.is_some_and(|l| s > l) {
                        break;
                    }
                    out.push(reader.record(o, len)?);
                }
                if scratch.iterating {
                    scratch.active_span = reader.around_anchor.map(|span| (reader.segment, span));
                }
                Ok(anchor.seq)
            }
        }
    }
}

/// What one window's read needs besides its records, kept by an iteration from window to
/// window so that each does not allocate it again.
#[derive(Debug, Default)]
struct WindowScratch {
    /// The seqs and offsets the walk back found.
    offsets: Vec<(u64, u64)>,
    /// The payload lengths of their headers (the active segment).
    lengths: Vec<u32>,
    /// Whether the windows are those of an iteration (reads then look ahead).
    iterating: bool,
    /// The span of the active segment the last window read, and its segment.
    active_span: Option<(SegmentId, (u64, Bytes))>,
    /// The blocks of the compressed segment the last window read.
    blocks: BlockCursor,
}

fn pread_header(file: &dyn StorageFile, segment: SegmentId, offset: u64) -> Result<RecordHeader> {
    let mut h = [0u8; RECORD_HEADER_LEN];
    file.read_exact_at(&mut h, offset)
        .map_err(io_err("reading", format!("segment {segment}")))?;
    decode_record_header(&h).map_err(|e| corrupted(segment, offset, "bad record header", Some(e)))
}

/// Reads and verifies the record at `offset` whose header gave `payload_len`: one read of
/// exactly its bytes (the checksum covers the length, so a header that changed fails).
fn pread_record(
    file: &dyn StorageFile,
    segment: SegmentId,
    offset: u64,
    payload_len: u32,
) -> Result<Record> {
    let mut buf = vec![0u8; RECORD_HEADER_LEN + payload_len as usize];
    file.read_exact_at(&mut buf, offset)
        .map_err(io_err("reading", format!("segment {segment}")))?;
    let (h, _) = verify_record(&buf, segment.0, offset)
        .map_err(|e| corrupted(segment, offset, "record fails verification", Some(e)))?;
    let payload = Bytes::from(buf).slice(RECORD_HEADER_LEN..);
    Ok(Record::new(h, payload))
}

/// Iterator over a seq range of one stream; see [`crate::Log::iter`]. Reads one index window
/// at a time, so it holds no lock between calls and sees records committed meanwhile if they
/// fall in its range.
#[derive(Debug)]
pub struct RecordIter {
    inner: Arc<Inner>,
    stream: StreamId,
    next: u64,
    to: u64,
    /// The records of the window read last, in reverse seq order (taken from the end).
    ready: Vec<Record>,
    scratch: WindowScratch,
    failed: bool,
}

impl RecordIter {
    pub(crate) fn new(inner: Arc<Inner>, stream: StreamId, from: Seq, to: Seq) -> Self {
        RecordIter {
            inner,
            stream,
            next: from.0,
            to: to.0,
            ready: Vec::new(),
            scratch: WindowScratch {
                iterating: true,
                blocks: BlockCursor::for_iteration(),
                ..WindowScratch::default()
            },
            failed: false,
        }
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if let Some(r) = self.ready.pop() {
            return Some(Ok(r));
        }
        if self.failed || self.next >= self.to {
            return None;
        }
        let last = self.to - 1;
        match self.inner.read_window(
            self.stream,
            Seq(self.next),
            self.next + 1,
            Some(last),
            &mut self.ready,
            &mut self.scratch,
        ) {
            Ok(_) => {
                self.next += self.ready.len() as u64;
                self.ready.reverse();
                self.ready.pop().map(Ok)
            }
            Err(Error::NoSuchRecord { .. }) => {
                self.ready.clear();
                None
            }
            Err(e) => {
                // Records read before the error are not handed out, as before.
                self.ready.clear();
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// A copy of the active segment's bytes that the file may not hold yet (those of a write in
/// flight, then the buffer) from segment offset `from` on, or from the first of them when
/// that is later: the caller reads nothing before `from`. `None` when no such byte is left.
fn unwritten_bytes(st: &State, from: u64) -> Option<(u64, Bytes)> {
    let (at, in_flight) = match &st.in_flight {
        Some((at, bytes)) => (*at, &bytes[..]),
        None => (st.buf_offset, &[][..]),
    };
    let start = from.max(at);
    // The buffer follows the bytes in flight: skip into the one, then the other.
    let skip = usize::try_from(start - at).unwrap_or(usize::MAX);
    let past_in_flight = skip.saturating_sub(in_flight.len());
    let in_flight = in_flight.get(skip..).unwrap_or_default();
    let buf = st.buf.get(past_in_flight..).unwrap_or_default();
    if in_flight.is_empty() && buf.is_empty() {
        return None;
    }
    let mut copy = Vec::with_capacity(in_flight.len() + buf.len());
    copy.extend_from_slice(in_flight);
    copy.extend_from_slice(buf);
    Some((start, Bytes::from(copy)))
}
