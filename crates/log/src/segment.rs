//! Segment files: naming, the sealed segment (mapped, with its footer), and the batch scan
//! shared by recovery of the active segment, footer rebuilds and `verify`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sessionlog_format::{
    decode_record_header, encode_footer, read_record_of_checked_block, segment_file_name,
    verify_batch_in, verify_record_in, CatalogEntry, CatalogOp, FooterView, IndexEntry,
    RecordHeader, SegmentCrc, StreamSummary, CATALOG_STREAM, KIND_CATALOG_CHECKPOINT,
    KIND_CATALOG_CREATE, KIND_CATALOG_DELETE, KIND_CATALOG_RENAME, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN,
};

use crate::compress::Blocks;
use crate::error::{corrupted, Result};
use crate::ids::SegmentId;
use crate::index::{anchor_for, ActiveStreamIndex, Anchor};
use crate::options::RecoveryMode;
use crate::recovery::{after_fact, decide_tail, here_fact, HereFact, RoleFact, TailDecision};
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
    let mut out = ScanOutcome::default();
    let mut at = SEGMENT_HEADER_LEN;
    // Every checksum of the segment starts from its id: hashed once here, copied per batch
    // and per record.
    let seeded = SegmentCrc::new(id.0);
    // The running seqs of the batch being checked, kept between batches so that checking
    // one does not allocate.
    let mut pending = Vec::new();
    loop {
        let rest = seg.get(at..).unwrap_or(&[]);
        let (here, batch_error) = match verify_batch_in(rest, &seeded, at as u64) {
            Ok(batch) => match check_sequence(&batch, book, &mut pending) {
                Ok(()) => {
                    for r in batch.records() {
                        let payload = batch.payload(&r);
                        book.apply(&r.header, payload)
                            .map_err(|e| corrupted(id, r.offset, e, None))?;
                        note_record(&mut out, &r.header, r.offset, payload, interval);
                    }
                    at = batch.end_offset() as usize;
                    continue;
                }
                Err(why) => (HereFact::OutOfSequence, Some(why)),
            },
            Err(e) => (here_fact(seg, at), Some(e.to_string())),
        };
        let after = after_fact(seg, id.0, at);
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
}

fn check_sequence(
    batch: &sessionlog_format::BatchView<'_>,
    book: &dyn StreamBook,
    pending: &mut Vec<(u64, u64)>,
) -> std::result::Result<(), String> {
    // Records of one stream may repeat within a batch; check them against a running copy.
    pending.clear();
    for r in batch.records() {
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
                .or_else(|| created_in_batch(batch, h.stream_id)),
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

fn created_in_batch(batch: &sessionlog_format::BatchView<'_>, stream: u64) -> Option<u64> {
    batch
        .records()
        .any(|r| {
            r.header.stream_id == CATALOG_STREAM
                && r.header.kind == KIND_CATALOG_CREATE
                && batch.payload(&r).get(..8) == Some(&stream.to_le_bytes()[..])
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
