//! Raw bytes into every decoder of the codec: segment header, batch header, batch frame,
//! record, footer trailer, footer and its sparse index and catalog. No input may panic.
//!
//! Checksums would stop a byte-level fuzzer at the first CRC, so the first input byte picks a
//! mode: decode the bytes as they are; fix the checksums of a batch frame first (so the
//! structural checks behind them are reached); fix the checksum of a footer first; encode
//! arbitrary records and footers and check that decoding gives them back; or fix a batch
//! frame's checksums as the first batch of a segment and, when it verifies, mask it as codec 2
//! or codec 3 does (the mode byte's next bit picks which) and check that unmasking gives it
//! back.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use sessionlog_format::{
    decode_batch_header, decode_footer_trailer, decode_record_header, encode_footer, mask_blocks,
    read_record_of_checked_block, unmask_block, verify_batch, verify_record, BatchEncoder,
    CatalogEntry, CatalogOp, Checksums, FooterView, IndexEntry, Masking, RecordHeader,
    SegmentHeader, StreamSummary, SEGMENT_HEADER_LEN,
};
use sessionlog_fuzz::{fix_batch_checksums, fix_footer_checksum};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((&place, bytes)) = rest.split_first() else {
        return;
    };
    // Small segment numbers and aligned offsets, as the engine uses them.
    let segment_id = u64::from(place & 0x0F);
    let offset = u64::from(place >> 4) * 8;
    match mode % 5 {
        0 => decode_everything(bytes, segment_id, offset),
        1 => {
            let mut frame = bytes.to_vec();
            fix_batch_checksums(&mut frame, segment_id, offset);
            decode_everything(&frame, segment_id, offset);
        }
        2 => {
            let mut seg = bytes.to_vec();
            fix_footer_checksum(&mut seg, segment_id);
            decode_everything(&seg, segment_id, offset);
        }
        3 => round_trip(bytes, segment_id, offset),
        _ => {
            let masking = if mode / 5 % 2 == 0 {
                Masking::Records
            } else {
                Masking::RecordsAndFrames
            };
            mask_round_trip(bytes, segment_id, masking)
        }
    }
});

/// A batch frame at offset 64 of a segment, masked as one block and unmasked again.
fn mask_round_trip(bytes: &[u8], segment_id: u64, masking: Masking) {
    let first = SEGMENT_HEADER_LEN as u64;
    let mut frame = bytes.to_vec();
    fix_batch_checksums(&mut frame, segment_id, first);
    let Ok(batch) = verify_batch(&frame, segment_id, first) else {
        return;
    };
    let data = &frame[..(batch.end_offset() - first) as usize];
    let mut block = mask_blocks(data, &[SEGMENT_HEADER_LEN + data.len()], masking)
        .expect("a verified batch masks");
    let mut fields = block.clone();
    unmask_block(segment_id, first, &mut block, masking, Checksums::Restore)
        .expect("its mask unmasks");
    assert_eq!(block, data, "unmasking gives the batch back");
    // Unmasked for reading, every record reads as it verifies in the batch itself.
    unmask_block(
        segment_id,
        first,
        &mut fields,
        masking,
        Checksums::LeaveZero,
    )
    .expect("its mask unmasks");
    for record in batch.records() {
        let at = (record.offset - first) as usize;
        let (header, payload) = read_record_of_checked_block(&fields[at..], record.offset)
            .expect("a record of a checked block reads");
        assert_eq!(header, record.header, "the header unmasked for reading");
        assert_eq!(payload, batch.payload(&record), "the payload");
    }
}

