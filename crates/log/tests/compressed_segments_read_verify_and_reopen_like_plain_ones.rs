//! With compression on, reclaim rewrites every sealed segment into zstd blocks
//! (spec: segment.md#compressed-segments): the files shrink, every record reads back the same
//! by point read and by range, `verify` finds the store intact, the store reopens with or
//! without the option, a later rewrite keeps a compressed segment compressed, and a damaged
//! block is reported by `verify` and refused by open, never read as data, even one whose
//! stored checksum was made to match (its frame's content checksum fails).

use std::path::Path;
use std::sync::Arc;

use sessionlog_log::verify::verify_store;
use sessionlog_log::{
    Append, Compression, Durability, Error, Log, LogOptions, RealStorage, Seq, StreamId,
};

const STREAMS: usize = 6;
const RECORDS: u32 = 300;

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_preallocate(false)
}

/// JSON-like payloads that repeat their keys, as session events do.
fn payload(stream: usize, i: u32) -> Vec<u8> {
    format!(
        r#"{{"type":"message","seq":{i},"stream":{stream},"data":{{"role":"assistant","content":"step {i} of stream {stream}: reading the file and running the tests again","tokens":{}}}}}"#,
        (i * 31 + stream as u32 * 7) % 997
    )
    .into_bytes()
}

fn fill(log: &Log) -> Vec<StreamId> {
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    for i in 0..RECORDS {
        for (s, id) in ids.iter().enumerate() {
            let p = payload(s, i);
            log.commit(&[Append::new(*id, (i % 5) as u8, &p)], Durability::Buffered)
                .expect("commit");
        }
    }
    log.flush().expect("flush");
    ids
}

fn segment_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

/// The segment header's `format_version` (bytes 8..12). spec: segment.md#segment-header
fn version(file: &[u8]) -> u32 {
    u32::from_le_bytes(file[8..12].try_into().expect("header"))
}

fn check_every_record(log: &Log, ids: &[StreamId]) {
    for (s, id) in ids.iter().enumerate() {
        let all: Vec<Vec<u8>> = log
            .iter(*id, Seq(0), Seq(u64::MAX))
            .map(|r| r.expect("record").payload.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = (0..RECORDS).map(|i| payload(s, i)).collect();
        assert_eq!(all, want, "stream {s} by range");
        for seq in [0u32, 1, 77, 150, 151, RECORDS - 1] {
            let r = log.read(*id, Seq(u64::from(seq))).expect("point read");
            assert_eq!(&r.payload[..], &payload(s, seq)[..], "stream {s} seq {seq}");
            assert_eq!(r.kind, (seq % 5) as u8);
        }
    }
}

fn verify_intact(dir: &Path) {
    let report = verify_store(Arc::new(RealStorage), dir).expect("verify");
    assert!(report.is_intact(), "verify reports {:?}", report.damages);
}

#[test]
fn reclaim_compresses_sealed_segments_and_every_record_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let ids = fill(&log);
    let before = segment_files(dir.path());
    assert!(
        before.len() >= 4,
        "several sealed segments: {}",
        before.len()
    );
    // A record handed out before its segment is compressed keeps its bytes.
    let early = log.read(ids[2], Seq(3)).expect("read");

    let report = log.reclaim().expect("reclaim");
    assert_eq!(
        report.segments_compressed.len(),
        before.len() - 1,
        "every sealed segment, not the active one: {report:?}"
    );
    let after = segment_files(dir.path());
    let sealed_before: usize = before[..before.len() - 1].iter().map(|f| f.1.len()).sum();
    let sealed_after: usize = after[..after.len() - 1].iter().map(|f| f.1.len()).sum();
    assert!(
        sealed_after * 3 < sealed_before,
        "repetitive records compress: {sealed_after} of {sealed_before} bytes"
    );
    for (name, file) in &after[..after.len() - 1] {
        assert_eq!(version(file), 2, "{name} is compressed");
    }
    assert_eq!(
        version(&after[after.len() - 1].1),
        1,
        "the active segment is not"
    );
    assert_eq!(&early.payload[..], &payload(2, 3)[..]);
    check_every_record(&log, &ids);
    let again = log.reclaim().expect("reclaim again");
    assert!(again.segments_rewritten.is_empty(), "{again:?}");
    log.close().expect("close");
    verify_intact(dir.path());

    // Without the option the compressed segments are read as they are and stay compressed.
    let log = Log::open(dir.path(), options()).expect("reopen");
    check_every_record(&log, &ids);
    assert!(log
        .reclaim()
        .expect("reclaim")
        .segments_rewritten
        .is_empty());
    log.close().expect("close");
}

