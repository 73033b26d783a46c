//! The layout of a compressed sealed segment (format version 2): where its blocks are, the
//! block directory that lists them, and the version-1 footer of its logical image at the end.
//! spec: segment.md#compressed-segments
//!
//! This module knows the bytes around the blocks, not the codec: the log compresses and
//! decompresses (and `mask_blocks` masks). Everything here is checked without
//! decompressing anything.

use crate::checksum::SegmentCrc;
use crate::error::{FormatError, Structure};
use crate::footer::{FooterView, FOOTER_TRAILER_LEN};
use crate::header::SEGMENT_HEADER_LEN;
use crate::le::{put_u32, slice_at, u32_at};

/// The format version of a compressed segment's header. spec: segment.md#segment-header
pub const FORMAT_VERSION_COMPRESSED: u32 = 2;
/// Magic that opens the block directory tail: `SLZD`.
pub const BLOCK_DIRECTORY_MAGIC: u32 = u32::from_le_bytes(*b"SLZD");
/// Codec 1: each block is one zstd frame of its logical bytes.
pub const CODEC_ZSTD: u8 = 1;
/// Codec 2: each block is one zstd frame of its masked bytes (segment.md#masked-blocks),
/// compressed with the segment's dictionary when it has one.
pub const CODEC_ZSTD_MASKED: u8 = 2;
/// Codec 3: as codec 2, with the batch frames' fields a block can derive masked too
/// (segment.md#masked-blocks). What the writer writes.
pub const CODEC_ZSTD_MASKED_FRAMES: u8 = 3;
/// The longest dictionary the directory tail can describe.
pub const MAX_DICTIONARY_LEN: usize = (1 << 24) - 1;

// spec: segment.md#block-directory-entry
const E_LOGICAL_OFFSET_AT: usize = 0;
const E_LOGICAL_LEN_AT: usize = E_LOGICAL_OFFSET_AT + 4;
const E_STORED_OFFSET_AT: usize = E_LOGICAL_LEN_AT + 4;
const E_STORED_LEN_AT: usize = E_STORED_OFFSET_AT + 4;
const E_CRC_AT: usize = E_STORED_LEN_AT + 4;
const E_RESERVED_AT: usize = E_CRC_AT + 4;
/// Bytes in one block directory entry.
pub const BLOCK_ENTRY_LEN: usize = E_RESERVED_AT + 4;

// spec: segment.md#block-directory-tail
const D_MAGIC_AT: usize = 0;
const D_CRC_AT: usize = D_MAGIC_AT + 4;
const D_COUNT_AT: usize = D_CRC_AT + 4;
const D_CODEC_AT: usize = D_COUNT_AT + 4;
const D_DICTIONARY_LEN_AT: usize = D_CODEC_AT + 1;
/// Bytes in the block directory tail.
pub const BLOCK_DIRECTORY_TAIL_LEN: usize = D_DICTIONARY_LEN_AT + 3;

const _: () = assert!(BLOCK_ENTRY_LEN == 24 && BLOCK_DIRECTORY_TAIL_LEN == 16);

/// One block of a compressed segment: a run of whole batches of the logical image, stored as
/// one compressed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// Where the block's bytes start in the logical image.
    pub logical_offset: u32,
    /// Bytes the block decompresses to.
    pub logical_len: u32,
    /// Where the stored frame starts in the file.
    pub stored_offset: u32,
    /// Bytes of the stored frame, padding excluded.
    pub stored_len: u32,
    /// Segment checksum of `le64(stored_offset)` and the stored bytes.
    pub block_crc: u32,
}

impl BlockEntry {
    /// Logical offset just past the block.
    pub fn logical_end(&self) -> u64 {
        u64::from(self.logical_offset) + u64::from(self.logical_len)
    }
}

/// The checksum a block entry holds for `stored` bytes at `stored_offset` of `segment_id`.
pub fn block_crc(segment_id: u64, stored_offset: u64, stored: &[u8]) -> u32 {
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(&stored_offset.to_le_bytes());
    crc.update(stored);
    crc.finish()
}

