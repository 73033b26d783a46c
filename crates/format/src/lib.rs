//! The sessionlog on-disk format as a pure codec: segment headers, batch frames, records,
//! sealed-segment footers with their sparse index, and the checksums that bind them.
//!
//! Nothing here does I/O. Every decoder takes a byte slice and returns either a typed view or a
//! [`FormatError`] that says which structure failed and why; no input bytes make it panic.
//! The normative description of every byte is `format-spec/segment.md`; constants cite the
//! section they implement.
//!
//! All integers are little-endian.

#![forbid(unsafe_code)]

mod batch;
mod checkpoint;
mod checksum;
mod class;
mod compressed;
mod error;
mod footer;
mod header;
mod le;
mod masked;

pub use batch::{
    decode_batch_header, decode_batch_header_in, decode_record_header, encoded_batch_len,
    frame_batch_in, padded_len, read_record_of_checked_block, verify_batch, verify_batch_in,
    verify_record, verify_record_in, BatchEncoder, BatchHeader, BatchRecords, BatchView,
    FramedBatch, RecordHeader, RecordView, BATCH_HEADER_LEN, BATCH_MAGIC, BATCH_TRAILER_LEN,
    BATCH_TRAILER_MAGIC, MAX_BATCH_LEN, RECORD_ALIGN, RECORD_HEADER_LEN,
};
pub use checkpoint::{CatalogCheckpoint, CheckpointStream};
pub use checksum::{masked_crc, segment_crc, SegmentCrc};
pub use class::ErrorClass;
pub use compressed::{
    block_crc, encode_block_directory, BlockEntry, CompressedLayout, BLOCK_DIRECTORY_MAGIC,
    BLOCK_DIRECTORY_TAIL_LEN, BLOCK_ENTRY_LEN, CODEC_ZSTD, CODEC_ZSTD_MASKED,
    CODEC_ZSTD_MASKED_FRAMES, FORMAT_VERSION_COMPRESSED, MAX_DICTIONARY_LEN,
};
pub use error::{FormatError, Structure};
pub use footer::{
    decode_footer_trailer, encode_footer, CatalogEntry, CatalogOp, FooterTrailer, FooterView,
    IndexEntry, StreamSummary, CATALOG_ENTRY_FIXED_LEN, FOOTER_HEADER_LEN, FOOTER_MAGIC,
    FOOTER_TRAILER_LEN, FOOTER_TRAILER_MAGIC, INDEX_ENTRY_LEN, STREAM_SUMMARY_LEN,
};
pub use header::{
    parse_segment_file_name, segment_file_name, segment_format_version, SegmentHeader,
    FORMAT_VERSION, SEGMENT_HEADER_LEN, SEGMENT_MAGIC,
};
pub use masked::{mask_blocks, unmask_block, Checksums, Masking};

/// Stream id reserved for the log's own catalog records (stream names and tombstones).
/// spec: segment.md#streams-and-the-catalog
pub const CATALOG_STREAM: u64 = 0;

/// Record kinds at or above this value are reserved for the log itself.
/// spec: segment.md#record-kinds
pub const FIRST_RESERVED_KIND: u8 = 0xF0;
/// Catalog record: a stream id is bound to a name.
pub const KIND_CATALOG_CREATE: u8 = 0xF0;
/// Catalog record: a stream is deleted (tombstone).
pub const KIND_CATALOG_DELETE: u8 = 0xF1;
/// Catalog record: a live stream is bound to a new name. spec: segment.md#streams-and-the-catalog
pub const KIND_CATALOG_RENAME: u8 = 0xF2;
/// Catalog record: the whole live catalog, first in every segment a roll starts.
/// spec: segment.md#streams-and-the-catalog
pub const KIND_CATALOG_CHECKPOINT: u8 = 0xF3;