#[test]
fn a_rewrite_of_a_compressed_segment_keeps_it_compressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let ids = fill(&log);
    log.reclaim().expect("compress");
    log.close().expect("close");

    // Compression is off now; deleting most streams makes the segments mostly dead.
    let log = Log::open(dir.path(), options()).expect("reopen");
    for id in &ids[1..] {
        log.delete_stream(*id, Durability::Buffered)
            .expect("delete");
    }
    log.flush().expect("flush");
    let report = log.reclaim().expect("reclaim");
    assert!(!report.segments_rewritten.is_empty(), "{report:?}");
    assert!(report.segments_compressed.is_empty(), "{report:?}");
    let files = segment_files(dir.path());
    for (name, file) in &files[..files.len() - 1] {
        assert_eq!(version(file), 2, "{name} stays compressed");
    }
    check_every_record(&log, &ids[..1]);
    log.close().expect("close");
    verify_intact(dir.path());
}

/// A filled store whose sealed segments reclaim compressed, closed; and the path and bytes
/// of its compressed segment 2.
fn compressed_store() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    fill(&log);
    log.reclaim().expect("compress");
    log.close().expect("close");
    let path = dir.path().join(format!("{:020}.seg", 2));
    let file = std::fs::read(&path).expect("read");
    (dir, path, file)
}

#[test]
fn a_damaged_compressed_block_is_reported_and_refused() {
    let (dir, path, mut file) = compressed_store();
    // Flip one byte inside the first block of segment 2 (blocks start at offset 64).
    file[100] ^= 0x40;
    std::fs::write(&path, &file).expect("write");

    let report = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(
        report
            .damages
            .iter()
            .any(|d| d.segment.0 == 2 && d.what.contains("compressed")),
        "verify reports the block: {:?}",
        report.damages
    );
    // Open reads footers and directories, not blocks: the damage shows when the block is read.
    let log = Log::open(dir.path(), options()).expect("open");
    let id = log.stream_id("s0").expect("s0");
    let failed = log
        .iter(id, Seq(0), Seq(u64::MAX))
        .find_map(|r| r.err())
        .expect("a read of the damaged block fails");
    assert!(matches!(failed, Error::Corrupted { .. }), "{failed}");
    log.close().expect("close");
}

/// A reader of a masked block checks the block's stored checksum and the zstd frame's
/// content checksum, not the records' (spec: segment.md#reading-a-compressed-block). A block
/// whose frame decodes to its own bytes but whose content checksum is wrong, with the stored
/// checksum and the directory's made to match, is still refused when read.
#[test]
fn a_block_whose_content_checksum_fails_is_refused_though_its_stored_checksum_matches() {
    use sessionlog_format::{
        block_crc, segment_crc, CompressedLayout, BLOCK_DIRECTORY_TAIL_LEN, BLOCK_ENTRY_LEN,
        FOOTER_TRAILER_LEN,
    };
    let (dir, path, mut file) = compressed_store();
    let layout = CompressedLayout::decode(&file, 2).expect("a compressed segment");
    let entry = layout.blocks[0];
    // The frame ends with its 4-byte content checksum: flip a bit of it, then make the
    // block's stored checksum, and the directory's over the entries, match again.
    let stored = entry.stored_offset as usize..(entry.stored_offset + entry.stored_len) as usize;
    file[stored.end - 1] ^= 0x10;
    let crc = block_crc(2, u64::from(entry.stored_offset), &file[stored]);
    let footer_at = file.len() - FOOTER_TRAILER_LEN - layout.footer.footer_len();
    let tail_at = footer_at - BLOCK_DIRECTORY_TAIL_LEN;
    let dir_at = tail_at - BLOCK_ENTRY_LEN * layout.blocks.len();
    file[dir_at + 16..dir_at + 20].copy_from_slice(&crc.to_le_bytes());
    let mut covered = file[layout.dictionary.clone()].to_vec();
    covered.extend_from_slice(&file[dir_at..tail_at]);
    covered.extend_from_slice(&file[tail_at + 8..footer_at]);
    let directory = segment_crc(2, &covered);
    file[tail_at + 4..tail_at + 8].copy_from_slice(&directory.to_le_bytes());
    std::fs::write(&path, &file).expect("write");

    let log = Log::open(dir.path(), options()).expect("the directory verifies");
    let id = log.stream_id("s0").expect("s0");
    let mut read = 0u64;
    let failed = log
        .iter(id, Seq(0), Seq(u64::MAX))
        .find_map(|r| match r {
            Ok(_) => {
                read += 1;
                None
            }
            Err(e) => Some(e),
        })
        .expect("a read of the forged block fails");
    assert!(matches!(failed, Error::Corrupted { .. }), "{failed}");
    // Past the stored checksum, which matches: the frame fails its content checksum.
    assert!(
        failed.to_string().contains("does not decompress"),
        "{failed}"
    );
    // The first record the range read could not give lies in the forged block.
    assert!(
        matches!(log.read(id, Seq(read)), Err(Error::Corrupted { .. })),
        "a point read of seq {read}, in the forged block, fails"
    );
    log.close().expect("close");
}

