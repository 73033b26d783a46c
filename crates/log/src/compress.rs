//! Compressed sealed segments: making one from the image of a sealed segment, reading one
//! block of it for a point read, and expanding it back to its logical image for scans.
//! spec: segment.md#compressed-segments
//!
//! A compressed segment stands for an uncompressed sealed segment (its logical image): every
//! offset and every record checksum is that image's, so the index, the record walk and record
//! verification are the same code for both; only where the bytes come from differs.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use sessionlog_format::{
    block_crc, encode_block_directory, mask_blocks, padded_len, segment_format_version,
    unmask_block, BlockEntry, Checksums, CompressedLayout, FooterView, Masking, SegmentHeader,
    FOOTER_TRAILER_LEN, FORMAT_VERSION_COMPRESSED, SEGMENT_HEADER_LEN,
};
use zstd::zstd_safe::{self, CParameter, CompressionLevel};

use crate::error::{corrupted, io_err, Result};
use crate::ids::SegmentId;

/// A block is closed once it holds at least this many logical bytes. Small enough that a
/// point read decompresses little, large enough for zstd to find repeats across records.
pub(crate) const BLOCK_TARGET_BYTES: usize = 8 << 10;

/// Where the blocks of a segment's data end, chosen while the data is written: at the first
/// start of a batch, a record or a batch trailer at least [`BLOCK_TARGET_BYTES`] past the
/// block's start, and at the end of data, so no structure spans two blocks and a point read
/// finds its record whole in one block. spec: segment.md#compressed-segments
#[derive(Debug)]
pub(crate) struct BlockCuts {
    block_start: usize,
    cuts: Vec<usize>,
}

impl BlockCuts {
    pub fn new() -> BlockCuts {
        BlockCuts {
            block_start: SEGMENT_HEADER_LEN,
            cuts: Vec::new(),
        }
    }

    /// Offers the start of a batch, a record or a batch trailer, in increasing order.
    pub fn offer(&mut self, point: usize) {
        if point.saturating_sub(self.block_start) >= BLOCK_TARGET_BYTES {
            self.cuts.push(point);
            self.block_start = point;
        }
    }

    /// The cuts, the last at `data_end`.
    pub fn finish(mut self, data_end: usize) -> Vec<usize> {
        if self.block_start < data_end {
            self.cuts.push(data_end);
        }
        self.cuts
    }
}

/// How the writer masks the blocks it compresses, and so the codec it writes: codec 3.
const WRITTEN_MASKING: Masking = Masking::RecordsAndFrames;

/// A segment's dictionary is trained only when its data has at least this many blocks:
/// fewer samples teach zstd little, and the dictionary's own bytes would not pay.
const DICTIONARY_MIN_BLOCKS: usize = 16;

/// The largest dictionary trained for a segment compressed at `level`. Measured on the
/// masked blocks of a generated agent session's 64 MiB segment: at level 3 a 16 KiB
/// dictionary stored 51.6 B/event of blocks against 53.0 with 64 KiB (the fast levels make
/// less of a large one); at level 19, 64 KiB stored 41.1 against 42.1 with 16 KiB.
fn dictionary_max_bytes(level: i32) -> usize {
    if level < 10 {
        16 << 10
    } else {
        64 << 10
    }
}

/// Masked bytes a dictionary is trained from, at most: blocks spread over the segment.
const DICTIONARY_SAMPLE_BYTES: usize = 4 << 20;

thread_local! {
    /// One zstd decompression context per reading thread, reused for every block it reads:
    /// creating a context costs as much as decompressing a small block.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `stored` decompressed into at most `capacity` bytes, on this thread's context, with
/// `dictionary` when there is one.
fn decompress_block(
    stored: &[u8],
    capacity: usize,
    dictionary: Option<&zstd_safe::DDict<'static>>,
) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(zstd_safe::DCtx::create);
        let mut out = Vec::with_capacity(capacity);
        match dictionary {
            Some(d) => dctx.decompress_using_ddict(&mut out, stored, d),
            None => dctx.decompress(&mut out, stored),
        }
        .map_err(zstd_failed)?;
        Ok(out)
    })
}

