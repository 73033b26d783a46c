//! Codecs 2 and 3 of compressed segments (spec: segment.md#masked-blocks): the data of a
//! sealed segment, masked and cut into blocks at batch, record and trailer starts, unmasks
//! block by block, each alone, to exactly the bytes it came from, or (for reading) to those
//! bytes with every checksum field left zero, whose records read as the verified originals;
//! and no bytes make unmasking, or reading a record of a checked block, panic.

use proptest::prelude::*;
use sessionlog_format::{
    mask_blocks, read_record_of_checked_block, unmask_block, verify_batch, verify_record,
    BatchEncoder, Checksums, Masking, RecordHeader, SEGMENT_HEADER_LEN,
};

const MASKINGS: [Masking; 2] = [Masking::Records, Masking::RecordsAndFrames];

/// One batch: records as (stream, payload, seq step, prev_offset: chained, or 0 where a
/// chain would name a record).
type BatchSpec = Vec<(u64, Vec<u8>, u64, Option<u32>)>;

/// A batch and what its `synced_through` attests: its own offset (as a rewrite writes), the
/// segment header only, or some place in between.
type SyncedBatch = (BatchSpec, Synced);

#[derive(Debug, Clone, Copy)]
enum Synced {
    Own,
    Header,
    Between(u64),
}

fn synced_batch() -> impl Strategy<Value = SyncedBatch> {
    let synced = prop_oneof![
        2 => Just(Synced::Own),
        1 => Just(Synced::Header),
        1 => any::<u64>().prop_map(Synced::Between),
    ];
    (batch(), synced)
}

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

/// A segment image as [`encode_with_fields`] writes it.
struct Encoded {
    /// The segment header's place, then the data.
    image: Vec<u8>,
    /// Every place a block may start.
    starts: Vec<usize>,
    /// Where each record starts.
    records: Vec<usize>,
    /// Where each 4-byte checksum field starts (a batch header's, a record's, a trailer's),
    /// and the structure a block must hold for masking to zero it: the field's own, or for
    /// a trailer its batch's header (a batch cut by a block keeps its trailer's checksum).
    checksums: Vec<(usize, usize)>,
}

/// The data `64 ..` of a segment holding `batches`, and every place a block may start.
fn encode(segment: u64, batches: &[SyncedBatch]) -> (Vec<u8>, Vec<usize>) {
    let e = encode_with_fields(segment, batches);
    (e.image, e.starts)
}

