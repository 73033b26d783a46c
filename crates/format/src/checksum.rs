//! Checksums: CRC-32 (IEEE, via crc32fast) seeded with the segment id, then masked.
//!
//! spec: segment.md#checksums. Mixing the segment id in means bytes copied from another
//! segment (or left over from an older one) never validate where they do not belong; masking
//! means a CRC stored inside a payload cannot make that payload look like a valid frame.

/// Added after rotating the raw CRC; an arbitrary odd constant (the 32-bit golden ratio).
const MASK_DELTA: u32 = 0x9E37_79B9;

/// Masks a raw CRC so that checksums of data containing checksums do not self-validate.
pub fn masked_crc(raw: u32) -> u32 {
    raw.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// An incremental checksum bound to one segment.
#[derive(Debug, Clone)]
pub struct SegmentCrc {
    hasher: crc32fast::Hasher,
}

impl SegmentCrc {
    /// Starts a checksum for bytes that live in `segment_id`.
    pub fn new(segment_id: u64) -> Self {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&segment_id.to_le_bytes());
        SegmentCrc { hasher }
    }

    /// Starts a checksum for bytes at `offset` of `segment_id`: the same state as
    /// [`SegmentCrc::new`] followed by `le64(offset)`, fed as one 16-byte piece (two
    /// 8-byte pieces each take the checksum's slow path for short input).
    pub fn at(segment_id: u64, offset: u64) -> Self {
        let mut seed = [0u8; 16];
        let (segment, at) = seed.split_at_mut(8);
        segment.copy_from_slice(&segment_id.to_le_bytes());
        at.copy_from_slice(&offset.to_le_bytes());
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&seed);
        SegmentCrc { hasher }
    }

    /// Feeds more covered bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// The masked checksum of everything fed so far.
    pub fn finish(self) -> u32 {
        masked_crc(self.hasher.finalize())
    }
}

/// Masked checksum of one contiguous span that lives in `segment_id`.
pub fn segment_crc(segment_id: u64, bytes: &[u8]) -> u32 {
    let mut c = SegmentCrc::new(segment_id);
    c.update(bytes);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_bytes_check_differently_in_another_segment() {
        let bytes = b"identical payload";
        assert_ne!(segment_crc(1, bytes), segment_crc(2, bytes));
    }

    #[test]
    fn a_checksum_started_at_an_offset_is_one_fed_the_offset() {
        for (segment, offset) in [(0, 0u64), (1, 64), (7, 4096), (u64::MAX, 1 << 40)] {
            let mut fed = SegmentCrc::new(segment);
            fed.update(&offset.to_le_bytes());
            fed.update(b"covered bytes");
            let mut at = SegmentCrc::at(segment, offset);
            at.update(b"covered bytes");
            assert_eq!(
                at.finish(),
                fed.finish(),
                "segment {segment} offset {offset}"
            );
        }
    }

    #[test]
    fn masking_changes_the_raw_crc() {
        let raw = crc32fast::hash(b"abc");
        assert_ne!(masked_crc(raw), raw);
    }
}