/// A dictionary for the masked `blocks` of one segment, trained from blocks spread over
/// it; empty when there are too few blocks or training fails (the blocks are then
/// compressed without one).
fn train_dictionary(blocks: &[&[u8]], level: i32) -> Vec<u8> {
    if blocks.len() < DICTIONARY_MIN_BLOCKS {
        return Vec::new();
    }
    let total: usize = blocks.iter().map(|b| b.len()).sum();
    let step = total.div_ceil(DICTIONARY_SAMPLE_BYTES).max(1);
    let samples: Vec<&[u8]> = blocks.iter().step_by(step).copied().collect();
    let sampled: usize = samples.iter().map(|b| b.len()).sum();
    let max = dictionary_max_bytes(level).min(sampled / 16);
    zstd::dict::from_samples(&samples, max).unwrap_or_default()
}

/// Decompressed blocks a segment keeps, most recent first. Reading a session back revisits
/// blocks near the one it reads (a range read walks back from the anchor after the window it
/// returns; folding a compaction reads the range it shadows), so a cold `view` decompresses
/// each block about once with this many, and several times with a handful.
const RECENT_BLOCKS: usize = 64;

/// Decompressed bytes all segments of the process may keep together before each keeps only
/// its latest block, so scanning a large store does not keep `RECENT_BLOCKS` per segment.
const CACHE_BUDGET_BYTES: usize = 64 << 20;

/// Decompressed bytes kept by every segment's recent blocks.
static CACHED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Whether the segment file `bytes` is a compressed one (its header says version 2).
pub(crate) fn is_compressed(bytes: &[u8]) -> bool {
    SegmentHeader::decode(bytes).is_ok()
        && segment_format_version(bytes) == Some(FORMAT_VERSION_COMPRESSED)
}

/// The compressed file for the sealed segment whose whole (uncompressed, version 1) file is
/// `image`, its data cut at `cuts` (from [`BlockCuts`], made while the image was written)
/// into blocks masked and compressed at zstd `level` with a dictionary trained on them
/// (codec 3). Every block is decompressed and unmasked again before the file is returned,
/// and must give back its logical bytes: a compressed segment's record checksums are
/// recomputed when it is read, so this is where they are vouched for.
pub(crate) fn compress_image(
    image: &[u8],
    id: SegmentId,
    level: i32,
    cuts: &[usize],
) -> Result<Vec<u8>> {
    let header = SegmentHeader::decode(image)
        .map_err(|e| corrupted(id, 0, "header of a segment to compress", Some(e)))?;
    let footer = FooterView::decode(image, id.0)
        .map_err(|e| corrupted(id, 0, "footer of a segment to compress", Some(e)))?;
    let data_end = usize::try_from(footer.data_end).unwrap_or(usize::MAX);
    let data = image
        .get(..data_end)
        .ok_or_else(|| corrupted(id, footer.data_end, "footer lies past the file", None))?;
    let mut ranges = Vec::with_capacity(cuts.len());
    let mut start = SEGMENT_HEADER_LEN;
    for &cut in cuts {
        if cut <= start || cut > data.len() {
            return Err(corrupted(
                id,
                cut as u64,
                "block cut outside the data",
                None,
            ));
        }
        ranges.push(start..cut);
        start = cut;
    }
    let body = data.get(SEGMENT_HEADER_LEN..).unwrap_or_default();
    let masked = mask_blocks(body, cuts, WRITTEN_MASKING)
        .map_err(|e| corrupted(id, 0, "batches of a segment to compress", Some(e)))?;
    let in_masked = |r: &std::ops::Range<usize>| {
        &masked[r.start - SEGMENT_HEADER_LEN..r.end - SEGMENT_HEADER_LEN]
    };
    let dictionary = train_dictionary(&ranges.iter().map(in_masked).collect::<Vec<_>>(), level);
    let mut codec = BlockCodec::new(level, &dictionary)
        .map_err(io_err("compressing", format!("segment {id}")))?;
    let mut out = header.encode_compressed().to_vec();
    let mut blocks: Vec<BlockEntry> = Vec::new();
    for range in &ranges {
        let logical = &data[range.clone()];
        let stored = codec
            .compress(in_masked(range))
            .map_err(io_err("compressing", format!("segment {id}")))?;
        let mut again = decompress_block(&stored, logical.len(), codec.ddict.as_ref()).map_err(
            io_err("checking the compression of", format!("segment {id}")),
        )?;
        let unmasked = unmask_block(
            id.0,
            range.start as u64,
            &mut again,
            WRITTEN_MASKING,
            Checksums::Restore,
        );
        if unmasked.is_err() || again != logical {
            return Err(corrupted(
                id,
                range.start as u64,
                "a compressed block does not give back its bytes",
                unmasked.err(),
            ));
        }
        let stored_offset = out.len() as u64;
        blocks.push(BlockEntry {
            logical_offset: range.start as u32,
            logical_len: logical.len() as u32,
            stored_offset: stored_offset as u32,
            stored_len: stored.len() as u32,
            block_crc: block_crc(id.0, stored_offset, &stored),
        });
        out.extend_from_slice(&stored);
        out.resize(out.len() - stored.len() + padded_len(stored.len()), 0);
    }
    encode_block_directory(
        &mut out,
        id.0,
        &blocks,
        WRITTEN_MASKING.codec(),
        &dictionary,
    );
    out.extend_from_slice(&image[data_end..]);
    Ok(out)
}