/// [`encode`], with where the records and the checksum fields are.
fn encode_with_fields(segment: u64, batches: &[SyncedBatch]) -> Encoded {
    let mut buf = vec![0u8; SEGMENT_HEADER_LEN];
    let mut starts = Vec::new();
    let mut records = Vec::new();
    let mut checksums = Vec::new();
    let mut next_seq = [0u64; 4];
    let mut last_offset = [0u32; 4];
    for (spec, synced) in batches {
        let offset = buf.len() as u64;
        starts.push(buf.len());
        // The header's checksum follows its 4-byte magic.
        checksums.push((buf.len() + 4, buf.len()));
        let first = SEGMENT_HEADER_LEN as u64;
        let synced = match *synced {
            Synced::Own => offset,
            Synced::Header => first,
            Synced::Between(x) => first + x % (offset - first + 1) / 8 * 8,
        };
        let mut enc = BatchEncoder::begin(&mut buf, segment, offset, synced);
        for (stream, payload, step, prev) in spec {
            let s = *stream as usize;
            let at = enc.next_record_offset();
            starts.push(at as usize);
            records.push(at as usize);
            // A record's checksum is its first field.
            checksums.push((at as usize, at as usize));
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
        // The trailer's checksum comes before its magic.
        starts.push(offset as usize + len - 8);
        checksums.push((offset as usize + len - 8, offset as usize));
        verify_batch(&buf[offset as usize..], segment, offset).expect("a valid batch");
    }
    Encoded {
        image: buf,
        starts,
        records,
        checksums,
    }
}

/// Block ends: the block starts `picks` chooses among `starts` (past the segment header),
/// and the end of the data at `len`, in order.
fn cuts(picks: &[prop::sample::Index], starts: &[usize], len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = picks
        .iter()
        .map(|i| *i.get(starts))
        .filter(|&c| c > SEGMENT_HEADER_LEN)
        .collect();
    cuts.push(len);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_block_unmasks_alone_to_its_bytes(
        segment in any::<u64>(),
        batches in proptest::collection::vec(synced_batch(), 1..8),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let (image, starts) = encode(segment, &batches);
        let cuts = cuts(&picks, &starts, image.len());
        for masking in MASKINGS {
            let masked =
                mask_blocks(&image[SEGMENT_HEADER_LEN..], &cuts, masking).expect("masks");
            prop_assert_eq!(masked.len(), image.len() - SEGMENT_HEADER_LEN);
            let mut from = SEGMENT_HEADER_LEN;
            for &cut in &cuts {
                let mut block =
                    masked[from - SEGMENT_HEADER_LEN..cut - SEGMENT_HEADER_LEN].to_vec();
                unmask_block(segment, from as u64, &mut block, masking, Checksums::Restore).expect("unmasks");
                prop_assert_eq!(&block[..], &image[from..cut], "{:?} block at {}", masking, from);
                from = cut;
            }
        }
    }

    #[test]
    fn a_block_unmasked_for_reading_holds_its_bytes_but_the_checksums_and_reads_its_records(
        segment in any::<u64>(),
        batches in proptest::collection::vec(synced_batch(), 1..8),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let e = encode_with_fields(segment, &batches);
        let image = &e.image;
        let cuts = cuts(&picks, &e.starts, image.len());
        for masking in MASKINGS {
            let masked =
                mask_blocks(&image[SEGMENT_HEADER_LEN..], &cuts, masking).expect("masks");
            let mut from = SEGMENT_HEADER_LEN;
            for &cut in &cuts {
                let mut block =
                    masked[from - SEGMENT_HEADER_LEN..cut - SEGMENT_HEADER_LEN].to_vec();
                unmask_block(segment, from as u64, &mut block, masking, Checksums::LeaveZero)
                    .expect("unmasks");
                let mut want = image[from..cut].to_vec();
                for &(c, _) in e.checksums.iter().filter(|&&(c, whole)| {
                    (from..cut).contains(&c) && (from..cut).contains(&whole)
                }) {
                    want[c - from..c - from + 4].fill(0);
                }
                prop_assert_eq!(&block, &want, "{:?} block at {}", masking, from);
                for &r in e.records.iter().filter(|&&r| (from..cut).contains(&r)) {
                    let read = read_record_of_checked_block(&block[r - from..], r as u64)
                        .expect("a record of a checked block reads");
                    let verified = verify_record(&image[r..], segment, r as u64)
                        .expect("the original verifies");
                    prop_assert_eq!(read, verified, "record at {}", r);
                }
                from = cut;
            }
        }
    }

    #[test]
    fn unmasking_any_bytes_returns_instead_of_panicking(
        segment in any::<u64>(),
        at in 0u64..1 << 20,
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        for masking in MASKINGS {
            for checksums in [Checksums::Restore, Checksums::LeaveZero] {
                let _ = unmask_block(segment, at * 8, &mut bytes.clone(), masking, checksums);
            }
        }
        let _ = read_record_of_checked_block(&bytes, at * 8);
    }
}

#[test]
fn a_checksum_field_masking_zeroed_must_stay_zero() {
    let batch: BatchSpec = vec![
        (1, b"first".to_vec(), 1, None),
        (1, b"second".to_vec(), 1, None),
    ];
    let (image, _) = encode(9, &[(batch, Synced::Own)]);
    let cuts = [image.len()];
    let masked = mask_blocks(&image[SEGMENT_HEADER_LEN..], &cuts, Masking::Records).expect("masks");
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
            unmask_block(
                9,
                SEGMENT_HEADER_LEN as u64,
                &mut bad,
                Masking::Records,
                Checksums::Restore
            )
            .is_err(),
            "a set bit at {at} is refused"
        );
    }
}

