//! Batch frames and the records inside them. spec: segment.md#batch-frame, segment.md#record
//!
//! A batch is the unit of atomicity: header, records, trailer. The header carries its own
//! checksum (so a damaged length is never trusted), the trailer carries a checksum over the
//! whole frame followed by a fixed magic (so a half-written checksum never looks valid), and
//! every record carries its own checksum (so a point read verifies just the bytes it returns).
//! Every checksum mixes in the segment id and the frame's offset in the segment, so bytes that
//! land in the wrong place never validate.

use crate::checksum::SegmentCrc;
use crate::error::{FormatError, Structure};
use crate::le::{put_u16, put_u32, put_u64, slice_at, u16_at, u32_at, u64_at};

/// Magic that opens a batch: `SLB1` in little-endian byte order.
pub const BATCH_MAGIC: u32 = u32::from_le_bytes(*b"SLB1");
/// Magic that closes a batch: `SLBE`.
pub const BATCH_TRAILER_MAGIC: u32 = u32::from_le_bytes(*b"SLBE");
/// Records and batches start on multiples of this many bytes.
pub const RECORD_ALIGN: usize = 8;
/// Upper bound of a batch frame, header and trailer included.
pub const MAX_BATCH_LEN: usize = u32::MAX as usize & !(RECORD_ALIGN - 1);

// spec: segment.md#batch-header
const B_MAGIC_AT: usize = 0;
pub(crate) const B_HEADER_CRC_AT: usize = B_MAGIC_AT + 4;
pub(crate) const B_LEN_AT: usize = B_HEADER_CRC_AT + 4;
pub(crate) const B_COUNT_AT: usize = B_LEN_AT + 4;
pub(crate) const B_SYNCED_AT: usize = B_COUNT_AT + 4;
const B_RESERVED_AT: usize = B_SYNCED_AT + 8;
/// Bytes in a batch header.
pub const BATCH_HEADER_LEN: usize = B_RESERVED_AT + 8;

// spec: segment.md#batch-trailer
pub(crate) const T_CRC_AT: usize = 0;
pub(crate) const T_MAGIC_AT: usize = T_CRC_AT + 4;
/// Bytes in a batch trailer.
pub const BATCH_TRAILER_LEN: usize = T_MAGIC_AT + 4;

// spec: segment.md#record
pub(crate) const R_CRC_AT: usize = 0;
pub(crate) const R_LEN_AT: usize = R_CRC_AT + 4;
pub(crate) const R_STREAM_AT: usize = R_LEN_AT + 4;
pub(crate) const R_SEQ_AT: usize = R_STREAM_AT + 8;
const R_KIND_AT: usize = R_SEQ_AT + 8;
const R_FLAGS_AT: usize = R_KIND_AT + 1;
const R_RESERVED_AT: usize = R_FLAGS_AT + 1;
pub(crate) const R_PREV_AT: usize = R_RESERVED_AT + 2;
/// Bytes in a record header; the payload follows.
pub const RECORD_HEADER_LEN: usize = R_PREV_AT + 4;

const _: () = assert!(BATCH_HEADER_LEN == 32 && RECORD_HEADER_LEN == 32 && BATCH_TRAILER_LEN == 8);

/// `len` rounded up to [`RECORD_ALIGN`].
pub fn padded_len(len: usize) -> usize {
    (len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Size of the frame a batch of payloads with these lengths encodes to.
pub fn encoded_batch_len(payload_lens: impl IntoIterator<Item = usize>) -> usize {
    BATCH_HEADER_LEN
        + payload_lens
            .into_iter()
            .map(|l| RECORD_HEADER_LEN + padded_len(l))
            .sum::<usize>()
        + BATCH_TRAILER_LEN
}

/// The decoded header of a batch frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Bytes in the whole frame, header and trailer included; a multiple of [`RECORD_ALIGN`].
    pub batch_len: u32,
    /// Records in the frame.
    pub record_count: u32,
    /// Segment offset up to which the writer knew the segment to be durable when it framed
    /// this batch. A valid batch whose `synced_through` lies past a damaged region proves the
    /// damage hit acknowledged data (corruption), not an unsynced tail (a torn write).
    pub synced_through: u64,
}

/// The fixed fields of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// The stream (session) the record belongs to.
    pub stream_id: u64,
    /// The record's position in its stream: 0, 1, 2, … with no gaps.
    pub seq: u64,
    /// Kind tag, opaque to the log below [`crate::FIRST_RESERVED_KIND`].
    pub kind: u8,
    /// Flags, opaque to the log.
    pub flags: u8,
    /// Segment offset of the previous record of the same stream in this segment, 0 for none.
    pub prev_offset: u32,
    /// Payload bytes that follow the header (padding excluded).
    pub payload_len: u32,
}

