//! The masked form of a compressed segment's blocks (codecs 2 and 3): the logical bytes with
//! every field a reader can derive again from the block itself replaced by zeros or by its
//! difference from what the block predicts. spec: segment.md#masked-blocks
//!
//! Checksums are the bytes a compressor cannot shrink: four random bytes per record and per
//! batch. A record's, a batch header's and (when the batch starts in the same block) a batch
//! trailer's checksum are recomputed from the bytes they cover, so they are stored as zeros.
//! A record's `seq` and `prev_offset` are stored XORed with the ones the previous record of
//! its stream in the same block predicts (that seq plus one, that record's offset), so a run
//! of one stream's records stores zeros there too. What is left compresses like the payloads
//! around it.
//!
//! Codec 3 also masks the batch frames: a batch header's `synced_through` is stored XORed with
//! the batch's own offset (a rewritten segment, which every compressed one is, attests each
//! batch's own offset, so this stores zeros), and a header whose trailer lies in the same block
//! stores `batch_len` and `record_count` as zeros, which the reader counts again from the
//! records. Where a session commits an event at a time these fields change with every batch,
//! and they cost about 9% of a compressed segment at level 3.
//!
//! Masking walks the data of a sealed segment batch by batch, so it always knows what each
//! byte is. Unmasking walks one block alone, with no knowledge of what came before it: at
//! each position it tells a trailer (`SLBE` at bytes 4..8, where a record keeps its
//! payload length, which is never that large, and a masked header keeps zeros) from a batch
//! header (`SLB1` at bytes 0..4, where a masked record keeps zeros) from a record. A block
//! always starts at one of these (segment.md#compressed-segments).

use crate::batch::{
    batch_crc, header_crc, padded_len, record_crc, BATCH_HEADER_LEN, BATCH_MAGIC,
    BATCH_TRAILER_LEN, BATCH_TRAILER_MAGIC, B_COUNT_AT, B_HEADER_CRC_AT, B_LEN_AT, B_SYNCED_AT,
    RECORD_HEADER_LEN, R_CRC_AT, R_LEN_AT, R_PREV_AT, R_SEQ_AT, R_STREAM_AT, T_CRC_AT, T_MAGIC_AT,
};
use crate::compressed::{CODEC_ZSTD_MASKED, CODEC_ZSTD_MASKED_FRAMES};
use crate::error::{FormatError, Structure};
use crate::le::{put_u32, put_u64, u32_at, u64_at};

/// What a codec's masking replaces. spec: segment.md#masked-blocks
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Masking {
    /// Codec 2: the checksums, and each record's `seq` and `prev_offset`.
    Records,
    /// Codec 3: as codec 2, and in each batch header `synced_through` (XORed with the batch's
    /// own offset) and, when the batch's trailer lies in the same block, `batch_len` and
    /// `record_count`.
    RecordsAndFrames,
}

impl Masking {
    /// The masking of the directory's `codec`; `None` for a codec that masks nothing.
    pub fn of_codec(codec: u8) -> Option<Masking> {
        match codec {
            CODEC_ZSTD_MASKED => Some(Masking::Records),
            CODEC_ZSTD_MASKED_FRAMES => Some(Masking::RecordsAndFrames),
            _ => None,
        }
    }

    /// The directory's `codec` byte of blocks masked this way.
    pub fn codec(self) -> u8 {
        match self {
            Masking::Records => CODEC_ZSTD_MASKED,
            Masking::RecordsAndFrames => CODEC_ZSTD_MASKED_FRAMES,
        }
    }

    fn frames(self) -> bool {
        self == Masking::RecordsAndFrames
    }
}

/// What the previous record of each stream in the block predicts for the next one.
#[derive(Debug, Default)]
struct Predictions {
    /// (stream, offset of its last record in the segment, that record's seq).
    last: Vec<(u64, u32, u64)>,
}

impl Predictions {
    /// The (seq, prev_offset) the block predicts for the next record of `stream`: its last
    /// record's seq plus one and offset, or zeros for a stream not seen in the block yet (so
    /// XORing with a prediction stores such a record's fields as they are).
    fn predicted(&self, stream: u64) -> (u64, u32) {
        self.last
            .iter()
            .find(|l| l.0 == stream)
            .map_or((0, 0), |l| (l.2.wrapping_add(1), l.1))
    }

    /// Remembers the record at `offset` with `seq` as its stream's last in the block.
    fn remember(&mut self, stream: u64, offset: u32, seq: u64) {
        match self.last.iter_mut().find(|l| l.0 == stream) {
            Some(l) => *l = (stream, offset, seq),
            None => self.last.push((stream, offset, seq)),
        }
    }
}

/// Where masking is among the blocks: the start of the block it is in, and what that block
/// predicts. Offsets are the segment's.
struct BlockCursor<'c> {
    /// Block ends not passed yet.
    cuts: &'c [usize],
    block_start: usize,
    predictions: Predictions,
}