fn decode_everything(bytes: &[u8], segment_id: u64, offset: u64) {
    for masking in [Masking::Records, Masking::RecordsAndFrames] {
        for checksums in [Checksums::Restore, Checksums::LeaveZero] {
            let _ = unmask_block(segment_id, offset, &mut bytes.to_vec(), masking, checksums);
        }
    }
    if let Ok((header, payload)) = read_record_of_checked_block(bytes, offset) {
        assert_eq!(payload.len(), header.payload_len as usize);
    }
    if let Ok(layout) = sessionlog_format::CompressedLayout::decode(bytes, segment_id) {
        for i in 0..layout.blocks.len().min(64) {
            let _ = layout.stored(bytes, segment_id, i);
        }
        let _ = layout.block_holding(offset);
    }
    let _ = SegmentHeader::decode(bytes);
    let _ = decode_batch_header(bytes, segment_id, offset);
    let _ = decode_record_header(bytes);
    checkpoint_walk_agrees_with_decode(bytes);
    if let Ok((header, payload)) = verify_record(bytes, segment_id, offset) {
        assert_eq!(payload.len(), header.payload_len as usize);
    }
    if let Ok(batch) = verify_batch(bytes, segment_id, offset) {
        assert!(batch.bytes().len() <= bytes.len());
        assert_eq!(
            batch.end_offset(),
            offset + u64::from(batch.header.batch_len)
        );
        let mut count = 0u32;
        for record in batch.records() {
            let payload = batch.payload(&record);
            assert_eq!(payload.len(), record.header.payload_len as usize);
            count += 1;
        }
        assert_eq!(count, batch.header.record_count);
    }
    let _ = decode_footer_trailer(bytes, segment_id);
    if let Ok(footer) = FooterView::decode(bytes, segment_id) {
        for i in 0..footer.stream_count.min(1 << 12) {
            if let Some(summary) = footer.stream(bytes, i) {
                for j in 0..summary.index_count.min(1 << 12) {
                    let _ = footer.index_entry(bytes, summary.index_start.wrapping_add(j));
                }
            }
        }
        let _ = footer.catalog(bytes);
    }
}

#[derive(Debug, Arbitrary)]
struct ArbRecord {
    stream_id: u8,
    seq: u16,
    kind: u8,
    flags: u8,
    payload: Vec<u8>,
}

#[derive(Debug, Arbitrary)]
struct ArbCatalog {
    delete: bool,
    stream_id: u8,
    seq: u16,
    name: Vec<u8>,
}