/// A record located inside a verified batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView {
    /// Segment offset of the record header.
    pub offset: u64,
    /// The record's fixed fields.
    pub header: RecordHeader,
}

impl RecordView {
    /// Segment offset of the first payload byte.
    pub fn payload_offset(&self) -> u64 {
        self.offset + RECORD_HEADER_LEN as u64
    }
}

/// Appends one batch frame to a buffer. Create with [`BatchEncoder::begin`], add records with
/// [`BatchEncoder::push`], then [`BatchEncoder::finish`] (or [`BatchEncoder::abort`]).
#[derive(Debug)]
pub struct BatchEncoder<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
    segment_id: u64,
    batch_offset: u64,
    count: u32,
}

impl<'a> BatchEncoder<'a> {
    /// Starts a batch at the end of `buf`, which will be written at segment offset
    /// `batch_offset` of segment `segment_id`. `batch_offset` must be a multiple of
    /// [`RECORD_ALIGN`].
    pub fn begin(
        buf: &'a mut Vec<u8>,
        segment_id: u64,
        batch_offset: u64,
        synced_through: u64,
    ) -> Self {
        debug_assert_eq!(batch_offset % RECORD_ALIGN as u64, 0);
        let start = buf.len();
        buf.resize(start + BATCH_HEADER_LEN, 0);
        put_u32(&mut buf[start..], B_MAGIC_AT, BATCH_MAGIC);
        put_u64(&mut buf[start..], B_SYNCED_AT, synced_through);
        BatchEncoder {
            buf,
            start,
            segment_id,
            batch_offset,
            count: 0,
        }
    }

    /// The segment offset the next pushed record will get.
    pub fn next_record_offset(&self) -> u64 {
        self.batch_offset + (self.buf.len() - self.start) as u64
    }

    /// Bytes the frame would take if finished now.
    pub fn encoded_len(&self) -> usize {
        self.buf.len() - self.start + BATCH_TRAILER_LEN
    }

    /// Appends one record; returns its segment offset. `header.payload_len` is ignored and
    /// taken from `payload`. The caller bounds payload sizes (they must fit a `u32`).
    pub fn push(&mut self, header: RecordHeader, payload: &[u8]) -> u64 {
        let offset = self.next_record_offset();
        let at = self.buf.len();
        let payload_len =
            u32::try_from(payload.len()).expect("payload length bounded by the caller");
        self.buf.resize(at + RECORD_HEADER_LEN, 0);
        let h = &mut self.buf[at..];
        put_u32(h, R_LEN_AT, payload_len);
        put_u64(h, R_STREAM_AT, header.stream_id);
        put_u64(h, R_SEQ_AT, header.seq);
        h[R_KIND_AT] = header.kind;
        h[R_FLAGS_AT] = header.flags;
        put_u16(h, R_RESERVED_AT, 0);
        put_u32(h, R_PREV_AT, header.prev_offset);
        self.buf.extend_from_slice(payload);
        let crc = record_crc(self.segment_id, offset, &self.buf[at..]);
        put_u32(&mut self.buf[at..], R_CRC_AT, crc);
        self.buf
            .resize(at + RECORD_HEADER_LEN + padded_len(payload.len()), 0);
        self.count += 1;
        offset
    }