/// A zstd compression context for the blocks of one segment: its level, a frame checksum
/// (so decompression vouches for what it returns), and the segment's dictionary.
struct BlockCodec {
    cctx: zstd_safe::CCtx<'static>,
    ddict: Option<zstd_safe::DDict<'static>>,
}

/// A zstd error code as an I/O error.
fn zstd_failed(code: usize) -> std::io::Error {
    std::io::Error::other(zstd_safe::get_error_name(code))
}

impl BlockCodec {
    fn new(level: i32, dictionary: &[u8]) -> std::io::Result<BlockCodec> {
        let mut cctx = zstd_safe::CCtx::create();
        cctx.set_parameter(CParameter::CompressionLevel(level as CompressionLevel))
            .map_err(zstd_failed)?;
        cctx.set_parameter(CParameter::ChecksumFlag(true))
            .map_err(zstd_failed)?;
        let ddict = if dictionary.is_empty() {
            None
        } else {
            cctx.load_dictionary(dictionary).map_err(zstd_failed)?;
            Some(zstd_safe::DDict::create(dictionary))
        };
        Ok(BlockCodec { cctx, ddict })
    }

    fn compress(&mut self, block: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(zstd_safe::compress_bound(block.len()));
        self.cctx.compress2(&mut out, block).map_err(zstd_failed)?;
        Ok(out)
    }
}

/// The blocks of a mapped compressed segment, with the last few decompressed.
#[derive(Debug)]
pub(crate) struct Blocks {
    layout: CompressedLayout,
    /// The segment's dictionary (codecs 2 and 3 only, when it has one), loaded by the first read
    /// of a block, so opening a store with many compressed segments loads none; `None`
    /// when it does not load.
    dictionary: std::sync::OnceLock<Option<Dictionary>>,
    recent: Mutex<Vec<(usize, Bytes)>>,
}

/// A loaded decompression dictionary.
struct Dictionary(zstd_safe::DDict<'static>);

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dictionary({} bytes loaded)", self.0.sizeof())
    }
}

impl Blocks {
    /// Verifies the footer and the block directory of the compressed file `file`.
    pub fn decode(file: &[u8], id: SegmentId) -> Result<Blocks> {
        let layout = CompressedLayout::decode(file, id.0).map_err(|e| {
            corrupted(
                id,
                file.len() as u64,
                "footer or block directory of a compressed segment",
                Some(e),
            )
        })?;
        Ok(Blocks {
            layout,
            dictionary: std::sync::OnceLock::new(),
            recent: Mutex::new(Vec::with_capacity(RECENT_BLOCKS)),
        })
    }