/// Codec 3 stores a rewritten batch's frame fields as zeros when its trailer is in the same
/// block, and counts them again from the records; a batch cut by a block keeps its length
/// and count; a count without its length, or a zero length with no trailer, is refused.
#[test]
fn codec_3_masks_the_frame_fields_a_block_can_count_again() {
    let first: BatchSpec = vec![(1, b"one".to_vec(), 1, None), (2, b"two".to_vec(), 1, None)];
    let second: BatchSpec = vec![(1, b"three".to_vec(), 1, None)];
    let (image, starts) = encode(9, &[(first, Synced::Own), (second, Synced::Header)]);
    let data = &image[SEGMENT_HEADER_LEN..];
    let frames = Masking::RecordsAndFrames;
    // The second batch starts a block; the first block ends there.
    let second_at = starts[4];
    let masked = mask_blocks(data, &[second_at, image.len()], frames).expect("masks");
    let b1 = &masked[..second_at - SEGMENT_HEADER_LEN];
    // batch_len, record_count and synced_through (its own offset): zeros.
    assert_eq!(&b1[8..24], &[0; 16]);
    let b2 = &masked[second_at - SEGMENT_HEADER_LEN..];
    assert_eq!(&b2[8..16], &[0; 8]);
    // Attesting the segment header alone: 64 XOR its offset.
    assert_eq!(
        u64::from_le_bytes(b2[16..24].try_into().expect("8 bytes")),
        64 ^ second_at as u64
    );
    for (block, from) in [(b1, SEGMENT_HEADER_LEN), (b2, second_at)] {
        let mut again = block.to_vec();
        unmask_block(9, from as u64, &mut again, frames, Checksums::Restore).expect("unmasks");
        assert_eq!(&again[..], &image[from..from + block.len()]);
    }

    // Cut inside the first batch (at its second record): its header keeps length and count.
    let cut = starts[2];
    let masked = mask_blocks(data, &[cut, image.len()], frames).expect("masks");
    assert_eq!(
        u32::from_le_bytes(masked[8..12].try_into().expect("4 bytes")) as usize,
        second_at - SEGMENT_HEADER_LEN
    );
    assert_eq!(
        u32::from_le_bytes(masked[12..16].try_into().expect("4 bytes")),
        2
    );
    let mut block = masked[..cut - SEGMENT_HEADER_LEN].to_vec();
    unmask_block(
        9,
        SEGMENT_HEADER_LEN as u64,
        &mut block,
        frames,
        Checksums::Restore,
    )
    .expect("unmasks");
    assert_eq!(&block[..], &image[SEGMENT_HEADER_LEN..cut]);
    // The same header with its length zeroed has no trailer in this block to count to.
    let mut no_trailer = masked[..cut - SEGMENT_HEADER_LEN].to_vec();
    no_trailer[8..16].fill(0);
    assert!(unmask_block(
        9,
        SEGMENT_HEADER_LEN as u64,
        &mut no_trailer,
        frames,
        Checksums::Restore
    )
    .is_err());

    // A count stored without its length is not a masked header.
    let whole = mask_blocks(data, &[image.len()], frames).expect("masks");
    let mut bad = whole.clone();
    bad[12] = 1;
    assert!(unmask_block(
        9,
        SEGMENT_HEADER_LEN as u64,
        &mut bad,
        frames,
        Checksums::Restore
    )
    .is_err());
    // Codec 2 leaves the frame fields as they are.
    let records = mask_blocks(data, &[image.len()], Masking::Records).expect("masks");
    assert_eq!(
        &records[8..24],
        &image[SEGMENT_HEADER_LEN + 8..SEGMENT_HEADER_LEN + 24]
    );
}

/// A block unmasked whole (its checksums computed) is no block for
/// `read_record_of_checked_block`, which reads a record only where masking's zero is still
/// in its checksum field; the same block unmasked for reading reads.
#[test]
fn a_record_with_its_checksum_is_refused_as_one_of_a_checked_block() {
    let batch: BatchSpec = vec![(1, b"first".to_vec(), 1, None)];
    let e = encode_with_fields(9, &[(batch, Synced::Own)]);
    let cuts = [e.image.len()];
    let masked =
        mask_blocks(&e.image[SEGMENT_HEADER_LEN..], &cuts, Masking::Records).expect("masks");
    let record = e.records[0];
    let at = record - SEGMENT_HEADER_LEN;
    let mut whole = masked.clone();
    unmask_block(
        9,
        SEGMENT_HEADER_LEN as u64,
        &mut whole,
        Masking::Records,
        Checksums::Restore,
    )
    .expect("unmasks");
    assert!(read_record_of_checked_block(&whole[at..], record as u64).is_err());
    let mut fields = masked;
    unmask_block(
        9,
        SEGMENT_HEADER_LEN as u64,
        &mut fields,
        Masking::Records,
        Checksums::LeaveZero,
    )
    .expect("unmasks");
    let (header, payload) =
        read_record_of_checked_block(&fields[at..], record as u64).expect("reads");
    assert_eq!(
        (header.stream_id, header.seq, payload),
        (1, 0, &b"first"[..])
    );
}