    /// Records pushed so far.
    pub fn record_count(&self) -> u32 {
        self.count
    }

    /// Removes the partial frame from the buffer, as if `begin` had not been called.
    pub fn abort(self) {
        self.buf.truncate(self.start);
    }

    /// Writes the header fields and trailer; returns the frame's length in bytes.
    pub fn finish(self) -> usize {
        let len = self.buf.len() - self.start + BATCH_TRAILER_LEN;
        let len32 = u32::try_from(len).expect("batch length bounded by the caller");
        let seg = self.segment_id;
        let off = self.batch_offset;
        let frame = &mut self.buf[self.start..];
        put_u32(frame, B_LEN_AT, len32);
        put_u32(frame, B_COUNT_AT, self.count);
        // The header's and the frame's checksums both start from the segment and offset.
        let crc = SegmentCrc::at(seg, off);
        put_u32(frame, B_HEADER_CRC_AT, header_crc_from(crc.clone(), frame));
        let batch_crc = batch_crc_from(crc, frame);
        self.buf.extend_from_slice(&batch_crc.to_le_bytes());
        self.buf
            .extend_from_slice(&BATCH_TRAILER_MAGIC.to_le_bytes());
        len
    }
}

/// The `record_crc` of the record at `offset` of `segment_id` whose header and payload
/// (padding excluded) are `record`: it covers header bytes 4..32 and the payload.
pub(crate) fn record_crc(segment_id: u64, offset: u64, record: &[u8]) -> u32 {
    record_crc_from(SegmentCrc::at(segment_id, offset), record)
}

/// The `header_crc` of the batch header `header` at `batch_offset` of `segment_id`.
pub(crate) fn header_crc(segment_id: u64, batch_offset: u64, header: &[u8]) -> u32 {
    header_crc_from(SegmentCrc::at(segment_id, batch_offset), header)
}

/// The `batch_crc` of the frame at `batch_offset` of `segment_id` whose bytes before its
/// trailer are `frame`.
pub(crate) fn batch_crc(segment_id: u64, batch_offset: u64, frame: &[u8]) -> u32 {
    batch_crc_from(SegmentCrc::at(segment_id, batch_offset), frame)
}

/// A copy of the seeded `segment` checksum state, fed the offset of the structure it covers.
fn at_offset(segment: &SegmentCrc, offset: u64) -> SegmentCrc {
    let mut crc = segment.clone();
    crc.update(&offset.to_le_bytes());
    crc
}

fn header_crc_in(segment: &SegmentCrc, batch_offset: u64, header: &[u8]) -> u32 {
    header_crc_from(at_offset(segment, batch_offset), header)
}

/// The record checksum, from a checksum already fed the segment and the record's offset:
/// header bytes 4..32 and the payload (`record` holds both, padding excluded).
fn record_crc_from(mut at: SegmentCrc, record: &[u8]) -> u32 {
    at.update(record.get(R_LEN_AT..).unwrap_or_default());
    at.finish()
}

/// The batch checksum, from a checksum already fed the segment and the batch offset: the
/// frame's bytes before its trailer.
fn batch_crc_from(mut at: SegmentCrc, frame: &[u8]) -> u32 {
    at.update(frame);
    at.finish()
}

/// The header checksum, from a checksum already fed the segment and the batch offset: the
/// header bytes it covers are fed here only.
fn header_crc_from(mut at: SegmentCrc, header: &[u8]) -> u32 {
    at.update(&header[B_LEN_AT..BATCH_HEADER_LEN]);
    at.finish()
}

/// Decodes and verifies the header of the batch that starts at `buf[0]`, which lives at
/// `batch_offset` in segment `segment_id`. Does not look past the header.
pub fn decode_batch_header(
    buf: &[u8],
    segment_id: u64,
    batch_offset: u64,
) -> Result<BatchHeader, FormatError> {
    decode_batch_header_in(buf, &SegmentCrc::new(segment_id), batch_offset)
}