    pub fn footer(&self) -> FooterView {
        self.layout.footer
    }

    /// The decompressed block holding logical `offset`, and the logical offset it starts at.
    pub fn holding(&self, file: &[u8], id: SegmentId, offset: u64) -> Result<(Bytes, u64)> {
        let i = self
            .index_holding(offset)
            .ok_or_else(|| corrupted(id, offset, "offset lies in no compressed block", None))?;
        let start = u64::from(self.layout.blocks[i].logical_offset);
        Ok((self.block(file, id, i)?, start))
    }

    /// How many blocks the segment has.
    pub fn count(&self) -> usize {
        self.layout.blocks.len()
    }

    /// The index of the block whose logical range holds `offset`.
    pub fn index_holding(&self, offset: u64) -> Option<usize> {
        self.layout.block_holding(offset)
    }

    /// The logical range block `i` covers, when there is such a block.
    pub fn logical_range(&self, i: usize) -> Option<std::ops::Range<u64>> {
        let entry = self.layout.blocks.get(i)?;
        Some(u64::from(entry.logical_offset)..entry.logical_end())
    }

    /// Block `i` decompressed: one of the segment's recent blocks, or decompressed now and
    /// kept among them.
    pub fn block(&self, file: &[u8], id: SegmentId, i: usize) -> Result<Bytes> {
        if let Some(bytes) = self.recent_block(i) {
            return Ok(bytes);
        }
        let bytes = Bytes::from(self.decompress(file, id, i, Checksums::LeaveZero)?);
        self.keep(i, bytes.clone());
        Ok(bytes)
    }

    /// Block `i` decompressed, from the recent blocks when it is one, else decompressed
    /// without being kept: for a reader that keeps what it reads itself and hands a block
    /// on with [`Blocks::keep`] only once it is read.
    pub fn block_unkept(&self, file: &[u8], id: SegmentId, i: usize) -> Result<Bytes> {
        match self.recent_block(i) {
            Some(bytes) => Ok(bytes),
            None => self
                .decompress(file, id, i, Checksums::LeaveZero)
                .map(Bytes::from),
        }
    }

    /// Block `i` when it is one of the recent blocks.
    fn recent_block(&self, i: usize) -> Option<Bytes> {
        let mut recent = self.recent.lock();
        // A sequential read asks for the block it read last, record after record: that
        // one is first and stays where it is.
        let at = recent.iter().position(|(b, _)| *b == i)?;
        recent[..=at].rotate_right(1);
        Some(recent[0].1.clone())
    }

    /// Makes decompressed block `i` the most recent block, unless it already is one.
    pub fn keep(&self, i: usize, bytes: Bytes) {
        let mut recent = self.recent.lock();
        if let Some(at) = recent.iter().position(|(b, _)| *b == i) {
            recent[..=at].rotate_right(1);
            return;
        }
        // Past the process-wide budget a segment keeps only the block it just read.
        let keep = if CACHED_BYTES.load(Ordering::Relaxed) > CACHE_BUDGET_BYTES {
            0
        } else {
            RECENT_BLOCKS - 1
        };
        while recent.len() > keep {
            if let Some((_, old)) = recent.pop() {
                CACHED_BYTES.fetch_sub(old.len(), Ordering::Relaxed);
            }
        }
        CACHED_BYTES.fetch_add(bytes.len(), Ordering::Relaxed);
        recent.insert(0, (i, bytes));
    }