/// Encodes arbitrary records and a footer; decoding must give back exactly what went in.
fn round_trip(bytes: &[u8], segment_id: u64, offset: u64) {
    let mut u = Unstructured::new(bytes);
    let Ok(records) = Vec::<ArbRecord>::arbitrary(&mut u) else {
        return;
    };
    let synced_through = offset.min(u64::from(u.arbitrary::<u16>().unwrap_or(0)));
    let mut buf = Vec::new();
    let mut encoder = BatchEncoder::begin(&mut buf, segment_id, offset, synced_through);
    let mut headers = Vec::new();
    let mut last_offset = std::collections::BTreeMap::new();
    for r in &records {
        // prev_offset must name the stream's previous record (or 0), as the writer sets it.
        let header = RecordHeader {
            stream_id: u64::from(r.stream_id),
            seq: u64::from(r.seq),
            kind: r.kind,
            flags: r.flags,
            prev_offset: last_offset.get(&r.stream_id).copied().unwrap_or(0),
            payload_len: r.payload.len() as u32,
        };
        let at = encoder.push(header, &r.payload);
        last_offset.insert(r.stream_id, at as u32);
        headers.push(header);
    }
    encoder.finish();
    let batch = verify_batch(&buf, segment_id, offset).expect("an encoded batch verifies");
    assert_eq!(batch.header.synced_through, synced_through);
    let decoded: Vec<_> = batch.records().collect();
    assert_eq!(decoded.len(), records.len());
    for ((view, header), r) in decoded.iter().zip(&headers).zip(&records) {
        assert_eq!(view.header, *header);
        assert_eq!(batch.payload(view), &r.payload[..]);
    }
    assert!(verify_batch(&buf, segment_id ^ 1, offset).is_err());

    // A footer over arbitrary summaries, index entries and catalog entries.
    let Ok(catalog) = Vec::<ArbCatalog>::arbitrary(&mut u) else {
        return;
    };
    let catalog: Vec<CatalogEntry> = catalog
        .into_iter()
        .map(|c| CatalogEntry {
            op: if c.delete {
                CatalogOp::Delete
            } else {
                CatalogOp::Create
            },
            stream_id: u64::from(c.stream_id),
            seq: u64::from(c.seq),
            name: if c.delete { Vec::new() } else { c.name },
        })
        .collect();
    let streams_wanted = u.arbitrary::<u8>().unwrap_or(0) % 8;
    let mut streams = Vec::new();
    let mut index = Vec::new();
    for s in 0..u64::from(streams_wanted) {
        let first_seq = u64::from(u.arbitrary::<u16>().unwrap_or(0));
        let count = u64::from(u.arbitrary::<u8>().unwrap_or(0)) + 1;
        let entries = 1 + u.arbitrary::<u8>().unwrap_or(0) % 4;
        let index_start = index.len() as u32;
        for e in 0..entries {
            index.push(IndexEntry {
                seq: first_seq + u64::from(e),
                offset: 64 + 8 * u32::from(e),
            });
        }
        streams.push(StreamSummary {
            stream_id: s + 1,
            first_seq,
            last_seq: first_seq + count - 1,
            data_bytes: 40 * count,
            first_offset: 64,
            last_offset: 64 + 40 * (count as u32 - 1),
            index_start,
            index_count: u32::from(entries),
        });
    }
    let mut seg = vec![0u8; offset as usize];
    let written = encode_footer(&mut seg, segment_id, offset, &streams, &index, &catalog);
    assert_eq!(seg.len(), offset as usize + written);
    // Whether the codec accepts these summaries is its business; a decoded footer must
    // give back exactly what was encoded.
    if let Ok(footer) = FooterView::decode(&seg, segment_id) {
        assert_eq!(footer.data_end, offset);
        assert_eq!(footer.stream_count as usize, streams.len());
        for (i, s) in streams.iter().enumerate() {
            assert_eq!(footer.stream(&seg, i as u32), Some(*s));
        }
        for (i, e) in index.iter().enumerate() {
            assert_eq!(footer.index_entry(&seg, i as u32), Some(*e));
        }
        assert_eq!(footer.catalog(&seg).expect("catalog decodes"), catalog);
    }
}

/// A catalog checkpoint payload decoded, and walked in place as the footer entry that carries
/// it: the walk visits exactly the streams the decode gives, and refuses what the decode
/// refuses except a name listed twice (which only the decode checks).
fn checkpoint_walk_agrees_with_decode(bytes: &[u8]) {
    let decoded = sessionlog_format::CatalogCheckpoint::decode(bytes);
    let Some((next, listed)) = bytes.split_first_chunk::<8>() else {
        assert!(decoded.is_err());
        return;
    };
    let entry = CatalogEntry {
        op: CatalogOp::Checkpoint,
        stream_id: u64::from_le_bytes(*next),
        seq: 0,
        name: listed.to_vec(),
    };
    let mut visited = Vec::new();
    let walked = sessionlog_format::CatalogCheckpoint::walk_entry(&entry, |id, next_seq, name| {
        visited.push((id, next_seq, name.to_vec()));
        true
    });
    match decoded {
        Ok(cp) => {
            assert_eq!(
                walked.ok(),
                Some(Some((cp.next_stream_id, cp.streams.len())))
            );
            let streams: Vec<_> = cp
                .streams
                .into_iter()
                .map(|s| (s.stream_id, s.next_seq, s.name))
                .collect();
            assert_eq!(visited, streams);
        }
        Err(_) => {
            if let Ok(Some(_)) = walked {
                let mut names: Vec<&Vec<u8>> = visited.iter().map(|(_, _, n)| n).collect();
                names.sort();
                assert!(
                    names.windows(2).any(|w| w[0] == w[1]),
                    "the walk accepted a checkpoint the decode refused, with distinct names"
                );
            }
        }
    }
}