/// [`decode_batch_header`] with the checksum state of the batch's segment already seeded
/// ([`SegmentCrc::new`]), so that a scan of many batches seeds it once.
pub fn decode_batch_header_in(
    buf: &[u8],
    segment: &SegmentCrc,
    batch_offset: u64,
) -> Result<BatchHeader, FormatError> {
    const S: Structure = Structure::BatchHeader;
    let head = slice_at(buf, 0, BATCH_HEADER_LEN, S)?;
    let magic = u32_at(head, B_MAGIC_AT, S)?;
    if magic != BATCH_MAGIC {
        if head.iter().all(|&b| b == 0) {
            return Err(FormatError::Zeroed { structure: S });
        }
        return Err(FormatError::BadMagic {
            structure: S,
            found: u64::from(magic),
        });
    }
    let stored = u32_at(head, B_HEADER_CRC_AT, S)?;
    let computed = header_crc_in(segment, batch_offset, head);
    if stored != computed {
        return Err(FormatError::ChecksumMismatch {
            structure: S,
            stored,
            computed,
        });
    }
    let batch_len = u32_at(head, B_LEN_AT, S)?;
    let record_count = u32_at(head, B_COUNT_AT, S)?;
    let synced_through = u64_at(head, B_SYNCED_AT, S)?;
    if u64_at(head, B_RESERVED_AT, S)? != 0 {
        return Err(FormatError::invalid(S, "reserved", "must be zero"));
    }
    let len = batch_len as usize;
    if len % RECORD_ALIGN != 0 || len < BATCH_HEADER_LEN + BATCH_TRAILER_LEN {
        return Err(FormatError::invalid(
            S,
            "batch_len",
            format!("{len} is not a valid frame length"),
        ));
    }
    let min_len = (record_count as usize)
        .checked_mul(RECORD_HEADER_LEN)
        .and_then(|r| r.checked_add(BATCH_HEADER_LEN + BATCH_TRAILER_LEN));
    if min_len.is_none_or(|m| m > len) {
        return Err(FormatError::invalid(
            S,
            "record_count",
            format!("{record_count} records cannot fit {len} bytes"),
        ));
    }
    if synced_through > batch_offset {
        return Err(FormatError::invalid(
            S,
            "synced_through",
            format!("{synced_through} lies past the batch at {batch_offset}"),
        ));
    }
    Ok(BatchHeader {
        batch_len,
        record_count,
        synced_through,
    })
}

/// A batch frame whose every checksum verified.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    /// The decoded header.
    pub header: BatchHeader,
    frame: &'a [u8],
    batch_offset: u64,
}

impl<'a> BatchView<'a> {
    /// The frame's bytes, header to trailer.
    pub fn bytes(&self) -> &'a [u8] {
        self.frame
    }

    /// Segment offset of the batch header.
    pub fn offset(&self) -> u64 {
        self.batch_offset
    }

    /// Segment offset just past the trailer, where the next batch starts.
    pub fn end_offset(&self) -> u64 {
        self.batch_offset + self.frame.len() as u64
    }

    /// The records, in order.
    pub fn records(&self) -> BatchRecords<'a> {
        BatchRecords {
            frame: self.frame,
            at: BATCH_HEADER_LEN,
            end: self.frame.len() - BATCH_TRAILER_LEN,
            batch_offset: self.batch_offset,
        }
    }

    /// The payload of a record of this batch.
    pub fn payload(&self, record: &RecordView) -> &'a [u8] {
        let at = (record.payload_offset() - self.batch_offset) as usize;
        &self.frame[at..at + record.header.payload_len as usize]
    }
}

/// Iterator over the records of a verified batch.
#[derive(Debug, Clone)]
pub struct BatchRecords<'a> {
    frame: &'a [u8],
    at: usize,
    end: usize,
    batch_offset: u64,
}

impl Iterator for BatchRecords<'_> {
    type Item = RecordView;

    fn next(&mut self) -> Option<RecordView> {
        if self.at >= self.end {
            return None;
        }
        // Verified by `verify_batch`, so decoding cannot fail here.
        let header = decode_record_header(&self.frame[self.at..]).ok()?;
        let view = RecordView {
            offset: self.batch_offset + self.at as u64,
            header,
        };
        self.at += RECORD_HEADER_LEN + padded_len(header.payload_len as usize);
        Some(view)
    }
}

