//! The segment header and segment file names. spec: segment.md#segment-header

use crate::checksum::segment_crc;
use crate::error::{FormatError, Structure};
use crate::le::{array_at, put_u32, put_u64, u32_at, u64_at};

/// The first eight bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SESSLOG\0";
/// The format version this build writes and reads. spec: segment.md#version-history
pub const FORMAT_VERSION: u32 = 1;

// spec: segment.md#segment-header — offsets chain: each is the previous plus its size.
const MAGIC_AT: usize = 0;
const VERSION_AT: usize = MAGIC_AT + 8;
const HEADER_LEN_AT: usize = VERSION_AT + 4;
const STORE_ID_AT: usize = HEADER_LEN_AT + 4;
const SEGMENT_ID_AT: usize = STORE_ID_AT + 16;
const CREATED_AT: usize = SEGMENT_ID_AT + 8;
const RESERVED_AT: usize = CREATED_AT + 8;
const CRC_AT: usize = RESERVED_AT + 12;
/// Bytes in a segment header; the first batch starts here.
pub const SEGMENT_HEADER_LEN: usize = CRC_AT + 4;

const _: () = assert!(SEGMENT_HEADER_LEN == 64);

/// The fixed header at offset 0 of a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Identifies the store the segment belongs to; a segment from another store is refused.
    pub store_id: [u8; 16],
    /// The segment number, equal to the number in the file name.
    pub segment_id: u64,
    /// Wall-clock creation time, milliseconds since the Unix epoch; informational.
    pub created_unix_ms: u64,
}

impl SegmentHeader {
    /// Encodes the header, checksum included.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = [0u8; SEGMENT_HEADER_LEN];
        out[MAGIC_AT..MAGIC_AT + 8].copy_from_slice(&SEGMENT_MAGIC);
        put_u32(&mut out, VERSION_AT, FORMAT_VERSION);
        put_u32(&mut out, HEADER_LEN_AT, SEGMENT_HEADER_LEN as u32);
        out[STORE_ID_AT..STORE_ID_AT + 16].copy_from_slice(&self.store_id);
        put_u64(&mut out, SEGMENT_ID_AT, self.segment_id);
        put_u64(&mut out, CREATED_AT, self.created_unix_ms);
        let crc = segment_crc(self.segment_id, &out[..CRC_AT]);
        put_u32(&mut out, CRC_AT, crc);
        out
    }

    /// Encodes the header of a compressed segment (format version 2), checksum included.
    /// spec: segment.md#compressed-segments
    pub fn encode_compressed(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = self.encode();
        put_u32(&mut out, VERSION_AT, crate::FORMAT_VERSION_COMPRESSED);
        let crc = segment_crc(self.segment_id, &out[..CRC_AT]);
        put_u32(&mut out, CRC_AT, crc);
        out
    }

    /// Decodes and verifies a header of either version (1, or 2 for a compressed segment;
    /// [`segment_format_version`] tells which). `buf` may be longer than the header.
    pub fn decode(buf: &[u8]) -> Result<SegmentHeader, FormatError> {
        const S: Structure = Structure::SegmentHeader;
        let magic = array_at::<8>(buf, MAGIC_AT, S)?;
        if magic != SEGMENT_MAGIC {
            if buf.iter().take(SEGMENT_HEADER_LEN).all(|&b| b == 0) {
                return Err(FormatError::Zeroed { structure: S });
            }
            return Err(FormatError::BadMagic {
                structure: S,
                found: u64::from_le_bytes(magic),
            });
        }
        let segment_id = u64_at(buf, SEGMENT_ID_AT, S)?;
        let stored = u32_at(buf, CRC_AT, S)?;
        let computed = segment_crc(segment_id, crate::le::slice_at(buf, 0, CRC_AT, S)?);
        if stored != computed {
            return Err(FormatError::ChecksumMismatch {
                structure: S,
                stored,
                computed,
            });
        }
        let version = u32_at(buf, VERSION_AT, S)?;
        if version != FORMAT_VERSION && version != crate::FORMAT_VERSION_COMPRESSED {
            return Err(FormatError::UnsupportedVersion {
                found: version,
                supported: crate::FORMAT_VERSION_COMPRESSED,
            });
        }
        let reserved = crate::le::slice_at(buf, RESERVED_AT, CRC_AT - RESERVED_AT, S)?;
        if reserved.iter().any(|&b| b != 0) {
            return Err(FormatError::invalid(S, "reserved", "must be zero"));
        }
        let header_len = u32_at(buf, HEADER_LEN_AT, S)?;
        if header_len as usize != SEGMENT_HEADER_LEN {
            return Err(FormatError::invalid(
                S,
                "header_len",
                format!("{header_len} != {SEGMENT_HEADER_LEN}"),
            ));
        }
        Ok(SegmentHeader {
            store_id: array_at::<16>(buf, STORE_ID_AT, S)?,
            segment_id,
            created_unix_ms: u64_at(buf, CREATED_AT, S)?,
        })
    }
}

/// The format version of a segment whose header [`SegmentHeader::decode`] accepted: 1, or 2
/// for a compressed segment. `None` when `buf` is too short to hold one.
pub fn segment_format_version(buf: &[u8]) -> Option<u32> {
    u32_at(buf, VERSION_AT, Structure::SegmentHeader).ok()
}

/// The file name of segment `id`: twenty decimal digits and `.seg`, so names sort by number.
/// spec: segment.md#files
pub fn segment_file_name(id: u64) -> String {
    format!("{id:020}.seg")
}

/// The segment number in a file name made by [`segment_file_name`], or `None` for any other name.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SegmentHeader {
        SegmentHeader {
            store_id: [7; 16],
            segment_id: 42,
            created_unix_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn header_round_trips() {
        assert_eq!(SegmentHeader::decode(&header().encode()), Ok(header()));
    }

    #[test]
    fn every_single_bit_flip_in_the_header_is_detected() {
        let good = header().encode();
        for byte in 0..SEGMENT_HEADER_LEN {
            for bit in 0..8 {
                let mut bad = good;
                bad[byte] ^= 1 << bit;
                assert!(
                    SegmentHeader::decode(&bad).is_err(),
                    "flip at {byte}:{bit} accepted"
                );
            }
        }
    }

    #[test]
    fn zero_header_reads_as_zeroed() {
        assert_eq!(
            SegmentHeader::decode(&[0u8; 64]),
            Err(FormatError::Zeroed {
                structure: Structure::SegmentHeader
            })
        );
    }

    #[test]
    fn file_names_round_trip_and_reject_strangers() {
        assert_eq!(parse_segment_file_name(&segment_file_name(12)), Some(12));
        assert_eq!(parse_segment_file_name("12.seg"), None);
        assert_eq!(parse_segment_file_name("LOCK"), None);
        assert_eq!(parse_segment_file_name("0000000000000000001x.seg"), None);
    }
}
