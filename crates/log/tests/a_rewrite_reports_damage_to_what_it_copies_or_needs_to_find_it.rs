//! A rewrite checksums only what it copies: every batch header and the framing of every batch,
//! and each record it keeps, never the payloads of the records it leaves behind. So damage to
//! a kept record, or to anything that tells where records are (a batch header, a record's
//! length, even a forged one whose checksums agree), stops the rewrite as corruption and leaves
//! the segment as it was; damage inside a record of a deleted stream goes away with that record,
//! unread, and the rewritten store verifies intact.

use std::path::Path;
use std::sync::Arc;

use sessionlog_format::{
    padded_len, segment_file_name, verify_batch, RecordView, SegmentCrc, BATCH_HEADER_LEN,
    CATALOG_STREAM, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use sessionlog_log::verify::verify_store;
use sessionlog_log::{
    Append, Durability, Error, Log, LogOptions, RealStorage, SegmentId, Seq, StreamId,
};

const SEGMENT_BYTES: u64 = 64 << 10;
const STREAMS: usize = 20;
const RECORDS: u32 = 40;
const KEPT: [usize; 2] = [3, 11];
/// A sealed segment in the middle of the store, mostly dead once the deletes are made.
const DAMAGED: SegmentId = SegmentId(2);

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES)
}

fn payload(stream: usize, i: u32) -> Vec<u8> {
    let mut p = format!("stream {stream} record {i};").into_bytes();
    p.resize(700 + (i as usize * 37 + stream * 11) % 400, b'a');
    p
}

/// Twenty streams written interleaved, `per_commit` streams' records to a batch.
fn fill(dir: &Path, per_commit: usize) -> Vec<StreamId> {
    let log = Log::open(dir, options()).expect("open");
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    let payloads: Vec<Vec<Vec<u8>>> = (0..RECORDS)
        .map(|i| (0..STREAMS).map(|s| payload(s, i)).collect())
        .collect();
    for row in &payloads {
        for (chunk, ps) in ids.chunks(per_commit).zip(row.chunks(per_commit)) {
            let appends: Vec<Append> = chunk
                .iter()
                .zip(ps)
                .map(|(id, p)| Append::new(*id, 1, p))
                .collect();
            log.commit(&appends, Durability::Buffered).expect("commit");
        }
    }
    log.close().expect("close");
    ids
}

fn segment_path(dir: &Path, id: SegmentId) -> std::path::PathBuf {
    dir.join(segment_file_name(id.0))
}

/// Every batch of a sealed segment file, with its offset and its records.
fn batches(file: &[u8], id: SegmentId) -> Vec<(usize, Vec<RecordView>)> {
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    // The footer that follows the last batch does not verify as one.
    while let Ok(b) = verify_batch(&file[at..], id.0, at as u64) {
        out.push((at, b.records().collect()));
        at = b.end_offset() as usize;
    }
    out
}

/// Whether the rewrite keeps `r`: a record of a kept stream, or a catalog record.
fn is_kept(ids: &[StreamId], r: &RecordView) -> bool {
    r.header.stream_id == CATALOG_STREAM || KEPT.iter().any(|&s| ids[s].0 == r.header.stream_id)
}

/// Deletes every stream but the kept ones, durably, and reclaims.
fn delete_and_reclaim(dir: &Path, ids: &[StreamId]) -> sessionlog_log::Result<()> {
    let log = Log::open(dir, options()).expect("open");
    for (s, id) in ids.iter().enumerate() {
        if !KEPT.contains(&s) {
            log.delete_stream(*id, Durability::Sync).expect("delete");
        }
    }
    let result = log.reclaim().map(|_| ());
    // Whatever the rewrite found, the records of the kept streams outside the damage read.
    assert_eq!(
        &log.read(ids[KEPT[1]], Seq(0)).expect("read").payload[..],
        &payload(KEPT[1], 0)[..]
    );
    log.close().expect("close");
    result
}

fn damage(dir: &Path, at: usize, byte: u8) -> Vec<u8> {
    let path = segment_path(dir, DAMAGED);
    let mut file = std::fs::read(&path).expect("read segment");
    file[at] ^= byte;
    std::fs::write(&path, &file).expect("write segment");
    file
}