/// Verifies the whole batch that starts at `buf[0]` (header, every record, padding, trailer).
/// `buf` may extend past the batch.
pub fn verify_batch(
    buf: &[u8],
    segment_id: u64,
    batch_offset: u64,
) -> Result<BatchView<'_>, FormatError> {
    verify_batch_in(buf, &SegmentCrc::new(segment_id), batch_offset)
}

/// [`verify_batch`] with the checksum state of the batch's segment already seeded
/// ([`SegmentCrc::new`]): the header, the frame and every record are still checksummed,
/// each from a copy of that state instead of hashing the segment id again.
pub fn verify_batch_in<'a>(
    buf: &'a [u8],
    segment: &SegmentCrc,
    batch_offset: u64,
) -> Result<BatchView<'a>, FormatError> {
    let (header, frame) = batch_frame(buf, segment, batch_offset)?;
    let len = frame.len();
    let trailer = &frame[len - BATCH_TRAILER_LEN..];
    let stored = u32_at(trailer, T_CRC_AT, Structure::Batch)?;
    let computed = batch_crc_from(
        at_offset(segment, batch_offset),
        &frame[..len - BATCH_TRAILER_LEN],
    );
    if stored != computed {
        return Err(FormatError::ChecksumMismatch {
            structure: Structure::Batch,
            stored,
            computed,
        });
    }
    let end = len - BATCH_TRAILER_LEN;
    let mut at = BATCH_HEADER_LEN;
    let mut count = 0u32;
    while at < end {
        let (h, _) = verify_record_in(&frame[at..end], segment, batch_offset + at as u64)?;
        let padded = padded_len(h.payload_len as usize);
        let pad = slice_at(
            frame,
            at + RECORD_HEADER_LEN + h.payload_len as usize,
            padded - h.payload_len as usize,
            Structure::Record,
        )?;
        if pad.iter().any(|&b| b != 0) {
            return Err(FormatError::invalid(
                Structure::Record,
                "padding",
                "must be zero",
            ));
        }
        at += RECORD_HEADER_LEN + padded;
        count += 1;
    }
    if at != end || count != header.record_count {
        return Err(count_mismatch(&header, count));
    }
    Ok(BatchView {
        header,
        frame,
        batch_offset,
    })
}

/// The verified header of the batch at `buf[0]` and its frame: all `batch_len` bytes, ending
/// in the trailer magic. Neither the frame's checksum nor its records are checked here.
fn batch_frame<'a>(
    buf: &'a [u8],
    segment: &SegmentCrc,
    batch_offset: u64,
) -> Result<(BatchHeader, &'a [u8]), FormatError> {
    let header = decode_batch_header_in(buf, segment, batch_offset)?;
    let len = header.batch_len as usize;
    let frame = slice_at(buf, 0, len, Structure::Batch)?;
    let magic = u32_at(
        &frame[len - BATCH_TRAILER_LEN..],
        T_MAGIC_AT,
        Structure::Batch,
    )?;
    if magic != BATCH_TRAILER_MAGIC {
        return Err(FormatError::BadMagic {
            structure: Structure::Batch,
            found: u64::from(magic),
        });
    }
    Ok((header, frame))
}

/// The error of a frame holding `count` records where its header says otherwise.
fn count_mismatch(header: &BatchHeader, count: u32) -> FormatError {
    FormatError::invalid(
        Structure::Batch,
        "record_count",
        format!(
            "header says {} records, frame holds {count}",
            header.record_count
        ),
    )
}

