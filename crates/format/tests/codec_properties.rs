//! Property tests of the codec: everything encoded decodes to what went in, and no input
//! bytes make a decoder panic.

use proptest::prelude::*;
use sessionlog_format::{
    decode_batch_header, decode_footer_trailer, decode_record_header, encode_footer, verify_batch,
    verify_record, BatchEncoder, CatalogEntry, CatalogOp, FooterView, IndexEntry, RecordHeader,
    SegmentHeader, StreamSummary,
};

fn record() -> impl Strategy<Value = (u64, u8, u8, Vec<u8>)> {
    (
        0u64..8,
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn batches_round_trip(seg in any::<u64>(), slot in 8u64..1_000_000, records in proptest::collection::vec(record(), 1..12)) {
        let offset = slot * 8;
        let mut buf = Vec::new();
        let mut enc = BatchEncoder::begin(&mut buf, seg, offset, offset / 2 / 8 * 8);
        let mut seqs = std::collections::HashMap::new();
        let mut expect = Vec::new();
        for (stream, kind, flags, payload) in &records {
            let seq = seqs.entry(*stream).or_insert(0u64);
            let h = RecordHeader { stream_id: *stream, seq: *seq, kind: *kind, flags: *flags, prev_offset: 0, payload_len: 0 };
            enc.push(h, payload);
            expect.push((*stream, *seq, *kind, *flags, payload.clone()));
            *seq += 1;
        }
        enc.finish();
        let view = verify_batch(&buf, seg, offset).expect("valid batch");
        let got: Vec<_> = view
            .records()
            .map(|r| (r.header.stream_id, r.header.seq, r.header.kind, r.header.flags, view.payload(&r).to_vec()))
            .collect();
        prop_assert_eq!(got, expect);
        for r in view.records() {
            let at = (r.offset - offset) as usize;
            prop_assert!(verify_record(&buf[at..], seg, r.offset).is_ok());
        }
    }

    #[test]
    fn segment_headers_round_trip(store_id in any::<[u8; 16]>(), segment_id in any::<u64>(), created in any::<u64>()) {
        let h = SegmentHeader { store_id, segment_id, created_unix_ms: created };
        prop_assert_eq!(SegmentHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn footers_round_trip(seg in any::<u64>(), streams in proptest::collection::vec((1u64..1000, 1u32..5, proptest::collection::vec(any::<u8>(), 0..40)), 0..20)) {
        let data_end = 1 << 16;
        let mut summaries = Vec::new();
        let mut index = Vec::new();
        let mut catalog = Vec::new();
        let mut sorted = streams.clone();
        sorted.sort_by_key(|s| s.0);
        sorted.dedup_by_key(|s| s.0);
        for (i, (id, entries, name)) in sorted.iter().enumerate() {
            summaries.push(StreamSummary { stream_id: *id, first_seq: 0, last_seq: u64::from(*entries) * 3, data_bytes: 99, first_offset: 64, last_offset: 4000, index_start: index.len() as u32, index_count: *entries });
            for e in 0..*entries {
                index.push(IndexEntry { seq: u64::from(e) * 3, offset: 64 + e * 100 });
            }
            catalog.push(CatalogEntry { op: [CatalogOp::Create, CatalogOp::Delete, CatalogOp::Rename][i % 3], stream_id: *id, seq: i as u64, name: name.clone() });
        }
        let mut bytes = vec![0u8; data_end];
        encode_footer(&mut bytes, seg, data_end as u64, &summaries, &index, &catalog);
        let view = FooterView::decode(&bytes, seg).expect("valid footer");
        prop_assert_eq!(view.stream_count as usize, summaries.len());
        for (i, s) in summaries.iter().enumerate() {
            prop_assert_eq!(view.stream(&bytes, i as u32), Some(*s));
        }
        for (i, e) in index.iter().enumerate() {
            prop_assert_eq!(view.index_entry(&bytes, i as u32), Some(*e));
        }
        prop_assert_eq!(view.catalog(&bytes).expect("catalog"), catalog);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048), seg in 0u64..4, offset in 0u64..4096) {
        let _ = SegmentHeader::decode(&bytes);
        let _ = decode_batch_header(&bytes, seg, offset);
        let _ = verify_batch(&bytes, seg, offset);
        let _ = decode_record_header(&bytes);
        let _ = verify_record(&bytes, seg, offset);
        let _ = decode_footer_trailer(&bytes, seg);
        if let Ok(layout) = sessionlog_format::CompressedLayout::decode(&bytes, seg) {
            for i in 0..layout.blocks.len().min(64) {
                let _ = layout.stored(&bytes, seg, i);
            }
            let _ = layout.block_holding(offset);
        }
        if let Ok(view) = FooterView::decode(&bytes, seg) {
            for i in 0..view.stream_count.min(64) {
                let _ = view.stream(&bytes, i);
            }
            let _ = view.catalog(&bytes);
        }
    }

    #[test]
    fn a_batch_with_arbitrary_damage_never_verifies_wrong_bytes(records in proptest::collection::vec(record(), 1..6), at in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let mut buf = Vec::new();
        let mut enc = BatchEncoder::begin(&mut buf, 3, 64, 64);
        for (i, (stream, kind, flags, payload)) in records.iter().enumerate() {
            enc.push(RecordHeader { stream_id: *stream, seq: i as u64, kind: *kind, flags: *flags, prev_offset: 0, payload_len: 0 }, payload);
        }
        enc.finish();
        let i = at.index(buf.len());
        buf[i] ^= xor;
        prop_assert!(verify_batch(&buf, 3, 64).is_err());
    }
}