    /// The segment's dictionary, loaded on first use; `None` when it has none.
    fn dictionary(&self, file: &[u8], id: SegmentId) -> Result<Option<&zstd_safe::DDict<'static>>> {
        let range = self.layout.dictionary.clone();
        if range.is_empty() {
            return Ok(None);
        }
        let at = range.start as u64;
        let loaded = self.dictionary.get_or_init(|| {
            file.get(range)
                .and_then(zstd_safe::DDict::try_create)
                .map(Dictionary)
        });
        match loaded {
            Some(d) => Ok(Some(&d.0)),
            None => Err(corrupted(
                id,
                at,
                "the dictionary of a compressed segment does not load",
                None,
            )),
        }
    }

    /// Whether the records of the blocks [`block`](Self::block) and
    /// [`block_unkept`](Self::block_unkept) give keep the zeros masking left in their
    /// checksum fields (codecs 2 and 3): they are read with
    /// [`read_record_of_checked_block`](sessionlog_format::read_record_of_checked_block).
    /// Codec 1 blocks hold their records' checksums, which are verified as in an
    /// uncompressed segment.
    pub fn checksums_left_zero(&self) -> bool {
        Masking::of_codec(self.layout.codec).is_some()
    }

    /// Block `i` decompressed, after its stored bytes verified, and unmasked with its
    /// checksums as `checksums` says: left zero for reading records (the block's stored
    /// checksum and its frame's content checksum have covered those bytes), restored for
    /// `verify`, `dump` and rewrites.
    fn decompress(
        &self,
        file: &[u8],
        id: SegmentId,
        i: usize,
        checksums: Checksums,
    ) -> Result<Vec<u8>> {
        let entry = *self
            .layout
            .blocks
            .get(i)
            .ok_or_else(|| corrupted(id, 0, format!("no compressed block {i}"), None))?;
        let at = u64::from(entry.stored_offset);
        let stored = self
            .layout
            .stored(file, id.0, i)
            .map_err(|e| corrupted(id, at, "compressed block", Some(e)))?;
        let want = entry.logical_len as usize;
        let dictionary = self.dictionary(file, id)?;
        match decompress_block(stored, want, dictionary) {
            Ok(mut out) if out.len() == want => {
                if let Some(masking) = Masking::of_codec(self.layout.codec) {
                    let logical = u64::from(entry.logical_offset);
                    unmask_block(id.0, logical, &mut out, masking, checksums).map_err(|e| {
                        corrupted(id, at, "a compressed block does not unmask", Some(e))
                    })?;
                }
                Ok(out)
            }
            Ok(out) => Err(corrupted(
                id,
                at,
                format!(
                    "compressed block decompresses to {} bytes where its entry says {want}",
                    out.len()
                ),
                None,
            )),
            Err(e) => Err(corrupted(
                id,
                at,
                format!("compressed block does not decompress: {e}"),
                None,
            )),
        }
    }

    /// The logical image of the compressed file `file`: a version-1 header, every block
    /// decompressed, the footer and its trailer.
    pub fn expand(&self, file: &[u8], id: SegmentId) -> Result<Vec<u8>> {
        let header = SegmentHeader::decode(file)
            .map_err(|e| corrupted(id, 0, "header of a compressed segment", Some(e)))?;
        let tail_len = self.layout.footer.footer_len() + FOOTER_TRAILER_LEN;
        let data_end = usize::try_from(self.layout.footer.data_end).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(data_end.saturating_add(tail_len));
        out.extend_from_slice(&header.encode());
        for i in 0..self.layout.blocks.len() {
            out.extend_from_slice(&self.decompress(file, id, i, Checksums::Restore)?);
        }
        out.extend_from_slice(&file[file.len().saturating_sub(tail_len)..]);
        Ok(out)
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        let kept: usize = self.recent.get_mut().iter().map(|(_, b)| b.len()).sum();
        CACHED_BYTES.fetch_sub(kept, Ordering::Relaxed);
    }
}

/// The logical image of a segment file: itself when it is not compressed, else expanded.
/// For readers of whole files (`verify`, `dump`): a compressed file whose layout does not
/// verify is an error.
pub fn logical_image(file: &[u8], id: SegmentId) -> Result<Cow<'_, [u8]>> {
    if !is_compressed(file) {
        return Ok(Cow::Borrowed(file));
    }
    Blocks::decode(file, id)?.expand(file, id).map(Cow::Owned)
}