/// Frames the batch that starts at `buf[0]` without checksumming its records or its frame:
/// the header is verified (its own checksum and fields), all `batch_len` bytes must be present
/// and end in the trailer magic, and the records' headers must frame the space between header
/// and trailer exactly, `record_count` of them (each header's `reserved` zero). No payload,
/// padding, `record_crc` or `batch_crc` is read. For a reader that uses only a few records of
/// the batch and verifies each of those with [`FramedBatch::verify_record`] (a segment rewrite
/// copying the live tenth of a segment); everything else reads through [`verify_batch_in`].
pub fn frame_batch_in<'a>(
    buf: &'a [u8],
    segment: &SegmentCrc,
    batch_offset: u64,
) -> Result<FramedBatch<'a>, FormatError> {
    let (header, frame) = batch_frame(buf, segment, batch_offset)?;
    let end = frame.len() - BATCH_TRAILER_LEN;
    let mut at = BATCH_HEADER_LEN;
    let mut count = 0u32;
    while at < end {
        let h = decode_record_header(&frame[at..end])?;
        let record_len = RECORD_HEADER_LEN + padded_len(h.payload_len as usize);
        if record_len > end - at {
            return Err(FormatError::invalid(
                Structure::Record,
                "payload_len",
                "the record extends into the batch trailer",
            ));
        }
        at += record_len;
        count += 1;
    }
    if count != header.record_count {
        return Err(count_mismatch(&header, count));
    }
    Ok(FramedBatch {
        view: BatchView {
            header,
            frame,
            batch_offset,
        },
        segment: segment.clone(),
    })
}

/// A batch frame whose header and framing verified, but whose records are verified one by one
/// as they are used ([`frame_batch_in`]).
#[derive(Debug, Clone)]
pub struct FramedBatch<'a> {
    view: BatchView<'a>,
    segment: SegmentCrc,
}

impl<'a> FramedBatch<'a> {
    /// The decoded header.
    pub fn header(&self) -> BatchHeader {
        self.view.header
    }

    /// Segment offset just past the trailer, where the next batch starts.
    pub fn end_offset(&self) -> u64 {
        self.view.end_offset()
    }

    /// The records, in order, their checksums not checked.
    pub fn records(&self) -> BatchRecords<'a> {
        self.view.records()
    }

    /// Verifies one record of this batch as [`verify_record_in`] does and returns its payload.
    pub fn verify_record(&self, record: &RecordView) -> Result<&'a [u8], FormatError> {
        let at = (record.offset - self.view.batch_offset) as usize;
        verify_record_in(&self.view.frame[at..], &self.segment, record.offset).map(|(_, p)| p)
    }
}

/// Decodes a record header without verifying its checksum.
pub fn decode_record_header(buf: &[u8]) -> Result<RecordHeader, FormatError> {
    const S: Structure = Structure::Record;
    let h = slice_at(buf, 0, RECORD_HEADER_LEN, S)?;
    if u16_at(h, R_RESERVED_AT, S)? != 0 {
        return Err(FormatError::invalid(S, "reserved", "must be zero"));
    }
    Ok(RecordHeader {
        payload_len: u32_at(h, R_LEN_AT, S)?,
        stream_id: u64_at(h, R_STREAM_AT, S)?,
        seq: u64_at(h, R_SEQ_AT, S)?,
        kind: h[R_KIND_AT],
        flags: h[R_FLAGS_AT],
        prev_offset: u32_at(h, R_PREV_AT, S)?,
    })
}

/// Verifies the record at `buf[0]`, which lives at `record_offset` in segment `segment_id`;
/// returns its header and payload.
pub fn verify_record(
    buf: &[u8],
    segment_id: u64,
    record_offset: u64,
) -> Result<(RecordHeader, &[u8]), FormatError> {
    verify_record_in(buf, &SegmentCrc::new(segment_id), record_offset)
}

/// [`verify_record`] with the checksum state of the record's segment already seeded
/// ([`SegmentCrc::new`]).
pub fn verify_record_in<'a>(
    buf: &'a [u8],
    segment: &SegmentCrc,
    record_offset: u64,
) -> Result<(RecordHeader, &'a [u8]), FormatError> {
    read_record(buf, record_offset, |stored, record| {
        let computed = record_crc_from(at_offset(segment, record_offset), record);
        if stored != computed {
            return Err(FormatError::ChecksumMismatch {
                structure: Structure::Record,
                stored,
                computed,
            });
        }
        Ok(())
    })
}