/// Appends the block directory to `buf`, right after the last block's padding: for codecs 2
/// and 3 the dictionary (possibly empty) and its padding, then the entries and the tail.
/// Codec 1 has no dictionary.
pub fn encode_block_directory(
    buf: &mut Vec<u8>,
    segment_id: u64,
    blocks: &[BlockEntry],
    codec: u8,
    dictionary: &[u8],
) {
    assert!(
        dictionary.len() <= MAX_DICTIONARY_LEN && (codec != CODEC_ZSTD || dictionary.is_empty()),
        "no dictionary with codec 1, and at most 16 MiB"
    );
    buf.extend_from_slice(dictionary);
    buf.resize(
        buf.len() - dictionary.len() + crate::padded_len(dictionary.len()),
        0,
    );
    let start = buf.len();
    for b in blocks {
        let mut e = [0u8; BLOCK_ENTRY_LEN];
        put_u32(&mut e, E_LOGICAL_OFFSET_AT, b.logical_offset);
        put_u32(&mut e, E_LOGICAL_LEN_AT, b.logical_len);
        put_u32(&mut e, E_STORED_OFFSET_AT, b.stored_offset);
        put_u32(&mut e, E_STORED_LEN_AT, b.stored_len);
        put_u32(&mut e, E_CRC_AT, b.block_crc);
        buf.extend_from_slice(&e);
    }
    let mut tail = [0u8; BLOCK_DIRECTORY_TAIL_LEN];
    put_u32(&mut tail, D_MAGIC_AT, BLOCK_DIRECTORY_MAGIC);
    put_u32(&mut tail, D_COUNT_AT, blocks.len() as u32);
    tail[D_CODEC_AT] = codec;
    tail[D_DICTIONARY_LEN_AT..].copy_from_slice(&(dictionary.len() as u32).to_le_bytes()[..3]);
    let crc = directory_crc(segment_id, dictionary, &buf[start..], &tail);
    put_u32(&mut tail, D_CRC_AT, crc);
    buf.extend_from_slice(&tail);
}

fn directory_crc(segment_id: u64, dictionary: &[u8], entries: &[u8], tail: &[u8]) -> u32 {
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(dictionary);
    crc.update(entries);
    crc.update(tail.get(D_COUNT_AT..).unwrap_or_default());
    crc.finish()
}

/// The verified layout of a compressed segment file: its footer (positions in the file) and
/// its blocks. Nothing is decompressed; each block's checksum is checked when it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedLayout {
    /// The footer of the logical image, located at the end of the file.
    pub footer: FooterView,
    /// The blocks, in logical order, covering `64 .. footer.data_end` exactly.
    pub blocks: Vec<BlockEntry>,
    /// How the blocks are stored: [`CODEC_ZSTD`], [`CODEC_ZSTD_MASKED`] or
    /// [`CODEC_ZSTD_MASKED_FRAMES`].
    pub codec: u8,
    /// Where the dictionary lies in the file (empty: none).
    pub dictionary: std::ops::Range<usize>,
}

