//! Golden byte vectors: every file in `format-spec/vectors/` is decoded here and its fields are
//! checked against the exact values `format-spec/vectors/README.md` lists, so the spec, the
//! files and the codec cannot drift apart. Where the encoder is deterministic, re-encoding the
//! decoded values reproduces the file byte for byte.
//!
//! The files are written once, by
//! `SESSIONLOG_REGENERATE_VECTORS=1 cargo test -p sessionlog-format --test golden_vectors`,
//! which writes only the files that are missing; a normal run only reads them. The engine-made segment holds a wall-clock creation time and
//! a random store id, so regenerating it changes [`ENGINE_STORE_ID`] and
//! [`ENGINE_CREATED_UNIX_MS`] (the run prints the new values) and the README's copy of them.
//! Regenerate only when the format version changes; old vectors then stay as fixtures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Once;

use sessionlog_format::{
    decode_batch_header, decode_footer_trailer, encode_footer, masked_crc, padded_len, segment_crc,
    segment_file_name, segment_format_version, unmask_block, verify_batch, verify_record,
    BatchEncoder, BatchHeader, CatalogCheckpoint, CatalogEntry, CatalogOp, CheckpointStream,
    Checksums, CompressedLayout, FooterView, IndexEntry, Masking, RecordHeader, SegmentHeader,
    StreamSummary, BATCH_HEADER_LEN, CATALOG_STREAM, CODEC_ZSTD_MASKED, CODEC_ZSTD_MASKED_FRAMES,
    FOOTER_TRAILER_LEN, KIND_CATALOG_CHECKPOINT, KIND_CATALOG_CREATE, KIND_CATALOG_RENAME,
    SEGMENT_HEADER_LEN,
};

const REGENERATE_ENV: &str = "SESSIONLOG_REGENERATE_VECTORS";

const HEADER_FILE: &str = "segment_header.bin";
const BATCH_FILE: &str = "batch_three_records_two_streams.bin";
const CATALOG_FILE: &str = "batch_catalog_create.bin";
const RENAME_FILE: &str = "batch_catalog_rename.bin";
const CHECKPOINT_FILE: &str = "batch_catalog_checkpoint.bin";
const TINY_SEGMENT_FILE: &str = "tiny_sealed_segment.seg";
const ENGINE_SEGMENT_FILE: &str = "engine_sealed_segment_00000000000000000001.seg";
const ENGINE_REWRITTEN_FILE: &str = "engine_rewritten_segment_00000000000000000001.seg";
const ENGINE_COMPRESSED_FILE: &str = "engine_compressed_segment_00000000000000000001.seg";
const ENGINE_MASKED_FILE: &str = "engine_compressed_masked_segment_00000000000000000001.seg";
const ENGINE_CODEC3_FILE: &str = "engine_compressed_codec3_segment_00000000000000000001.seg";

/// Store id the engine drew when the engine-made segment was generated.
const ENGINE_STORE_ID: [u8; 16] = [
    0x04, 0xE5, 0x56, 0x69, 0x1B, 0xBC, 0x9D, 0x03, 0x71, 0x22, 0xDB, 0xE9, 0xF0, 0x78, 0xBD, 0x24,
];
/// Wall-clock time in the engine-made segment's header.
const ENGINE_CREATED_UNIX_MS: u64 = 1_796_007_549_028;
/// Index interval the engine used (the default).
const ENGINE_INDEX_INTERVAL_BYTES: u64 = 4096;

fn u32_le(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../format-spec/vectors")
}

/// The bytes of one vector file, writing every file first when regeneration was asked for.
fn vector(name: &str) -> Vec<u8> {
    static GENERATE: Once = Once::new();
    GENERATE.call_once(|| {
        if std::env::var_os(REGENERATE_ENV).is_some() {
            generate::all(&vectors_dir());
        }
    });
    let path = vectors_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with {REGENERATE_ENV}=1 to write it",
            path.display()
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The values the codec-made vectors encode. The generator encodes these; the tests decode the
// files and compare against them.

fn header_value() -> SegmentHeader {
    SegmentHeader {
        store_id: [
            0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D,
            0x1E, 0x1F,
        ],
        segment_id: 7,
        created_unix_ms: 1_700_000_000_000,
    }
}

/// A record as a vector lists it: where it is, its header, its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: u64,
    header: RecordHeader,
    payload: Vec<u8>,
}

fn rec(offset: u64, stream_id: u64, seq: u64, kind: u8, flags: u8, prev: u32, p: &[u8]) -> Rec {
    Rec {
        offset,
        header: RecordHeader {
            stream_id,
            seq,
            kind,
            flags,
            prev_offset: prev,
            payload_len: p.len() as u32,
        },
        payload: p.to_vec(),
    }
}

/// A batch as a vector lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Batch {
    segment_id: u64,
    offset: u64,
    header: BatchHeader,
    records: Vec<Rec>,
}

fn three_record_batch() -> Batch {
    Batch {
        segment_id: 7,
        offset: 64,
        header: BatchHeader {
            batch_len: 160,
            record_count: 3,
            synced_through: 64,
        },
        records: vec![
            rec(96, 1, 0, 0x01, 0x00, 0, b"hello"),
            rec(136, 2, 0, 0x02, 0x01, 0, b"{\"a\":1}"),
            rec(176, 1, 1, 0x03, 0x00, 96, b"world!!!"),
        ],
    }
}

fn catalog_payload(stream_id: u64, name: &[u8]) -> Vec<u8> {
    let mut p = stream_id.to_le_bytes().to_vec();
    p.extend_from_slice(name);
    p
}

fn catalog_batch() -> Batch {
    Batch {
        segment_id: 1,
        offset: 64,
        header: BatchHeader {
            batch_len: 96,
            record_count: 1,
            synced_through: 64,
        },
        records: vec![rec(
            96,
            CATALOG_STREAM,
            0,
            KIND_CATALOG_CREATE,
            0,
            0,
            &catalog_payload(1, b"session-a"),
        )],
    }
}

