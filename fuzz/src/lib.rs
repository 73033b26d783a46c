//! Helpers shared by the fuzz targets: checksum fix-ups that let a byte-level fuzzer reach the
//! structural checks behind the codec's checksums.

use sessionlog_format::{
    padded_len, SegmentCrc, SegmentHeader, BATCH_HEADER_LEN, BATCH_TRAILER_LEN, FOOTER_TRAILER_LEN,
    RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};

/// Overwrites the first 64 bytes of `seg` with a valid header of segment `segment_id`
/// (store id taken from the bytes that were there).
pub fn fix_segment_header(seg: &mut Vec<u8>, segment_id: u64) {
    if seg.len() < SEGMENT_HEADER_LEN {
        seg.resize(SEGMENT_HEADER_LEN, 0);
    }
    let mut store_id = [0u8; 16];
    store_id.copy_from_slice(&seg[16..32]);
    let header = SegmentHeader {
        store_id,
        segment_id,
        created_unix_ms: 1_700_000_000_000,
    };
    seg[..SEGMENT_HEADER_LEN].copy_from_slice(&header.encode());
}

/// Fixes the checksums of every batch frame laid end to end from offset 64 of `seg`, as far
/// as their declared lengths chain.
pub fn fix_all_batches(seg: &mut [u8], segment_id: u64) {
    let mut at = SEGMENT_HEADER_LEN;
    while at + BATCH_HEADER_LEN + BATCH_TRAILER_LEN <= seg.len() {
        let declared = u32::from_le_bytes(seg[at + 8..at + 12].try_into().unwrap()) as usize;
        if declared < BATCH_HEADER_LEN + BATCH_TRAILER_LEN || declared % 8 != 0 {
            return;
        }
        fix_batch_checksums(&mut seg[at..], segment_id, at as u64);
        at += declared;
    }
}

/// Rewrites the record, header and batch checksums of the frame at the start of `frame` so
/// that only structural rules can refuse it.
pub fn fix_batch_checksums(frame: &mut [u8], segment_id: u64, offset: u64) {
    if frame.len() < BATCH_HEADER_LEN + BATCH_TRAILER_LEN {
        return;
    }
    let declared = u32::from_le_bytes(frame[8..12].try_into().unwrap()) as usize;
    let len = declared.min(frame.len()) & !7;
    if len < BATCH_HEADER_LEN + BATCH_TRAILER_LEN {
        return;
    }
    let end = len - BATCH_TRAILER_LEN;
    let mut at = BATCH_HEADER_LEN;
    while at + RECORD_HEADER_LEN <= end {
        let payload_len = u32::from_le_bytes(frame[at + 4..at + 8].try_into().unwrap()) as usize;
        let covered_end = at + RECORD_HEADER_LEN + payload_len;
        if covered_end > end {
            break;
        }
        let mut crc = SegmentCrc::new(segment_id);
        crc.update(&(offset + at as u64).to_le_bytes());
        crc.update(&frame[at + 4..covered_end]);
        let crc = crc.finish();
        frame[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        at += RECORD_HEADER_LEN + padded_len(payload_len);
    }
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(&offset.to_le_bytes());
    crc.update(&frame[8..BATCH_HEADER_LEN]);
    let header_crc = crc.finish();
    frame[4..8].copy_from_slice(&header_crc.to_le_bytes());
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(&offset.to_le_bytes());
    crc.update(&frame[..end]);
    let batch_crc = crc.finish();
    frame[end..end + 4].copy_from_slice(&batch_crc.to_le_bytes());
}

/// Points the trailer at the end of `seg` at a footer ending where it starts, names
/// `segment_id`, and rewrites the footer checksum.
pub fn fix_footer_checksum(seg: &mut [u8], segment_id: u64) {
    let Some(at) = seg.len().checked_sub(FOOTER_TRAILER_LEN) else {
        return;
    };
    let t = at;
    let footer_offset =
        (u64::from_le_bytes(seg[t + 8..t + 16].try_into().unwrap()) % (at as u64 + 1)) as usize;
    let footer_len = at - footer_offset;
    seg[t + 8..t + 16].copy_from_slice(&(footer_offset as u64).to_le_bytes());
    seg[t + 16..t + 24].copy_from_slice(&(footer_len as u64).to_le_bytes());
    seg[t + 24..t + 32].copy_from_slice(&segment_id.to_le_bytes());
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(&seg[footer_offset..at]);
    crc.update(&seg[t + 8..t + 32]);
    let crc = crc.finish();
    seg[t + 4..t + 8].copy_from_slice(&crc.to_le_bytes());
}
