//! Codec 2 of compressed segments (spec: segment.md#masked-blocks): the data of a sealed
//! segment, masked and cut into blocks at batch, record and trailer starts, unmasks block by
//! block, each alone, to exactly the bytes it came from; and no bytes make unmasking panic.

use proptest::prelude::*;
use sessionlog_format::{
    mask_blocks, unmask_block, verify_batch, BatchEncoder, RecordHeader, SEGMENT_HEADER_LEN,
};

/// One batch: records as (stream, payload, seq step, prev_offset: chained, or 0 where a
/// chain would name a record).
type BatchSpec = Vec<(u64, Vec<u8>, u64, Option<u32>)>;

fn batch() -> impl Strategy<Value = BatchSpec> {
    proptest::collection::vec(
        (
            0u64..4,
            proptest::collection::vec(any::<u8>(), 0..200),
            prop_oneof![4 => Just(1u64), 1 => any::<u64>()],
            prop_oneof![4 => Just(None), 1 => Just(Some(0u32))],
        ),
        1..6,
    )
}

/// The data `64 ..` of a segment holding `batches`, and every place a block may start.
fn encode(segment: u64, batches: &[BatchSpec]) -> (Vec<u8>, Vec<usize>) {
    let mut buf = vec![0u8; SEGMENT_HEADER_LEN];
    let mut starts = Vec::new();
    let mut next_seq = [0u64; 4];
    let mut last_offset = [0u32; 4];
    for spec in batches {
        let offset = buf.len() as u64;
        starts.push(buf.len());
        let mut enc = BatchEncoder::begin(&mut buf, segment, offset, offset);
        for (stream, payload, step, prev) in spec {
            let s = *stream as usize;
            let at = enc.next_record_offset();
            starts.push(at as usize);
            let seq = next_seq[s];
            next_seq[s] = seq.wrapping_add(*step);
            let h = RecordHeader {
                stream_id: *stream,
                seq,
                kind: 1,
                flags: 0,
                prev_offset: prev.unwrap_or(last_offset[s]),
                payload_len: 0,
            };
            enc.push(h, payload);
            last_offset[s] = at as u32;
        }
        let len = enc.finish();
        starts.push(offset as usize + len - 8);
        verify_batch(&buf[offset as usize..], segment, offset).expect("a valid batch");
    }
    (buf, starts)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_block_unmasks_alone_to_its_bytes(
        segment in any::<u64>(),
        batches in proptest::collection::vec(batch(), 1..8),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let (image, starts) = encode(segment, &batches);
        let mut cuts: Vec<usize> = picks
            .iter()
            .map(|i| *i.get(&starts))
            .filter(|&c| c > SEGMENT_HEADER_LEN)
            .collect();
        cuts.push(image.len());
        cuts.sort_unstable();
        cuts.dedup();
        let masked = mask_blocks(&image[SEGMENT_HEADER_LEN..], &cuts).expect("masks");
        prop_assert_eq!(masked.len(), image.len() - SEGMENT_HEADER_LEN);
        let mut from = SEGMENT_HEADER_LEN;
        for &cut in &cuts {
            let mut block = masked[from - SEGMENT_HEADER_LEN..cut - SEGMENT_HEADER_LEN].to_vec();
            unmask_block(segment, from as u64, &mut block).expect("unmasks");
            prop_assert_eq!(&block[..], &image[from..cut], "block at {}", from);
            from = cut;
        }
    }

    #[test]
    fn unmasking_any_bytes_returns_instead_of_panicking(
        segment in any::<u64>(),
        at in 0u64..1 << 20,
        mut bytes in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let _ = unmask_block(segment, at * 8, &mut bytes);
    }
}

#[test]
fn a_checksum_field_masking_zeroed_must_stay_zero() {
    let batch: BatchSpec = vec![
        (1, b"first".to_vec(), 1, None),
        (1, b"second".to_vec(), 1, None),
    ];
    let (image, _) = encode(9, &[batch]);
    let cuts = [image.len()];
    let masked = mask_blocks(&image[SEGMENT_HEADER_LEN..], &cuts).expect("masks");
    // The batch header's, the first record's and the trailer's checksums are zero.
    assert_eq!(&masked[4..8], &[0; 4]);
    assert_eq!(&masked[32..36], &[0; 4]);
    assert_eq!(&masked[masked.len() - 8..masked.len() - 4], &[0; 4]);
    // The second record's seq and prev_offset are what the first predicts: zeros.
    let second = 32 + 32 + 8;
    assert_eq!(&masked[second + 16..second + 24], &[0; 8]);
    assert_eq!(&masked[second + 28..second + 32], &[0; 4]);
    for at in [4, 32, masked.len() - 8] {
        let mut bad = masked.clone();
        bad[at] ^= 1;
        assert!(
            unmask_block(9, SEGMENT_HEADER_LEN as u64, &mut bad).is_err(),
            "a set bit at {at} is refused"
        );
    }
}