impl CompressedLayout {
    /// Verifies the footer and the block directory of the compressed segment whose complete
    /// file is `file`. The header is the caller's to check.
    pub fn decode(file: &[u8], segment_id: u64) -> Result<CompressedLayout, FormatError> {
        const S: Structure = Structure::BlockDirectory;
        let footer = FooterView::decode_at_end(file, segment_id)?;
        let footer_at = file
            .len()
            .checked_sub(FOOTER_TRAILER_LEN)
            .and_then(|t| t.checked_sub(footer.footer_len()))
            .ok_or(FormatError::invalid(
                S,
                "footer_len",
                "longer than the file",
            ))?;
        let tail_at =
            footer_at
                .checked_sub(BLOCK_DIRECTORY_TAIL_LEN)
                .ok_or(FormatError::Truncated {
                    structure: S,
                    needed: BLOCK_DIRECTORY_TAIL_LEN,
                    available: footer_at,
                })?;
        let tail = slice_at(file, tail_at, BLOCK_DIRECTORY_TAIL_LEN, S)?;
        let magic = u32_at(tail, D_MAGIC_AT, S)?;
        if magic != BLOCK_DIRECTORY_MAGIC {
            return Err(FormatError::BadMagic {
                structure: S,
                found: u64::from(magic),
            });
        }
        let count = u32_at(tail, D_COUNT_AT, S)? as usize;
        let entries_len = count
            .checked_mul(BLOCK_ENTRY_LEN)
            .ok_or(FormatError::invalid(S, "block_count", "too large"))?;
        let dir_at = tail_at
            .checked_sub(entries_len)
            .ok_or(FormatError::invalid(
                S,
                "block_count",
                "more entries than fit",
            ))?;
        let entries = slice_at(file, dir_at, entries_len, S)?;
        let codec = tail[D_CODEC_AT];
        let mut dictionary_len = [0u8; 4];
        dictionary_len[..3].copy_from_slice(&tail[D_DICTIONARY_LEN_AT..]);
        let dictionary_len = u32::from_le_bytes(dictionary_len) as usize;
        let dictionary_at = dir_at
            .checked_sub(crate::padded_len(dictionary_len))
            .filter(|&at| at >= crate::header::SEGMENT_HEADER_LEN)
            .ok_or(FormatError::invalid(
                S,
                "dictionary_len",
                "longer than the space before the entries",
            ))?;
        let dictionary = dictionary_at..dictionary_at + dictionary_len;
        let stored = u32_at(tail, D_CRC_AT, S)?;
        let computed = directory_crc(segment_id, &file[dictionary.clone()], entries, tail);
        if stored != computed {
            return Err(FormatError::ChecksumMismatch {
                structure: S,
                stored,
                computed,
            });
        }
        match codec {
            CODEC_ZSTD if dictionary_len != 0 => {
                return Err(FormatError::invalid(
                    S,
                    "dictionary_len",
                    "codec 1 has no dictionary",
                ))
            }
            CODEC_ZSTD | CODEC_ZSTD_MASKED | CODEC_ZSTD_MASKED_FRAMES => {}
            other => {
                return Err(FormatError::invalid(
                    S,
                    "codec",
                    format!("unknown codec {other}"),
                ))
            }
        }
        if file[dictionary.end..dir_at].iter().any(|&b| b != 0) {
            return Err(FormatError::invalid(S, "dictionary", "padding is not zero"));
        }
        let blocks = entries
            .chunks_exact(BLOCK_ENTRY_LEN)
            .map(decode_entry)
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&blocks, footer.data_end, dictionary_at)?;
        Ok(CompressedLayout {
            footer,
            blocks,
            codec,
            dictionary,
        })
    }

    /// The index of the block whose logical range holds `logical_offset`.
    pub fn block_holding(&self, logical_offset: u64) -> Option<usize> {
        let i = self
            .blocks
            .partition_point(|b| u64::from(b.logical_offset) <= logical_offset);
        let i = i.checked_sub(1)?;
        (logical_offset < self.blocks.get(i)?.logical_end()).then_some(i)
    }

    /// The stored bytes of block `i`, checked against its checksum.
    pub fn stored<'a>(
        &self,
        file: &'a [u8],
        segment_id: u64,
        i: usize,
    ) -> Result<&'a [u8], FormatError> {
        const S: Structure = Structure::Block;
        let b = self
            .blocks
            .get(i)
            .ok_or(FormatError::invalid(S, "index", "no such block"))?;
        let stored = slice_at(file, b.stored_offset as usize, b.stored_len as usize, S)?;
        let computed = block_crc(segment_id, u64::from(b.stored_offset), stored);
        if computed != b.block_crc {
            return Err(FormatError::ChecksumMismatch {
                structure: S,
                stored: b.block_crc,
                computed,
            });
        }
        Ok(stored)
    }
}

fn decode_entry(e: &[u8]) -> Result<BlockEntry, FormatError> {
    const S: Structure = Structure::BlockDirectory;
    if u32_at(e, E_RESERVED_AT, S)? != 0 {
        return Err(FormatError::invalid(S, "reserved", "must be zero"));
    }
    Ok(BlockEntry {
        logical_offset: u32_at(e, E_LOGICAL_OFFSET_AT, S)?,
        logical_len: u32_at(e, E_LOGICAL_LEN_AT, S)?,
        stored_offset: u32_at(e, E_STORED_OFFSET_AT, S)?,
        stored_len: u32_at(e, E_STORED_LEN_AT, S)?,
        block_crc: u32_at(e, E_CRC_AT, S)?,
    })
}

/// Blocks must tile the logical data `64 .. data_end` and the stored area `64 .. stored_end`
/// (where the dictionary, or else the entries, start), in order, with no gap.
/// spec: segment.md#block-directory-entry
fn check_chain(blocks: &[BlockEntry], data_end: u64, stored_end: usize) -> Result<(), FormatError> {
    const S: Structure = Structure::BlockDirectory;
    let mut logical = SEGMENT_HEADER_LEN as u64;
    let mut stored = SEGMENT_HEADER_LEN as u64;
    for (i, b) in blocks.iter().enumerate() {
        let bad = |why: &str| FormatError::invalid(S, "entry", format!("block {i}: {why}"));
        if u64::from(b.logical_offset) != logical {
            return Err(bad("does not start where the previous block ends"));
        }
        if b.logical_len == 0 || b.logical_len % 8 != 0 {
            return Err(bad("logical_len is 0 or not a multiple of 8"));
        }
        if u64::from(b.stored_offset) != stored || b.stored_len == 0 {
            return Err(bad("stored frame is not where the previous one ends"));
        }
        logical = b.logical_end();
        stored += crate::padded_len(b.stored_len as usize) as u64;
    }
    if logical != data_end {
        return Err(FormatError::invalid(
            S,
            "entries",
            "blocks do not end at the footer's data_end",
        ));
    }
    if stored != stored_end as u64 {
        return Err(FormatError::invalid(
            S,
            "entries",
            "stored blocks do not end where the directory starts",
        ));
    }
    Ok(())
}