/// The record at `buf[0]`, which lives at `record_offset` in its segment, in a block
/// unmasked with [`crate::Checksums::LeaveZero`] after its stored bytes and its decompressed
/// content verified as a whole: the structure is checked as [`verify_record_in`] checks
/// it, and the checksum field must hold the zero that masking left there (a block with its
/// checksums restored is read with [`verify_record_in`]). spec:
/// segment.md#reading-a-compressed-block
pub fn read_record_of_checked_block(
    buf: &[u8],
    record_offset: u64,
) -> Result<(RecordHeader, &[u8]), FormatError> {
    read_record(buf, record_offset, |stored, _| match stored {
        0 => Ok(()),
        _ => Err(FormatError::invalid(
            Structure::Record,
            "crc",
            "a record of a checked block keeps the zero masking left",
        )),
    })
}

/// The record at `buf[0]` (at `record_offset` in its segment): its header decoded, the
/// record whole in `buf`, `check_crc` content with its stored checksum and its bytes, and
/// its `prev_offset`, when it has one, pointing at an earlier record.
fn read_record(
    buf: &[u8],
    record_offset: u64,
    check_crc: impl FnOnce(u32, &[u8]) -> Result<(), FormatError>,
) -> Result<(RecordHeader, &[u8]), FormatError> {
    const S: Structure = Structure::Record;
    let header = decode_record_header(buf)?;
    let record = slice_at(buf, 0, RECORD_HEADER_LEN + header.payload_len as usize, S)?;
    check_crc(u32_at(buf, R_CRC_AT, S)?, record)?;
    if header.prev_offset != 0
        && u64::from(header.prev_offset) + RECORD_HEADER_LEN as u64 > record_offset
    {
        return Err(FormatError::invalid(
            S,
            "prev_offset",
            "must point at an earlier record",
        ));
    }
    Ok((header, &record[RECORD_HEADER_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(stream_id: u64, seq: u64) -> RecordHeader {
        RecordHeader {
            stream_id,
            seq,
            kind: 3,
            flags: 1,
            prev_offset: 0,
            payload_len: 0,
        }
    }

    fn encode(seg: u64, off: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut enc = BatchEncoder::begin(&mut buf, seg, off, 0);
        for (i, p) in payloads.iter().enumerate() {
            enc.push(rec(9, i as u64), p);
        }
        let len = enc.finish();
        assert_eq!(len, buf.len());
        assert_eq!(len, encoded_batch_len(payloads.iter().map(|p| p.len())));
        buf
    }

    #[test]
    fn batch_round_trips_with_payloads() {
        let payloads: [&[u8]; 3] = [b"", b"hello", b"0123456789abcdef!"];
        let buf = encode(5, 64, &payloads);
        let view = verify_batch(&buf, 5, 64).expect("valid");
        assert_eq!(view.header.record_count, 3);
        let got: Vec<&[u8]> = view.records().map(|r| view.payload(&r)).collect();
        assert_eq!(got, payloads);
        assert_eq!(view.end_offset(), 64 + buf.len() as u64);
    }

    #[test]
    fn a_seeded_segment_checksum_verifies_as_the_segment_id_does() {
        let payloads: [&[u8]; 2] = [b"one", b"two!"];
        let buf = encode(5, 64, &payloads);
        let seeded = SegmentCrc::new(5);
        let view = verify_batch_in(&buf, &seeded, 64).expect("valid");
        assert_eq!(
            view.bytes(),
            verify_batch(&buf, 5, 64).expect("valid").bytes()
        );
        // The seed is copied, not consumed: it verifies the batch again, and no other.
        assert!(verify_batch_in(&buf, &seeded, 64).is_ok());
        assert!(verify_batch_in(&buf, &SegmentCrc::new(6), 64).is_err());
        assert!(verify_batch_in(&buf, &seeded, 72).is_err());
        let mut flipped = buf.clone();
        let last = BATCH_HEADER_LEN + RECORD_HEADER_LEN;
        flipped[last] ^= 1;
        assert!(verify_batch_in(&flipped, &seeded, 64).is_err());
        let first = view.records().next().expect("a record");
        let at = (first.offset - 64) as usize;
        assert!(verify_record_in(&buf[at..], &seeded, first.offset).is_ok());
        assert!(verify_record_in(&buf[at..], &SegmentCrc::new(6), first.offset).is_err());
    }

    #[test]
    fn a_batch_moved_to_another_offset_or_segment_does_not_verify() {
        let buf = encode(5, 64, &[b"x"]);
        assert!(verify_batch(&buf, 5, 72).is_err());
        assert!(verify_batch(&buf, 6, 64).is_err());
    }

    #[test]
    fn every_single_bit_flip_in_a_batch_is_detected() {
        let good = encode(1, 64, &[b"abc", b"defghij"]);
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    verify_batch(&bad, 1, 64).is_err(),
                    "flip at {byte}:{bit} accepted"
                );
            }
        }
    }

    #[test]
    fn a_torn_batch_does_not_verify_at_any_length() {
        let good = encode(1, 64, &[b"abc", b"defghij"]);
        for cut in 0..good.len() {
            assert!(
                verify_batch(&good[..cut], 1, 64).is_err(),
                "cut at {cut} accepted"
            );
        }
    }

    #[test]
    fn aborted_batch_leaves_the_buffer_unchanged() {
        let mut buf = vec![1, 2, 3];
        let mut enc = BatchEncoder::begin(&mut buf, 1, 64, 0);
        enc.push(rec(1, 0), b"zzz");
        enc.abort();
        assert_eq!(buf, vec![1, 2, 3]);
    }

    #[test]
    fn framing_a_batch_reads_record_headers_only_and_verifies_records_on_demand() {
        let payloads: [&[u8]; 3] = [b"first", b"second payload", b"third"];
        let mut buf = encode(5, 64, &payloads);
        // A bit of the second payload: the frame no longer verifies, but still frames.
        buf[32 + 32 + 8 + 32 + 3] ^= 0x10;
        assert!(verify_batch(&buf, 5, 64).is_err());
        let framed = frame_batch_in(&buf, &SegmentCrc::new(5), 64).expect("frames");
        assert_eq!(framed.end_offset(), 64 + buf.len() as u64);
        let records: Vec<RecordView> = framed.records().collect();
        assert_eq!(records.len(), 3);
        assert_eq!(framed.verify_record(&records[0]).expect("intact"), b"first");
        assert_eq!(framed.verify_record(&records[2]).expect("intact"), b"third");
        assert!(matches!(
            framed.verify_record(&records[1]),
            Err(FormatError::ChecksumMismatch { .. })
        ));
        // In another segment or at another offset nothing verifies.
        let elsewhere = frame_batch_in(&buf, &SegmentCrc::new(6), 64);
        assert!(elsewhere.is_err(), "the header checksum is keyed");
    }

    #[test]
    fn framing_a_batch_rejects_records_that_do_not_fill_it() {
        let payloads: [&[u8]; 2] = [b"first", b"second"];
        let good = encode(5, 64, &payloads);
        // The first record's length grown by 8: the records overrun the frame by 8.
        let mut longer = good.clone();
        longer[32 + 4] += 8;
        assert!(frame_batch_in(&longer, &SegmentCrc::new(5), 64).is_err());
        // Shrunk to 0: the walk lands inside the first payload and misreads it as a header.
        let mut shorter = good.clone();
        shorter[32 + 4] -= 5;
        assert!(frame_batch_in(&shorter, &SegmentCrc::new(5), 64).is_err());
        // A missing trailer magic.
        let mut no_trailer = good;
        let end = no_trailer.len();
        no_trailer[end - 1] ^= 0xFF;
        assert!(frame_batch_in(&no_trailer, &SegmentCrc::new(5), 64).is_err());
    }
}