impl BlockCursor<'_> {
    /// Moves to the block holding `offset`, a structure start at or after the last one;
    /// entering a block forgets the predictions of the one before.
    fn enter(&mut self, offset: usize) {
        while let Some((&end, rest)) = self.cuts.split_first() {
            if offset < end {
                break;
            }
            self.block_start = end;
            self.cuts = rest;
            self.predictions.last.clear();
        }
    }
}

/// The masked form of `data`, the bytes `64 .. data_end` of a sealed segment whose batches
/// have verified, cut into blocks that end at the offsets `cuts` (increasing,
/// the last at `data_end`; each at a batch, record or trailer start). Every block of the
/// result unmasks, alone, to the same block of `data`.
pub fn mask_blocks(data: &[u8], cuts: &[usize], masking: Masking) -> Result<Vec<u8>, FormatError> {
    const S: Structure = Structure::Batch;
    // Where `data[0]` lies in the segment.
    let start = crate::header::SEGMENT_HEADER_LEN;
    let mut out = data.to_vec();
    let mut cursor = BlockCursor {
        cuts,
        block_start: start,
        predictions: Predictions::default(),
    };
    let mut p = 0usize;
    while p < data.len() {
        cursor.enter(start + p);
        let header_block = cursor.block_start;
        let batch_len = u32_at(data, p + B_LEN_AT, Structure::BatchHeader)? as usize;
        let count = u32_at(data, p + B_COUNT_AT, Structure::BatchHeader)?;
        if batch_len < BATCH_HEADER_LEN + BATCH_TRAILER_LEN || p + batch_len > data.len() {
            return Err(FormatError::invalid(S, "batch_len", "outside the data"));
        }
        put_u32(&mut out, p + B_HEADER_CRC_AT, 0);
        let mut r = p + BATCH_HEADER_LEN;
        for _ in 0..count {
            cursor.enter(start + r);
            let len = u32_at(data, r + R_LEN_AT, Structure::Record)? as usize;
            let stream = u64_at(data, r + R_STREAM_AT, Structure::Record)?;
            let seq = u64_at(data, r + R_SEQ_AT, Structure::Record)?;
            let prev = u32_at(data, r + R_PREV_AT, Structure::Record)?;
            let (want_seq, want_prev) = cursor.predictions.predicted(stream);
            cursor.predictions.remember(stream, (start + r) as u32, seq);
            put_u32(&mut out, r + R_CRC_AT, 0);
            put_u64(&mut out, r + R_SEQ_AT, seq ^ want_seq);
            put_u32(&mut out, r + R_PREV_AT, prev ^ want_prev);
            r += RECORD_HEADER_LEN + padded_len(len);
        }
        let trailer = p + batch_len - BATCH_TRAILER_LEN;
        if r != trailer {
            return Err(FormatError::invalid(S, "records", "do not fill the batch"));
        }
        cursor.enter(start + trailer);
        let whole = cursor.block_start == header_block;
        if whole {
            put_u32(&mut out, trailer + T_CRC_AT, 0);
        }
        if masking.frames() {
            let synced = u64_at(data, p + B_SYNCED_AT, Structure::BatchHeader)?;
            put_u64(&mut out, p + B_SYNCED_AT, synced ^ (start + p) as u64);
            if whole {
                put_u32(&mut out, p + B_LEN_AT, 0);
                put_u32(&mut out, p + B_COUNT_AT, 0);
            }
        }
        p += batch_len;
    }
    Ok(out)
}

/// A batch whose header lies in the block being unmasked, until its trailer.
struct OpenBatch {
    /// Where its header starts in the block.
    start: usize,
    /// Records met since its header.
    records: u32,
    /// Whether its header was stored without `batch_len` and `record_count` (codec 3), which
    /// its trailer gives back, together with the header's checksum.
    length_masked: bool,
}

/// What unmasking does with the checksums masking stored as zeros.
/// spec: segment.md#reading-a-compressed-block
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Computes them from the bytes they cover: the block's logical bytes exactly, for
    /// `verify`, `dump` and rewrites.
    Restore,
    /// Leaves them zero, for a reader of the records of a block whose stored bytes and
    /// decompressed content were checked as a whole: those checksums would only be derived
    /// from these very bytes. Its records are read with
    /// [`crate::read_record_of_checked_block`].
    LeaveZero,
}