/// The rename that publishes stream 1 (created as `session-a`) as `session-b`: the second
/// catalog record of the store, in a batch of its own after the create's batch.
fn rename_batch() -> Batch {
    Batch {
        segment_id: 1,
        offset: 160,
        header: BatchHeader {
            batch_len: 96,
            record_count: 1,
            synced_through: 160,
        },
        records: vec![rec(
            192,
            CATALOG_STREAM,
            1,
            KIND_CATALOG_RENAME,
            0,
            96,
            &catalog_payload(1, b"session-b"),
        )],
    }
}

/// The live catalog of a store whose first segment created `session-a` (id 1), wrote two
/// records to it, renamed it `session-b`, created `scratch` (id 2) and deleted it: catalog
/// records 0 to 3.
fn checkpoint_value() -> CatalogCheckpoint {
    CatalogCheckpoint {
        next_stream_id: 3,
        streams: vec![CheckpointStream {
            stream_id: 1,
            next_seq: 2,
            name: b"session-b".to_vec(),
        }],
    }
}

/// The checkpoint that starts segment 2 of that store: catalog seq 4, the first batch.
fn checkpoint_batch() -> Batch {
    Batch {
        segment_id: 2,
        offset: 64,
        header: BatchHeader {
            batch_len: 120,
            record_count: 1,
            synced_through: 64,
        },
        records: vec![rec(
            96,
            CATALOG_STREAM,
            4,
            KIND_CATALOG_CHECKPOINT,
            0,
            0,
            &checkpoint_value().encode(),
        )],
    }
}

fn tiny_header() -> SegmentHeader {
    SegmentHeader {
        store_id: [0xA5; 16],
        segment_id: 3,
        created_unix_ms: 1_700_000_000_000,
    }
}

fn tiny_batches() -> [Batch; 2] {
    [
        Batch {
            segment_id: 3,
            offset: 64,
            header: BatchHeader {
                batch_len: 88,
                record_count: 1,
                synced_through: 64,
            },
            records: vec![rec(
                96,
                CATALOG_STREAM,
                0,
                KIND_CATALOG_CREATE,
                0,
                0,
                &catalog_payload(1, b"alpha"),
            )],
        },
        Batch {
            segment_id: 3,
            offset: 152,
            header: BatchHeader {
                batch_len: 120,
                record_count: 2,
                synced_through: 152,
            },
            records: vec![
                rec(184, 1, 0, 0x01, 0x00, 0, b"first"),
                rec(224, 1, 1, 0x01, 0x00, 184, b"second"),
            ],
        },
    ]
}

/// The footer of the tiny segment: stream summaries, the whole index, the catalog entries.
type Footer = (Vec<StreamSummary>, Vec<IndexEntry>, Vec<CatalogEntry>);

fn tiny_footer() -> Footer {
    (
        vec![
            StreamSummary {
                stream_id: 0,
                first_seq: 0,
                last_seq: 0,
                data_bytes: 48,
                first_offset: 96,
                last_offset: 96,
                index_start: 0,
                index_count: 1,
            },
            StreamSummary {
                stream_id: 1,
                first_seq: 0,
                last_seq: 1,
                data_bytes: 80,
                first_offset: 184,
                last_offset: 224,
                index_start: 1,
                index_count: 1,
            },
        ],
        vec![
            IndexEntry { seq: 0, offset: 96 },
            IndexEntry {
                seq: 0,
                offset: 184,
            },
        ],
        vec![CatalogEntry {
            op: CatalogOp::Create,
            stream_id: 1,
            seq: 0,
            name: b"alpha".to_vec(),
        }],
    )
}

// ---------------------------------------------------------------------------------------------
// Encoding and decoding helpers shared by the generator and the tests.

fn encode_batch(b: &Batch) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut enc = BatchEncoder::begin(&mut buf, b.segment_id, b.offset, b.header.synced_through);
    for r in &b.records {
        let at = enc.push(r.header, &r.payload);
        assert_eq!(at, r.offset, "record lands where the vector says");
    }
    enc.finish();
    buf
}

/// Verifies the batch at the start of `bytes` and lists it.
fn decode_batch(bytes: &[u8], segment_id: u64, offset: u64) -> Batch {
    let view = verify_batch(bytes, segment_id, offset).expect("batch verifies");
    Batch {
        segment_id,
        offset,
        header: view.header,
        records: view
            .records()
            .map(|r| Rec {
                offset: r.offset,
                header: r.header,
                payload: view.payload(&r).to_vec(),
            })
            .collect(),
    }
}

fn encode_tiny_segment() -> Vec<u8> {
    let mut seg = tiny_header().encode().to_vec();
    for b in tiny_batches() {
        assert_eq!(seg.len() as u64, b.offset);
        seg.extend_from_slice(&encode_batch(&b));
    }
    let (streams, index, catalog) = tiny_footer();
    let data_end = seg.len() as u64;
    encode_footer(&mut seg, 3, data_end, &streams, &index, &catalog);
    seg
}

/// Reads a verified footer back into owned values.
fn decode_footer(seg: &[u8], view: &FooterView) -> Footer {
    let streams = (0..view.stream_count)
        .map(|i| view.stream(seg, i).expect("stream summary"))
        .collect();
    let index = (0..view.index_entry_count)
        .map(|i| view.index_entry(seg, i).expect("index entry"))
        .collect();
    (streams, index, view.catalog(seg).expect("catalog"))
}

/// Every batch of a segment from its header to `data_end`, in order.
fn decode_all_batches(seg: &[u8], segment_id: u64, data_end: u64) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER_LEN as u64;
    while at < data_end {
        let b = decode_batch(&seg[at as usize..data_end as usize], segment_id, at);
        at += u64::from(b.header.batch_len);
        out.push(b);
    }
    assert_eq!(at, data_end, "batches end exactly where the footer starts");
    out
}