/// The rewrite of the damaged segment failed with corruption at `offset`, and left the
/// segment file byte for byte as it was and no rewrite beside it.
fn assert_refused(dir: &Path, result: sessionlog_log::Result<()>, offset: u64, file: &[u8]) {
    match result {
        Err(Error::Corrupted {
            segment, offset: o, ..
        }) => {
            assert_eq!(segment, DAMAGED);
            assert_eq!(o, offset, "the error points at the damage");
        }
        other => panic!("reclaim must report the damage, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(segment_path(dir, DAMAGED)).expect("read"),
        file,
        "the damaged segment is left as it was"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rewrite"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_damaged_kept_record_in_a_mostly_dead_segment_is_reported_by_reclaim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = fill(dir.path(), 1);
    let file = std::fs::read(segment_path(dir.path(), DAMAGED)).expect("read");
    let r = batches(&file, DAMAGED)
        .into_iter()
        .flat_map(|(_, rs)| rs)
        .find(|r| is_kept(&ids, r))
        .expect("a kept record in the segment");
    // One bit of its payload.
    let file = damage(dir.path(), r.payload_offset() as usize + 10, 0x04);
    let result = delete_and_reclaim(dir.path(), &ids);
    assert_refused(dir.path(), result, r.offset, &file);
}

#[test]
fn a_damaged_dead_batch_header_is_reported_by_reclaim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = fill(dir.path(), 1);
    let file = std::fs::read(segment_path(dir.path(), DAMAGED)).expect("read");
    let (at, _) = batches(&file, DAMAGED)
        .into_iter()
        .find(|(_, rs)| !rs.iter().any(|r| is_kept(&ids, r)))
        .expect("a dead batch in the segment");
    // Its synced_through: without a verified header no batch after it can be found.
    let file = damage(dir.path(), at + 17, 0x01);
    let result = delete_and_reclaim(dir.path(), &ids);
    assert_refused(dir.path(), result, at as u64, &file);
}

#[test]
fn a_damaged_length_of_a_dead_record_is_reported_by_reclaim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = fill(dir.path(), 4);
    let file = std::fs::read(segment_path(dir.path(), DAMAGED)).expect("read");
    let (at, r) = batches(&file, DAMAGED)
        .into_iter()
        .flat_map(|(at, rs)| rs.into_iter().map(move |r| (at, r)))
        .find(|(_, r)| !is_kept(&ids, r))
        .expect("a dead record in the segment");
    // Its payload_len grows by 8: the records no longer frame the batch.
    let file = damage(dir.path(), r.offset as usize + 4, 0x08);
    let result = delete_and_reclaim(dir.path(), &ids);
    assert_refused(dir.path(), result, at as u64, &file);
}

#[test]
fn a_kept_record_hidden_inside_a_forged_dead_record_is_reported_by_reclaim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = fill(dir.path(), 4);
    let path = segment_path(dir.path(), DAMAGED);
    let mut file = std::fs::read(&path).expect("read");
    // A batch where a dead record is followed by a kept one: the dead record's length is made
    // to cover the kept record too, and the batch header to count one record less, its
    // checksum recomputed. The framing agrees; only the batch checksum, which the rewrite does
    // not compute for dead bytes, and the kept stream's chain can tell.
    let (at, dead, hidden) = batches(&file, DAMAGED)
        .into_iter()
        .find_map(|(at, rs)| {
            rs.windows(2)
                .find(|w| !is_kept(&ids, &w[0]) && is_kept(&ids, &w[1]))
                .map(|w| (at, w[0], w[1]))
        })
        .expect("a dead record before a kept one");
    let swallowed = padded_len(dead.header.payload_len as usize)
        + RECORD_HEADER_LEN
        + padded_len(hidden.header.payload_len as usize);
    let len_at = dead.offset as usize + 4;
    file[len_at..len_at + 4].copy_from_slice(&(swallowed as u32).to_le_bytes());
    let count_at = at + 12;
    let count = u32::from_le_bytes(file[count_at..count_at + 4].try_into().expect("4 bytes"));
    file[count_at..count_at + 4].copy_from_slice(&(count - 1).to_le_bytes());
    let mut crc = SegmentCrc::new(DAMAGED.0);
    crc.update(&(at as u64).to_le_bytes());
    crc.update(&file[at + 8..at + BATCH_HEADER_LEN]);
    file[at + 4..at + 8].copy_from_slice(&crc.finish().to_le_bytes());
    std::fs::write(&path, &file).expect("write");

    let result = delete_and_reclaim(dir.path(), &ids);
    match &result {
        Err(Error::Corrupted {
            segment, detail, ..
        }) => {
            assert_eq!(*segment, DAMAGED);
            assert!(
                detail.contains("a record of the stream is missing"),
                "the error says a kept record is missing: {detail}"
            );
        }
        other => panic!("reclaim must report the hidden record, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).expect("read"), file, "left as it was");
}

#[test]
fn damage_inside_a_dead_record_goes_with_it_and_the_rewritten_store_verifies_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = fill(dir.path(), 4);
    let file = std::fs::read(segment_path(dir.path(), DAMAGED)).expect("read");
    let r = batches(&file, DAMAGED)
        .into_iter()
        .flat_map(|(_, rs)| rs)
        .find(|r| !is_kept(&ids, r))
        .expect("a dead record in the segment");
    damage(dir.path(), r.payload_offset() as usize + 10, 0x04);
    let before = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(
        before.damages.iter().any(|d| d.segment == DAMAGED),
        "the damage is real and verify finds it: {:?}",
        before.damages
    );

    delete_and_reclaim(dir.path(), &ids).expect("the rewrite drops the damaged record unread");
    let after = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(after.is_intact(), "{:?}", after.damages);
    let log = Log::open(dir.path(), options()).expect("reopen");
    for s in KEPT {
        let got: Vec<Vec<u8>> = log
            .iter(ids[s], Seq(0), Seq(u64::MAX))
            .map(|r| r.expect("record").payload.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = (0..RECORDS).map(|i| payload(s, i)).collect();
        assert_eq!(got, want, "stream {s}");
    }
    log.close().expect("close");
}