#[test]
fn a_damaged_block_directory_is_refused_by_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    fill(&log);
    log.reclaim().expect("compress");
    log.close().expect("close");
    let path = dir.path().join(format!("{:020}.seg", 1));
    let mut file = std::fs::read(&path).expect("read");
    // The footer trailer says where the footer starts; the directory tail is right before it.
    let len = file.len();
    let footer_len = u64::from_le_bytes(file[len - 16..len - 8].try_into().expect("trailer"));
    let tail_at = len - 32 - footer_len as usize - 16;
    file[tail_at + 8] ^= 1; // block_count
    std::fs::write(&path, &file).expect("write");
    match Log::open(dir.path(), options()) {
        Err(Error::Corrupted { segment, .. }) => assert_eq!(segment.0, 1),
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("a damaged directory must be refused"),
    }
}

#[test]
fn records_larger_than_a_block_and_batches_spanning_blocks_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let id = log.create_stream("big").expect("create");
    let record = |i: usize| -> Vec<u8> {
        let mut p = format!("record {i} ").into_bytes();
        p.resize(1_000 + (i * 7_919) % 40_000, b'a' + (i % 26) as u8);
        p
    };
    // Batches of several records, some far larger than a block, over several segments.
    for chunk in 0..40 {
        let payloads: Vec<Vec<u8>> = (chunk * 3..chunk * 3 + 3).map(record).collect();
        let appends: Vec<Append<'_>> = payloads.iter().map(|p| Append::new(id, 1, p)).collect();
        log.commit(&appends, Durability::Buffered).expect("commit");
    }
    log.flush().expect("flush");
    let report = log.reclaim().expect("compress");
    assert!(report.segments_compressed.len() >= 2, "{report:?}");
    for i in 0..120 {
        let r = log.read(id, Seq(i as u64)).expect("point read");
        assert_eq!(&r.payload[..], &record(i)[..], "record {i}");
    }
    let all: Vec<Vec<u8>> = log
        .iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect();
    assert_eq!(all, (0..120).map(record).collect::<Vec<_>>());
    log.close().expect("close");
    verify_intact(dir.path());
}

#[test]
fn sealing_the_active_segment_lets_reclaim_compress_every_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let ids = fill(&log);
    let active_before = segment_files(dir.path()).len();
    assert!(
        log.seal_active().expect("seal"),
        "the active segment held records"
    );
    assert!(
        !log.seal_active().expect("seal again"),
        "a segment holding only its catalog checkpoint is not sealed"
    );
    let report = log.reclaim().expect("reclaim");
    assert_eq!(
        report.segments_compressed.len(),
        active_before,
        "every segment that held a record, the one sealed included: {report:?}"
    );
    let after = segment_files(dir.path());
    assert_eq!(after.len(), active_before + 1);
    for (name, file) in &after[..after.len() - 1] {
        assert_eq!(version(file), 2, "{name} is compressed");
    }
    check_every_record(&log, &ids);
    // Commits go on in the new active segment.
    let later = log.create_stream("later").expect("create");
    log.commit(&[Append::new(later, 1, b"after")], Durability::Sync)
        .expect("commit");
    log.close().expect("close");
    verify_intact(dir.path());
    let log = Log::open(dir.path(), options()).expect("reopen");
    check_every_record(&log, &ids);
    let last = log.read(later, Seq(0)).expect("read");
    assert_eq!(&last.payload[..], b"after");
    log.close().expect("close");
}