/// Restores, in place, block `block` of segment `segment_id` from its masked form, its
/// checksums as `checksums` says; the block starts at `logical_offset` in the segment. Fails
/// when the bytes are not a masked block: a structure that runs past the block's end, a
/// checksum field that should be zero and is not, or (codec 3) a header stored without its
/// length whose trailer is not in the block.
pub fn unmask_block(
    segment_id: u64,
    logical_offset: u64,
    block: &mut [u8],
    masking: Masking,
    checksums: Checksums,
) -> Result<(), FormatError> {
    let restore = checksums == Checksums::Restore;
    const S: Structure = Structure::Block;
    let not_masked = |what: &str| FormatError::invalid(S, "masked bytes", what.to_owned());
    let no_trailer = "a batch stored without its length has no trailer in the block";
    let mut predictions = Predictions::default();
    let mut batch: Option<OpenBatch> = None;
    let mut p = 0usize;
    while p < block.len() {
        let at = logical_offset + p as u64;
        let is_trailer = block.get(p + T_MAGIC_AT..p + T_MAGIC_AT + 4)
            == Some(&BATCH_TRAILER_MAGIC.to_le_bytes()[..]);
        let is_header = !is_trailer && block.get(p..p + 4) == Some(&BATCH_MAGIC.to_le_bytes()[..]);
        if is_trailer {
            if let Some(open) = batch.take() {
                if u32_at(block, p + T_CRC_AT, S)? != 0 {
                    return Err(not_masked("a batch checksum is not zero"));
                }
                let start = open.start;
                let batch_at = logical_offset + start as u64;
                if open.length_masked {
                    let len = u32::try_from(p + BATCH_TRAILER_LEN - start)
                        .map_err(|_| not_masked("a batch longer than 4 GiB"))?;
                    put_u32(block, start + B_LEN_AT, len);
                    put_u32(block, start + B_COUNT_AT, open.records);
                    if restore {
                        restore_header_crc(block, segment_id, batch_at, start);
                    }
                }
                if restore {
                    let crc = batch_crc(segment_id, batch_at, &block[start..p]);
                    put_u32(block, p + T_CRC_AT, crc);
                }
            }
            p += BATCH_TRAILER_LEN;
        } else if is_header {
            if block.len() < p + BATCH_HEADER_LEN {
                return Err(not_masked("a batch header runs past the block"));
            }
            if u32_at(block, p + B_HEADER_CRC_AT, S)? != 0 {
                return Err(not_masked("a batch header checksum is not zero"));
            }
            if batch.as_ref().is_some_and(|open| open.length_masked) {
                return Err(not_masked(no_trailer));
            }
            let length_masked = masking.frames() && unmask_frame_fields(block, p, at)?;
            if !length_masked && restore {
                restore_header_crc(block, segment_id, at, p);
            }
            batch = Some(OpenBatch {
                start: p,
                records: 0,
                length_masked,
            });
            p += BATCH_HEADER_LEN;
        } else {
            if block.len() < p + RECORD_HEADER_LEN {
                return Err(not_masked("a record header runs past the block"));
            }
            let len = u32_at(block, p + R_LEN_AT, S)? as usize;
            let end = p
                .checked_add(RECORD_HEADER_LEN + padded_len(len))
                .filter(|&e| e <= block.len())
                .ok_or_else(|| not_masked("a record runs past the block"))?;
            if u32_at(block, p + R_CRC_AT, S)? != 0 {
                return Err(not_masked("a record checksum is not zero"));
            }
            let offset = u32::try_from(at).map_err(|_| not_masked("offset past 4 GiB"))?;
            let stream = u64_at(block, p + R_STREAM_AT, S)?;
            let stored_seq = u64_at(block, p + R_SEQ_AT, S)?;
            let stored_prev = u32_at(block, p + R_PREV_AT, S)?;
            let (want_seq, want_prev) = predictions.predicted(stream);
            let (seq, prev) = (stored_seq ^ want_seq, stored_prev ^ want_prev);
            predictions.remember(stream, offset, seq);
            put_u64(block, p + R_SEQ_AT, seq);
            put_u32(block, p + R_PREV_AT, prev);
            if restore {
                let crc = record_crc(segment_id, at, &block[p..p + RECORD_HEADER_LEN + len]);
                put_u32(block, p + R_CRC_AT, crc);
            }
            if let Some(open) = batch.as_mut() {
                open.records = open
                    .records
                    .checked_add(1)
                    .ok_or_else(|| not_masked("more than 2^32 records in a batch"))?;
            }
            p = end;
        }
    }
    if batch.is_some_and(|open| open.length_masked) {
        return Err(not_masked(no_trailer));
    }
    Ok(())
}

/// Puts the checksum of the (whole, restored) batch header at `block[p..]`, which lies at
/// segment offset `at`, in its place.
fn restore_header_crc(block: &mut [u8], segment_id: u64, at: u64, p: usize) {
    let crc = header_crc(segment_id, at, &block[p..p + BATCH_HEADER_LEN]);
    put_u32(block, p + B_HEADER_CRC_AT, crc);
}

/// Restores `synced_through` in the codec 3 batch header at `block[p..]` (segment offset
/// `at`, the whole header in the block), and says whether its `batch_len` and
/// `record_count` were stored as zeros (a real frame is at least 40 bytes long), for its
/// trailer to give back.
fn unmask_frame_fields(block: &mut [u8], p: usize, at: u64) -> Result<bool, FormatError> {
    const S: Structure = Structure::Block;
    let synced = u64_at(block, p + B_SYNCED_AT, S)?;
    put_u64(block, p + B_SYNCED_AT, synced ^ at);
    if u32_at(block, p + B_LEN_AT, S)? != 0 {
        return Ok(false);
    }
    if u32_at(block, p + B_COUNT_AT, S)? != 0 {
        return Err(FormatError::invalid(
            S,
            "masked bytes",
            "a record count is stored without its batch length",
        ));
    }
    Ok(true)
}