/// Checks that every index entry of every stream names a record of that stream with that seq,
/// and that the `prev_offset` links lead from each stream's last record back to its first.
fn check_index_points_at_records(
    seg: &[u8],
    segment_id: u64,
    streams: &[StreamSummary],
    index: &[IndexEntry],
) {
    for s in streams {
        let entries = &index[s.index_start as usize..(s.index_start + s.index_count) as usize];
        assert_eq!(
            entries[0].offset, s.first_offset,
            "the first record is indexed"
        );
        assert_eq!(entries[0].seq, s.first_seq);
        for e in entries {
            let (h, _) = verify_record(&seg[e.offset as usize..], segment_id, u64::from(e.offset))
                .expect("indexed record verifies");
            assert_eq!((h.stream_id, h.seq), (s.stream_id, e.seq), "entry {e:?}");
        }
        for pair in entries.windows(2) {
            assert!(pair[0].seq < pair[1].seq && pair[0].offset < pair[1].offset);
        }
        // Walk the links back from the last record.
        let (mut offset, mut seq) = (s.last_offset, s.last_seq);
        loop {
            let (h, _) = verify_record(&seg[offset as usize..], segment_id, u64::from(offset))
                .expect("linked record verifies");
            assert_eq!((h.stream_id, h.seq), (s.stream_id, seq));
            if seq == s.first_seq {
                assert_eq!(offset, s.first_offset);
                assert_eq!(
                    h.prev_offset, 0,
                    "a stream's first record in a segment links nowhere"
                );
                break;
            }
            offset = h.prev_offset;
            seq -= 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn masked_crc_matches_the_spec_example() {
    // CRC-32 (IEEE) of "123456789" is the classic check value 0xCBF43926.
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    assert_eq!(
        masked_crc(0xCBF4_3926),
        0xCBF4_3926u32.rotate_right(15).wrapping_add(0x9E37_79B9)
    );
    assert_eq!(masked_crc(0xCBF4_3926), 0x1085_11A1);
    // The segment id's eight little-endian bytes come first.
    let mut h = crc32fast::Hasher::new();
    h.update(&7u64.to_le_bytes());
    h.update(b"123456789");
    assert_eq!(segment_crc(7, b"123456789"), masked_crc(h.finalize()));
    assert_eq!(segment_crc(7, b"123456789"), 0xDF35_02BA);
}

#[test]
fn segment_header_vector_decodes_to_its_fields() {
    let bytes = vector(HEADER_FILE);
    assert_eq!(bytes.len(), SEGMENT_HEADER_LEN);
    assert_eq!(&bytes[0..8], b"SESSLOG\0");
    assert_eq!(&bytes[8..12], &1u32.to_le_bytes(), "format version 1");
    assert_eq!(&bytes[12..16], &64u32.to_le_bytes(), "header_len");
    assert_eq!(&bytes[48..60], &[0u8; 12], "reserved");
    assert_eq!(u32_le(&bytes, 60), 0xE27F_78C5, "header_crc");
    let header = SegmentHeader::decode(&bytes).expect("header verifies");
    assert_eq!(header, header_value());
    assert_eq!(
        header.encode().as_slice(),
        bytes.as_slice(),
        "re-encoding reproduces the bytes"
    );
}

#[test]
fn three_record_batch_vector_decodes_to_its_records() {
    let bytes = vector(BATCH_FILE);
    let want = three_record_batch();
    assert_eq!(bytes.len(), 160);
    assert_eq!(
        decode_batch_header(&bytes, 7, 64).expect("header verifies"),
        want.header
    );
    let got = decode_batch(&bytes, 7, 64);
    assert_eq!(got, want);
    assert_eq!(&bytes[0..4], b"SLB1");
    assert_eq!(&bytes[156..160], b"SLBE");
    assert_eq!(u32_le(&bytes, 4), 0x28FC_21D2, "header_crc");
    assert_eq!(u32_le(&bytes, 152), 0x45D0_7507, "batch_crc");
    let record_crcs = [32, 72, 112].map(|at| u32_le(&bytes, at));
    assert_eq!(record_crcs, [0x486D_5620, 0x6A0F_275B, 0x2757_01A6]);
    assert_eq!(
        encode_batch(&got),
        bytes,
        "re-encoding reproduces the bytes"
    );
}

#[test]
fn catalog_create_vector_decodes_to_a_name_binding() {
    let bytes = vector(CATALOG_FILE);
    let got = decode_batch(&bytes, 1, 64);
    assert_eq!(got, catalog_batch());
    let r = &got.records[0];
    assert_eq!(r.header.stream_id, CATALOG_STREAM);
    assert_eq!(r.header.kind, 0xF0);
    assert_eq!(r.payload[..8], 1u64.to_le_bytes());
    assert_eq!(&r.payload[8..], b"session-a");
    assert_eq!(u32_le(&bytes, 4), 0x587A_BB76, "header_crc");
    assert_eq!(u32_le(&bytes, 32), 0xA2B4_3019, "record_crc");
    assert_eq!(u32_le(&bytes, 88), 0xFC30_EDF6, "batch_crc");
    assert_eq!(
        encode_batch(&got),
        bytes,
        "re-encoding reproduces the bytes"
    );
}

const RENAME_HEADER_CRC: u32 = 0xF710_3AB6;
const RENAME_RECORD_CRC: u32 = 0x36CF_8423;
const RENAME_BATCH_CRC: u32 = 0xA95D_53BE;

const CHECKPOINT_HEADER_CRC: u32 = 0xFA8B_C7C1;
const CHECKPOINT_RECORD_CRC: u32 = 0xB14F_B9C5;
const CHECKPOINT_BATCH_CRC: u32 = 0xB4E8_B754;

#[test]
fn catalog_rename_vector_decodes_to_a_new_name_for_the_same_stream() {
    let bytes = vector(RENAME_FILE);
    let got = decode_batch(&bytes, 1, 160);
    assert_eq!(got, rename_batch());
    let r = &got.records[0];
    assert_eq!((r.header.stream_id, r.header.seq), (CATALOG_STREAM, 1));
    assert_eq!(r.header.kind, 0xF2);
    assert_eq!(r.payload[..8], 1u64.to_le_bytes());
    assert_eq!(&r.payload[8..], b"session-b");
    assert_eq!(u32_le(&bytes, 4), RENAME_HEADER_CRC, "header_crc");
    assert_eq!(u32_le(&bytes, 32), RENAME_RECORD_CRC, "record_crc");
    assert_eq!(u32_le(&bytes, 88), RENAME_BATCH_CRC, "batch_crc");
    assert_eq!(
        encode_batch(&got),
        bytes,
        "re-encoding reproduces the bytes"
    );
    assert!(verify_batch(&bytes, 1, 64).is_err(), "another offset");
}

#[test]
fn catalog_checkpoint_vector_decodes_to_the_live_catalog() {
    let bytes = vector(CHECKPOINT_FILE);
    assert_eq!(bytes.len(), 120);
    let got = decode_batch(&bytes, 2, 64);
    assert_eq!(got, checkpoint_batch());
    let r = &got.records[0];
    assert_eq!((r.header.stream_id, r.header.seq), (CATALOG_STREAM, 4));
    assert_eq!(r.header.kind, 0xF3);
    assert_eq!(r.payload.len(), 41);
    assert_eq!(r.payload[..8], 3u64.to_le_bytes(), "next_stream_id");
    assert_eq!(r.payload[8..12], 1u32.to_le_bytes(), "stream_count");
    assert_eq!(r.payload[12..20], 1u64.to_le_bytes(), "stream_id");
    assert_eq!(r.payload[20..28], 2u64.to_le_bytes(), "next_seq");
    assert_eq!(r.payload[28..32], 9u32.to_le_bytes(), "name_len");
    assert_eq!(&r.payload[32..], b"session-b");
    assert_eq!(
        CatalogCheckpoint::decode(&r.payload),
        Ok(checkpoint_value())
    );
    assert_eq!(u32_le(&bytes, 4), CHECKPOINT_HEADER_CRC, "header_crc");
    assert_eq!(u32_le(&bytes, 32), CHECKPOINT_RECORD_CRC, "record_crc");
    assert_eq!(u32_le(&bytes, 112), CHECKPOINT_BATCH_CRC, "batch_crc");
    assert_eq!(
        encode_batch(&got),
        bytes,
        "re-encoding reproduces the bytes"
    );
    assert!(verify_batch(&bytes, 1, 64).is_err(), "another segment");
}

#[test]
fn a_footer_lists_a_checkpoint_as_op_4_carrying_the_payload_after_next_stream_id() {
    let entry = checkpoint_value().to_entry(4);
    let data_end = 256usize;
    let mut seg = vec![0u8; data_end];
    encode_footer(
        &mut seg,
        2,
        data_end as u64,
        &[],
        &[],
        std::slice::from_ref(&entry),
    );
    let at = data_end + 32;
    assert_eq!(seg[at], 4, "footer op code of a checkpoint");
    assert_eq!(
        u32_le(&seg, at + 4),
        33,
        "name_len: the payload from byte 8 on"
    );
    assert_eq!(seg[at + 8..at + 16], 3u64.to_le_bytes(), "next_stream_id");
    assert_eq!(
        seg[at + 24..at + 57],
        checkpoint_value().encode()[8..],
        "the entry's name is the payload after next_stream_id"
    );
    let view = FooterView::decode(&seg, 2).expect("footer verifies");
    let listed = view.catalog(&seg).expect("catalog");
    assert_eq!(listed, vec![entry]);
    assert_eq!(
        CatalogCheckpoint::from_entry(&listed[0]),
        Ok(checkpoint_value())
    );
}

#[test]
fn a_footer_lists_a_rename_as_op_3_with_the_new_name() {
    let rename = CatalogEntry {
        op: CatalogOp::Rename,
        stream_id: 1,
        seq: 1,
        name: b"session-b".to_vec(),
    };
    let data_end = 256usize;
    let mut seg = vec![0u8; data_end];
    encode_footer(
        &mut seg,
        1,
        data_end as u64,
        &[],
        &[],
        std::slice::from_ref(&rename),
    );
    // The footer header is 32 bytes; with no streams and no index the catalog follows it.
    assert_eq!(seg[data_end + 32], 3, "footer op code of a rename");
    let view = FooterView::decode(&seg, 1).expect("footer verifies");
    assert_eq!(view.catalog(&seg).expect("catalog"), vec![rename]);
}

#[test]
fn vectors_are_bound_to_their_segment_and_offset() {
    let batch = vector(BATCH_FILE);
    assert!(verify_batch(&batch, 8, 64).is_err(), "another segment");
    assert!(verify_batch(&batch, 7, 72).is_err(), "another offset");
    let catalog = vector(CATALOG_FILE);
    assert!(verify_batch(&catalog, 2, 64).is_err());
    let tiny = vector(TINY_SEGMENT_FILE);
    assert!(FooterView::decode(&tiny, 4).is_err());
}

#[test]
fn tiny_sealed_segment_vector_decodes_header_batches_and_footer() {
    let seg = vector(TINY_SEGMENT_FILE);
    assert_eq!(seg.len(), 488);
    assert_eq!(SegmentHeader::decode(&seg).expect("header"), tiny_header());

    let trailer = decode_footer_trailer(&seg, 3).expect("trailer");
    assert_eq!(trailer.footer_offset, 272);
    assert_eq!(trailer.footer_len, 184);
    assert_eq!(trailer.segment_id, 3);
    assert_eq!(trailer.footer_crc, 0x889F_F56A);
    assert_eq!(seg.len() - FOOTER_TRAILER_LEN, 456);

    let view = FooterView::decode(&seg, 3).expect("footer verifies");
    assert_eq!(view.data_end, 272);
    assert_eq!(
        (
            view.stream_count,
            view.index_entry_count,
            view.catalog_count
        ),
        (2, 2, 1)
    );
    let footer = decode_footer(&seg, &view);
    assert_eq!(footer, tiny_footer());

    let batches = decode_all_batches(&seg, 3, view.data_end);
    assert_eq!(batches, tiny_batches().to_vec());
    check_index_points_at_records(&seg, 3, &footer.0, &footer.1);
    assert_eq!(
        encode_tiny_segment(),
        seg,
        "re-encoding reproduces the file"
    );
}

/// The payload the generator gives record `seq` of the stream named `name` (id `stream_id`):
/// self-describing text, then filler whose length and byte depend on the record.
fn engine_payload(name: &str, stream_id: u64, seq: u64) -> Vec<u8> {
    let mut p = format!("{name} {seq} ").into_bytes();
    let filler = 40 + ((seq * 37 + stream_id * 11) % 300) as usize;
    p.resize(p.len() + filler, b'a' + ((seq + stream_id) % 26) as u8);
    p
}

fn engine_kind(seq: u64) -> u8 {
    1 + (seq % 5) as u8
}

#[test]
fn engine_sealed_segment_decodes_and_its_index_points_at_the_right_records() {
    let seg = vector(ENGINE_SEGMENT_FILE);
    let header = SegmentHeader::decode(&seg).expect("header verifies");
    assert_eq!(header.segment_id, 1);
    assert_eq!(header.store_id, ENGINE_STORE_ID);
    assert_eq!(header.created_unix_ms, ENGINE_CREATED_UNIX_MS);
    assert_eq!(&header.encode()[..], &seg[..SEGMENT_HEADER_LEN]);

    let view = FooterView::decode(&seg, 1).expect("footer verifies");
    let (streams, index, catalog) = decode_footer(&seg, &view);
    assert_eq!(
        catalog,
        vec![
            CatalogEntry {
                op: CatalogOp::Create,
                stream_id: 1,
                seq: 0,
                name: b"alpha".to_vec(),
            },
            CatalogEntry {
                op: CatalogOp::Create,
                stream_id: 2,
                seq: 1,
                name: b"beta".to_vec(),
            },
        ]
    );
    assert_eq!(
        streams.iter().map(|s| s.stream_id).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "summaries sorted by stream id, the catalog stream included"
    );
    check_index_points_at_records(&seg, 1, &streams, &index);
    assert_eq!(seg.len(), 65_912);
    assert_eq!(view.data_end, 65_448);
    let trailer = decode_footer_trailer(&seg, 1).expect("trailer");
    assert_eq!((trailer.footer_len, trailer.footer_crc), (432, 0x3515_6ED4));
    let summary =
        |stream_id, last_seq, data_bytes, offsets: (u32, u32), index: (u32, u32)| StreamSummary {
            stream_id,
            first_seq: 0,
            last_seq,
            data_bytes,
            first_offset: offsets.0,
            last_offset: offsets.1,
            index_start: index.0,
            index_count: index.1,
        };
    assert_eq!(
        streams,
        vec![
            summary(0, 1, 96, (96, 184), (0, 1)),
            summary(1, 147, 34_464, (272, 65_136), (1, 9)),
            summary(2, 98, 22_824, (408, 65_312), (10, 6)),
        ]
    );
    let entries = |pairs: &[(u64, u32)]| -> Vec<IndexEntry> {
        pairs
            .iter()
            .map(|&(seq, offset)| IndexEntry { seq, offset })
            .collect()
    };
    let mut want_index = entries(&[(0, 96)]);
    want_index.extend(entries(&[
        (0, 272),
        (20, 8240),
        (37, 16_272),
        (54, 23_544),
        (72, 31_744),
        (91, 39_992),
        (109, 48_240),
        (126, 55_560),
        (144, 63_736),
    ]));
    want_index.extend(entries(&[
        (0, 408),
        (19, 12_608),
        (38, 25_352),
        (56, 37_176),
        (73, 48_776),
        (92, 61_336),
    ]));
    assert_eq!(index, want_index);

    // Walk every batch and check each record and the rules the engine follows.
    let names = BTreeMap::from([(1u64, "alpha"), (2u64, "beta")]);
    let batches = decode_all_batches(&seg, 1, view.data_end);
    let mut next_seq: BTreeMap<u64, u64> = BTreeMap::new();
    let mut last_offset: BTreeMap<u64, u64> = BTreeMap::new();
    let mut data_bytes: BTreeMap<u64, u64> = BTreeMap::new();
    let mut since_entry: BTreeMap<u64, u64> = BTreeMap::new();
    let mut rebuilt_index: BTreeMap<u64, Vec<IndexEntry>> = BTreeMap::new();
    let mut last_sync_end = SEGMENT_HEADER_LEN as u64;
    for b in &batches {
        // The generator commits two-record batches with `Sync` and everything else buffered,
        // so each batch attests exactly the end of the last two-record batch before it.
        assert_eq!(
            b.header.synced_through, last_sync_end,
            "batch at {}",
            b.offset
        );
        if b.header.record_count == 2 {
            last_sync_end = b.offset + u64::from(b.header.batch_len);
        }
        for r in &b.records {
            let h = r.header;
            let seq = next_seq.entry(h.stream_id).or_insert(0);
            assert_eq!(h.seq, *seq, "seqs are gap-free per stream");
            *seq += 1;
            let prev = last_offset.insert(h.stream_id, r.offset).unwrap_or(0);
            assert_eq!(
                u64::from(h.prev_offset),
                prev,
                "prev_offset links the stream"
            );
            if h.stream_id == CATALOG_STREAM {
                assert_eq!(h.kind, KIND_CATALOG_CREATE);
            } else {
                let name = names[&h.stream_id];
                assert_eq!(r.payload, engine_payload(name, h.stream_id, h.seq));
                assert_eq!(h.kind, engine_kind(h.seq));
                assert_eq!(h.flags, h.stream_id as u8);
            }
            // The sparse-index rule of segment.md#sparse-index.
            let bytes = 32 + padded_len(r.payload.len()) as u64;
            let since = since_entry.entry(h.stream_id).or_insert(u64::MAX);
            if *since >= ENGINE_INDEX_INTERVAL_BYTES {
                rebuilt_index
                    .entry(h.stream_id)
                    .or_default()
                    .push(IndexEntry {
                        seq: h.seq,
                        offset: r.offset as u32,
                    });
                *since = 0;
            }
            *since += bytes;
            *data_bytes.entry(h.stream_id).or_insert(0) += bytes;
        }
    }
    assert_eq!(batches.len(), 200);
    assert_eq!(batches.iter().filter(|b| b.records.len() == 2).count(), 49);
    assert_eq!(batches.iter().map(|b| b.records.len()).sum::<usize>(), 249);
    for s in &streams {
        assert_eq!(s.first_seq, 0);
        assert_eq!(s.last_seq + 1, next_seq[&s.stream_id]);
        assert_eq!(u64::from(s.last_offset), last_offset[&s.stream_id]);
        assert_eq!(s.data_bytes, data_bytes[&s.stream_id]);
        let stored = &index[s.index_start as usize..(s.index_start + s.index_count) as usize];
        assert_eq!(
            stored,
            &rebuilt_index[&s.stream_id][..],
            "stream {}",
            s.stream_id
        );
    }
    assert!(
        streams.iter().any(|s| s.index_count > 2),
        "the vector exercises more than one index entry per stream"
    );

    // Re-encoding every part reproduces the file.
    let mut again = header.encode().to_vec();
    for b in &batches {
        again.extend_from_slice(&encode_batch(b));
    }
    encode_footer(&mut again, 1, view.data_end, &streams, &index, &catalog);
    assert_eq!(again, seg, "re-encoding reproduces the file");
}

/// A record as (stream, seq, kind, flags, payload): what a rewrite must keep.
type RecordValue = (u64, u64, u8, u8, Vec<u8>);

/// A batch's records as [`RecordValue`]s.
fn record_values(b: &Batch) -> Vec<RecordValue> {
    b.records
        .iter()
        .map(|r| {
            let h = r.header;
            (h.stream_id, h.seq, h.kind, h.flags, r.payload.clone())
        })
        .collect()
}

#[test]
fn engine_rewritten_segment_keeps_exactly_the_live_records_of_the_sealed_one() {
    let old = vector(ENGINE_SEGMENT_FILE);
    let seg = vector(ENGINE_REWRITTEN_FILE);
    let header = SegmentHeader::decode(&seg).expect("header verifies");
    assert_eq!(header.segment_id, 1);
    let view = FooterView::decode(&seg, 1).expect("footer verifies");
    let (streams, index, catalog) = decode_footer(&seg, &view);
    let old_view = FooterView::decode(&old, 1).expect("old footer verifies");
    let (_, _, old_catalog) = decode_footer(&old, &old_view);
    assert_eq!(catalog, old_catalog, "catalog records are all kept");
    assert_eq!(
        streams.iter().map(|s| s.stream_id).collect::<Vec<_>>(),
        vec![0, 1],
        "the deleted stream 2 (beta) is gone"
    );
    check_index_points_at_records(&seg, 1, &streams, &index);
    assert_eq!(seg.len(), 40_968, "65,912 bytes before the rewrite");
    assert_eq!(view.data_end, 40_624);
    let trailer = decode_footer_trailer(&seg, 1).expect("trailer");
    assert_eq!((trailer.footer_len, trailer.footer_crc), (312, 0xCAA3_AAA0));

    // Batch by batch: the old batches that keep a record, with only the kept records, each
    // attesting its own offset (the file was durable before it became the segment).
    let batches = decode_all_batches(&seg, 1, view.data_end);
    let want: Vec<Vec<RecordValue>> = decode_all_batches(&old, 1, old_view.data_end)
        .iter()
        .map(|b| {
            record_values(b)
                .into_iter()
                .filter(|r| r.0 != 2)
                .collect::<Vec<_>>()
        })
        .filter(|rs| !rs.is_empty())
        .collect();
    assert_eq!(batches.iter().map(record_values).collect::<Vec<_>>(), want);
    let mut last_offset: BTreeMap<u64, u64> = BTreeMap::new();
    for b in &batches {
        assert_eq!(b.header.synced_through, b.offset);
        for r in &b.records {
            let prev = last_offset
                .insert(r.header.stream_id, r.offset)
                .unwrap_or(0);
            assert_eq!(
                u64::from(r.header.prev_offset),
                prev,
                "links at the new place"
            );
        }
    }

    // Re-encoding every part reproduces the file.
    let mut again = header.encode().to_vec();
    for b in &batches {
        again.extend_from_slice(&encode_batch(b));
    }
    encode_footer(&mut again, 1, view.data_end, &streams, &index, &catalog);
    assert_eq!(again, seg, "re-encoding reproduces the file");
}

#[test]
fn engine_compressed_segment_expands_to_a_sealed_segment_with_every_record_of_the_plain_one() {
    let old = vector(ENGINE_SEGMENT_FILE);
    let seg = vector(ENGINE_COMPRESSED_FILE);
    let header = SegmentHeader::decode(&seg).expect("header verifies");
    assert_eq!(header.segment_id, 1);
    assert_eq!(
        segment_format_version(&seg),
        Some(2),
        "a compressed segment"
    );
    let layout = CompressedLayout::decode(&seg, 1).expect("footer and directory verify");
    assert!(
        FooterView::decode(&seg, 1).is_err(),
        "the footer is at the end, not at the logical data_end"
    );
    assert!(!layout.blocks.is_empty());
    assert!(
        seg.len() * 2 < old.len(),
        "{} of {} bytes",
        seg.len(),
        old.len()
    );

    // The logical image: a version-1 header, every block decompressed, the footer and trailer.
    let mut image = header.encode().to_vec();
    for (i, b) in layout.blocks.iter().enumerate() {
        let stored = layout.stored(&seg, 1, i).expect("block checksum");
        let logical = zstd::bulk::decompress(stored, b.logical_len as usize).expect("zstd");
        assert_eq!(logical.len(), b.logical_len as usize);
        assert_eq!(image.len() as u64, u64::from(b.logical_offset));
        image.extend_from_slice(&logical);
    }
    let tail = layout.footer.footer_len() + FOOTER_TRAILER_LEN;
    image.extend_from_slice(&seg[seg.len() - tail..]);
    let view = FooterView::decode(&image, 1).expect("the logical image is a sealed segment");
    assert_eq!(
        (view.data_end, view.stream_count, view.index_entry_count),
        (
            layout.footer.data_end,
            layout.footer.stream_count,
            layout.footer.index_entry_count
        ),
        "the same footer, found at the end of the compressed file"
    );
    assert_eq!(seg.len(), 9_208, "65,912 bytes uncompressed");
    let (streams, index, catalog) = decode_footer(&image, &view);
    check_index_points_at_records(&image, 1, &streams, &index);

    // Nothing was deleted: every record of the plain segment, in its order, batch by batch,
    // each batch attesting its own offset (the file was durable before it became the segment).
    let old_view = FooterView::decode(&old, 1).expect("old footer");
    let (_, _, old_catalog) = decode_footer(&old, &old_view);
    assert_eq!(catalog, old_catalog);
    let batches = decode_all_batches(&image, 1, view.data_end);
    let want: Vec<Vec<RecordValue>> = decode_all_batches(&old, 1, old_view.data_end)
        .iter()
        .map(record_values)
        .collect();
    assert_eq!(batches.iter().map(record_values).collect::<Vec<_>>(), want);
    assert!(batches.iter().all(|b| b.header.synced_through == b.offset));

    // A flipped stored byte fails its block's checksum before anything is decompressed.
    let mut bad = seg.clone();
    bad[SEGMENT_HEADER_LEN + 3] ^= 1;
    assert!(layout.stored(&bad, 1, 0).is_err());
    // The directory is keyed with the segment number.
    assert!(CompressedLayout::decode(&seg, 2).is_err());
}

#[test]
fn engine_masked_segment_unmasks_block_by_block_to_the_engine_workload() {
    let masked_headers = check_masked_vector(ENGINE_MASKED_FILE, CODEC_ZSTD_MASKED);
    assert_eq!(
        masked_headers, 0,
        "codec 2 keeps every batch header's frame fields"
    );
}

#[test]
fn engine_codec3_segment_unmasks_block_by_block_to_the_engine_workload() {
    let masked_headers = check_masked_vector(ENGINE_CODEC3_FILE, CODEC_ZSTD_MASKED_FRAMES);
    assert!(
        masked_headers > 100,
        "{masked_headers} headers stored without their length"
    );
}

/// Checks a compressed vector of the engine workload whose blocks are masked with `codec`,
/// block by block; returns how many batch headers its masked blocks store without their
/// length (codec 3 masks a header's frame fields when its trailer is in the same block).
fn check_masked_vector(file: &str, codec: u8) -> usize {
    let masking = Masking::of_codec(codec).expect("a masking codec");
    let seg = vector(file);
    let header = SegmentHeader::decode(&seg).expect("header verifies");
    assert_eq!(segment_format_version(&seg), Some(2));
    let layout = CompressedLayout::decode(&seg, 1).expect("footer and directory verify");
    assert_eq!(layout.codec, codec);
    let dictionary = &seg[layout.dictionary.clone()];
    assert!(
        !dictionary.is_empty(),
        "a segment of {} blocks has a dictionary",
        layout.blocks.len()
    );
    assert_eq!(
        u32_le(dictionary, 0),
        0xEC30_A437,
        "a zstd dictionary (RFC 8878 section 5 magic)"
    );

    // Each block alone: its checksum, zstd with the dictionary, then unmasking.
    let mut image = header.encode().to_vec();
    let mut zeroed_checksums = 0;
    let mut masked_headers = 0;
    let mut d = zstd::bulk::Decompressor::with_dictionary(dictionary).expect("dictionary");
    for (i, b) in layout.blocks.iter().enumerate() {
        let stored = layout.stored(&seg, 1, i).expect("block checksum");
        let mut block = d.decompress(stored, b.logical_len as usize).expect("zstd");
        assert_eq!(block.len(), b.logical_len as usize);
        zeroed_checksums += usize::from(block[..4] == [0; 4]);
        masked_headers += block
            .windows(12)
            .filter(|w| w[..4] == *b"SLB1" && w[4..12] == [0; 8])
            .count();
        unmask_block(
            1,
            u64::from(b.logical_offset),
            &mut block,
            masking,
            Checksums::Restore,
        )
        .expect("unmasks");
        assert_eq!(image.len() as u64, u64::from(b.logical_offset));
        image.extend_from_slice(&block);
    }
    assert!(zeroed_checksums > 0, "blocks start with masked checksums");
    let tail = layout.footer.footer_len() + FOOTER_TRAILER_LEN;
    image.extend_from_slice(&seg[seg.len() - tail..]);
    let view = FooterView::decode(&image, 1).expect("the logical image is a sealed segment");
    let (streams, index, _) = decode_footer(&image, &view);
    check_index_points_at_records(&image, 1, &streams, &index);

    // Every batch verifies (a trailer whose batch began in an earlier block kept its stored
    // checksum), and every record is the workload's, each stream's seqs running on.
    let batches = decode_all_batches(&image, 1, view.data_end);
    let mut next: BTreeMap<u64, u64> = BTreeMap::new();
    let mut records = 0;
    for b in &batches {
        for r in &b.records {
            let h = r.header;
            if h.stream_id == CATALOG_STREAM {
                continue;
            }
            let seq = next.entry(h.stream_id).or_insert(0);
            assert_eq!(h.seq, *seq);
            *seq += 1;
            let name = ["alpha", "beta"][h.stream_id as usize - 1];
            assert_eq!(r.payload, engine_payload(name, h.stream_id, h.seq));
            assert_eq!((h.kind, h.flags), (engine_kind(h.seq), h.stream_id as u8));
            records += 1;
        }
    }
    assert!(records > 900, "{records} records");
    assert!(
        seg.len() * 4 < image.len(),
        "{} bytes for a logical image of {}",
        seg.len(),
        image.len()
    );

    // The dictionary is covered by the directory checksum.
    let mut bad = seg.clone();
    bad[layout.dictionary.start + 9] ^= 1;
    assert!(CompressedLayout::decode(&bad, 1).is_err());
    masked_headers
}

#[test]
fn a_torn_copy_of_every_vector_fails_to_verify() {
    let batch = vector(BATCH_FILE);
    for cut in 0..batch.len() {
        assert!(verify_batch(&batch[..cut], 7, 64).is_err(), "cut at {cut}");
    }
    let tiny = vector(TINY_SEGMENT_FILE);
    for cut in 0..tiny.len() {
        assert!(FooterView::decode(&tiny[..cut], 3).is_err(), "cut at {cut}");
    }
    let header = vector(HEADER_FILE);
    for cut in 0..header.len() {
        assert!(
            SegmentHeader::decode(&header[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    assert!(decode_batch_header(&[0u8; BATCH_HEADER_LEN], 7, 64).is_err());
}

mod generate {
    //! Writes every vector file. Run once, by setting `SESSIONLOG_REGENERATE_VECTORS=1`.

    use super::*;
    use sessionlog_log::{Append, Compression, Durability, Log, LogOptions, StreamId};

    pub fn all(dir: &Path) {
        std::fs::create_dir_all(dir).expect("vectors directory");
        // Only missing files are written: a vector, once committed, is a fixture that later
        // builds must keep decoding, and the engine-made one would change with every run.
        let write = |name: &str, bytes: &dyn Fn() -> Vec<u8>| {
            let path = dir.join(name);
            if !path.exists() {
                std::fs::write(path, bytes()).expect("write vector");
            }
        };
        write(HEADER_FILE, &|| header_value().encode().to_vec());
        write(BATCH_FILE, &|| encode_batch(&three_record_batch()));
        write(CATALOG_FILE, &|| encode_batch(&catalog_batch()));
        write(RENAME_FILE, &|| encode_batch(&rename_batch()));
        write(CHECKPOINT_FILE, &|| encode_batch(&checkpoint_batch()));
        write(TINY_SEGMENT_FILE, &encode_tiny_segment);
        write(ENGINE_SEGMENT_FILE, &engine_segment);
        write(ENGINE_REWRITTEN_FILE, &engine_rewritten_segment);
        write(ENGINE_COMPRESSED_FILE, &engine_compressed_segment);
        write(ENGINE_MASKED_FILE, &engine_compressed_masked_segment);
        write(ENGINE_CODEC3_FILE, &engine_compressed_masked_segment);
    }

    /// The same workload in segments of 256 KiB (enough blocks for a dictionary), then
    /// segment 1 compressed by a reclaim. The committed `ENGINE_MASKED_FILE` was written
    /// with codec 2; a build of today writes codec 3, `ENGINE_CODEC3_FILE`.
    fn engine_compressed_masked_segment() -> Vec<u8> {
        compressed_segment("masked", 256 << 10)
    }

    /// The same workload, then segment 1 compressed by a reclaim with compression on. The
    /// committed file was written with codec 1; a build of today would write codec 3.
    fn engine_compressed_segment() -> Vec<u8> {
        compressed_segment("compressed", 64 << 10)
    }

    /// Segment 1 of the workload's store in segments of `segment_bytes`, compressed by a
    /// reclaim of the store reopened with compression on.
    fn compressed_segment(what: &str, segment_bytes: u64) -> Vec<u8> {
        let (dir, log) = engine_store_sized(what, segment_bytes);
        log.close().expect("close");
        let options = LogOptions::default()
            .with_segment_size_bytes(segment_bytes)
            .with_preallocate(false)
            .with_compression(Compression::ZSTD);
        let log = Log::open(&dir, options).expect("reopen");
        let report = log.reclaim().expect("reclaim");
        assert_eq!(report.segments_compressed.len(), 1, "{report:?}");
        log.close().expect("close");
        let bytes = std::fs::read(dir.join(segment_file_name(1))).expect("compressed segment");
        std::fs::remove_dir_all(&dir).expect("remove temp store");
        bytes
    }

    /// A sealed segment made by the real engine: two streams, single- and two-record batches,
    /// small segments so the first one rolls.
    fn engine_segment() -> Vec<u8> {
        let (dir, log) = engine_store("sealed");
        log.close().expect("close");
        let bytes = std::fs::read(dir.join(segment_file_name(1))).expect("sealed segment");
        let header = SegmentHeader::decode(&bytes).expect("header");
        println!(
            "engine segment: store_id {:#04x?}, created_unix_ms {}",
            header.store_id, header.created_unix_ms
        );
        std::fs::remove_dir_all(&dir).expect("remove temp store");
        bytes
    }

    /// The same workload, then "beta" deleted and segment 1 rewritten by reclaim without it.
    fn engine_rewritten_segment() -> Vec<u8> {
        let (dir, log) = engine_store("rewritten");
        let beta = log.stream_id("beta").expect("beta");
        log.delete_stream(beta, Durability::Sync)
            .expect("delete beta");
        let report = log.reclaim().expect("reclaim");
        assert_eq!(report.segments_rewritten.len(), 1, "{report:?}");
        log.close().expect("close");
        let bytes = std::fs::read(dir.join(segment_file_name(1))).expect("rewritten segment");
        std::fs::remove_dir_all(&dir).expect("remove temp store");
        bytes
    }

    /// A store in a fresh temporary directory, filled until its first segment is sealed.
    fn engine_store(what: &str) -> (PathBuf, Log) {
        engine_store_sized(what, 64 << 10)
    }

    /// [`engine_store`] with segments of `segment_bytes`.
    fn engine_store_sized(what: &str, segment_bytes: u64) -> (PathBuf, Log) {
        let dir =
            std::env::temp_dir().join(format!("sessionlog-vectors-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Every segment the reclaim of the rewritten vector looks at is rewritten.
        let options = LogOptions::default()
            .with_segment_size_bytes(segment_bytes)
            .with_preallocate(false)
            .with_rewrite_below_live_percent(100);
        assert_eq!(
            u64::from(options.index_interval_bytes),
            ENGINE_INDEX_INTERVAL_BYTES
        );
        let log = Log::open(&dir, options).expect("open");
        let streams = [
            ("alpha", log.create_stream("alpha").expect("create alpha")),
            ("beta", log.create_stream("beta").expect("create beta")),
        ];
        let mut next = [0u64; 2];
        let second = dir.join(segment_file_name(2));
        let mut i = 0u64;
        while !second.exists() {
            let mut picks = vec![(i % 2) as usize];
            if i % 4 == 3 {
                picks = vec![0, 1];
            }
            let payloads: Vec<(StreamId, u64, Vec<u8>)> = picks
                .iter()
                .map(|&k| {
                    let (name, id) = streams[k];
                    let seq = next[k];
                    next[k] += 1;
                    (id, seq, engine_payload(name, id.0, seq))
                })
                .collect();
            let appends: Vec<Append<'_>> = payloads
                .iter()
                .map(|(id, seq, p)| Append {
                    flags: id.0 as u8,
                    ..Append::new(*id, engine_kind(*seq), p)
                })
                .collect();
            let durability = if appends.len() == 2 {
                Durability::Sync
            } else {
                Durability::Buffered
            };
            log.commit(&appends, durability).expect("commit");
            i += 1;
        }
        (dir, log)
    }
}
