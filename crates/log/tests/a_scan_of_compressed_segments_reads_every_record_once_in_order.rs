//! An iteration over compressed sealed segments (spec: segment.md#compressed-segments) reads
//! blocks ahead on another thread once it goes from one block to the next. These tests pin
//! down that this changes nothing a reader sees: over several segments and hundreds of block
//! boundaries, for a stream that fills the blocks and for streams whose records are a few in
//! many blocks, every range reads back exactly as it did before compression (no record
//! missing, repeated or out of order), and a damaged block far into a segment, which the
//! read-ahead reaches before the reader, ends the scan with a corruption error after every
//! record before it, never a panic and never a silent gap.

use std::path::Path;

use sessionlog_log::{Append, Compression, Durability, Error, Log, LogOptions, Seq, StreamId};

/// The stream most records belong to, as a long session's do: its index entries lie in
/// nearly every block, so a scan of it has every block read ahead.
const DENSE: usize = 0;
/// A stream of short records, one in nearly every block: a scan of it reads block after
/// block, while its index entries (a few KiB of its own data apart) lie many blocks apart,
/// so the read-ahead has only some of the blocks it needs.
const SHORT: usize = 1;
/// Streams 2 and 3 have a record every few blocks.
const STREAMS: usize = 4;
const BATCHES: u32 = 3_000;

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(1 << 20)
        .with_preallocate(false)
}

/// A payload naming its stream and seq, of a length that varies from record to record so
/// that blocks hold different numbers of records.
fn payload(stream: usize, seq: u64) -> Vec<u8> {
    let repeats = match stream {
        SHORT => 1 + seq as usize % 2,
        _ => 1 + (seq as usize * 7 + stream * 3) % 40,
    };
    let filler = "reading the file and running the tests again; ".repeat(repeats);
    format!(r#"{{"stream":{stream},"seq":{seq},"text":"{filler}"}}"#).into_bytes()
}

/// Fills the log: each batch holds one to four records of the dense stream and one of the
/// short one, and every seventh batch one record of a sparse stream. Returns the streams
/// and their lengths.
fn fill(log: &Log) -> (Vec<StreamId>, Vec<u64>) {
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    let mut next = vec![0u64; STREAMS];
    let mut push = |records: &mut Vec<(usize, Vec<u8>)>, s: usize| {
        records.push((s, payload(s, next[s])));
        next[s] += 1;
    };
    for b in 0..BATCHES {
        let mut records = Vec::new();
        for _ in 0..1 + b % 4 {
            push(&mut records, DENSE);
        }
        push(&mut records, SHORT);
        if b % 7 == 0 {
            push(&mut records, 2 + (b as usize / 7) % (STREAMS - 2));
        }
        let appends: Vec<Append<'_>> = records
            .iter()
            .map(|(s, p)| Append::new(ids[*s], (p.len() % 7) as u8, p))
            .collect();
        log.commit(&appends, Durability::Buffered).expect("commit");
    }
    log.flush().expect("flush");
    (ids, next)
}

/// Every record of `stream` in `from..to`, as (seq, kind, payload), or the first error.
fn scan(log: &Log, stream: StreamId, from: u64, to: u64) -> Result<Vec<(u64, u8, Vec<u8>)>, Error> {
    log.iter(stream, Seq(from), Seq(to))
        .map(|r| r.map(|r| (r.seq.0, r.kind, r.payload.to_vec())))
        .collect()
}

fn segment_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
        .count()
}

/// The ranges read: whole streams, ranges starting and ending inside segments, and short
/// ones that end before a read-ahead would have got far.
fn ranges(len: u64) -> Vec<(u64, u64)> {
    vec![
        (0, u64::MAX),
        (len / 3, len),
        (len / 5, len / 2),
        (len / 2, len / 2 + 40),
        (len - 10, len),
    ]
}

#[test]
fn every_range_reads_the_same_records_before_and_after_compression() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let (ids, lens) = fill(&log);
    assert!(segment_count(dir.path()) >= 4, "several sealed segments");
    let mut before = Vec::new();
    for (s, id) in ids.iter().enumerate() {
        for (from, to) in ranges(lens[s]) {
            before.push(scan(&log, *id, from, to).expect("scan before"));
        }
    }
    // The plain scan is the generator's records, in seq order, each once.
    for (s, _) in ids.iter().enumerate() {
        let whole = &before[s * ranges(lens[s]).len()];
        let seqs: Vec<u64> = whole.iter().map(|r| r.0).collect();
        assert_eq!(seqs, (0..lens[s]).collect::<Vec<_>>(), "stream {s}");
        assert!(whole.iter().all(|r| r.2 == payload(s, r.0)), "stream {s}");
    }

    let report = log.reclaim().expect("compress");
    assert!(report.segments_compressed.len() >= 3, "{report:?}");
    let mut after = Vec::new();
    for (s, id) in ids.iter().enumerate() {
        for (from, to) in ranges(lens[s]) {
            after.push(scan(&log, *id, from, to).expect("scan after"));
        }
    }
    assert!(
        before == after,
        "compressed scans differ from the plain ones"
    );

    // Two iterations going on at once, with point reads between their steps, read what
    // each would alone.
    let mut dense = log.iter(ids[DENSE], Seq(0), Seq(u64::MAX));
    let mut sparse = log.iter(ids[2], Seq(0), Seq(u64::MAX));
    let mut seq = 0u64;
    for r in dense.by_ref() {
        let r = r.expect("dense record");
        assert_eq!((r.seq.0, &r.payload[..]), (seq, &payload(DENSE, seq)[..]));
        if seq % 97 == 0 {
            if let Some(s) = sparse.next() {
                let s = s.expect("sparse record");
                assert_eq!(&s.payload[..], &payload(2, s.seq.0)[..]);
            }
            let back = seq / 2;
            let p = log.read(ids[DENSE], Seq(back)).expect("point read");
            assert_eq!(&p.payload[..], &payload(DENSE, back)[..]);
        }
        seq += 1;
    }
    assert_eq!(seq, lens[DENSE]);
    // An iteration holds the log open; these end before it closes.
    drop((dense, sparse));
    log.close().expect("close");

    // Reopened, the compressed store reads the same.
    let log = Log::open(dir.path(), options()).expect("reopen");
    let whole = scan(&log, ids[DENSE], 0, u64::MAX).expect("scan reopened");
    assert!(whole == before[0], "reopened scan differs");
    log.close().expect("close");
}

/// Where the stored bytes of block `k` of the compressed file `file` are, from its block
/// directory. spec: segment.md#block-directory-tail, segment.md#block-directory-entry
fn block_stored_range(file: &[u8], k: usize) -> (usize, usize, usize) {
    let u32_at = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().expect("u32")) as usize;
    let len = file.len();
    let footer_len = u64::from_le_bytes(file[len - 16..len - 8].try_into().expect("trailer"));
    let tail_at = len - 32 - footer_len as usize - 16;
    let count = u32_at(tail_at + 8);
    let entry_at = tail_at - count * 24 + k * 24;
    (u32_at(entry_at + 8), u32_at(entry_at + 12), count)
}

/// Flips a byte in the stored bytes of block `k` of segment `segment` in `dir`; returns
/// where those bytes start and how many blocks the segment has.
fn damage_block(dir: &Path, segment: u64, k: impl Fn(usize) -> usize) -> (u64, usize) {
    let path = dir.join(format!("{segment:020}.seg"));
    let mut file = std::fs::read(&path).expect("read");
    let (_, _, count) = block_stored_range(&file, 0);
    let (stored_offset, stored_len, _) = block_stored_range(&file, k(count));
    file[stored_offset + stored_len / 2] ^= 0x10;
    std::fs::write(&path, &file).expect("write");
    (stored_offset as u64, count)
}

/// Scans the dense stream of the store in `dir`, which has a damaged block at
/// `stored_offset` of `segment`, and checks the scan ends there with corruption after
/// exactly the records of `plain` before it.
fn check_scan_ends_at_damage(
    dir: &Path,
    ids: &[StreamId],
    lens: &[u64],
    plain: &[(u64, u8, Vec<u8>)],
    (segment, stored_offset): (u64, u64),
) {
    let log = Log::open(dir, options()).expect("open");
    let mut read = Vec::new();
    let mut failure = None;
    let mut after_failure = 0;
    for r in log.iter(ids[DENSE], Seq(0), Seq(u64::MAX)) {
        match r {
            Ok(r) if failure.is_none() => read.push((r.seq.0, r.kind, r.payload.to_vec())),
            Ok(_) => after_failure += 1,
            Err(e) => failure = Some(e),
        }
    }
    match failure {
        // The error names the damaged block: its segment and where its stored bytes start.
        Some(Error::Corrupted {
            segment: s, offset, ..
        }) => assert_eq!((s.0, offset), (segment, stored_offset)),
        Some(e) => panic!("expected corruption, got {e}"),
        None => panic!("a scan over the damaged block must fail"),
    }
    assert_eq!(after_failure, 0, "nothing is read after the error");
    assert!(
        !read.is_empty() && read.len() < lens[DENSE] as usize,
        "the scan stops inside the session: {} records",
        read.len()
    );
    assert!(
        read[..] == plain[..read.len()],
        "the records before the damage are the plain prefix"
    );
    log.close().expect("close");
}

/// A filled store, compressed and closed: its streams, their lengths and the dense stream's
/// records as read before compression.
type Compressed = (Vec<StreamId>, Vec<u64>, Vec<(u64, u8, Vec<u8>)>);

fn compressed_store(dir: &Path) -> Compressed {
    let log = Log::open(dir, options().with_compression(Compression::ZSTD)).expect("open");
    let (ids, lens) = fill(&log);
    let plain = scan(&log, ids[DENSE], 0, u64::MAX).expect("scan");
    log.reclaim().expect("compress");
    log.close().expect("close");
    (ids, lens, plain)
}

#[test]
fn a_damaged_block_far_into_a_segment_ends_the_scan_with_corruption_after_every_record_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ids, lens, plain) = compressed_store(dir.path());

    // A byte flipped in a block two thirds into segment 2, well after the scan of that
    // segment has started reading ahead.
    let (stored_offset, count) = damage_block(dir.path(), 2, |count| count * 2 / 3);
    assert!(count > 60, "a segment of many blocks: {count}");
    check_scan_ends_at_damage(dir.path(), &ids, &lens, &plain, (2, stored_offset));
}

/// Wherever the damaged block lies, the scan ends there: whether the read-ahead thread
/// decompresses it, or the reader, for itself or while it waits for the thread.
#[test]
fn a_damaged_block_anywhere_ends_the_scan_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ids, lens, plain) = compressed_store(dir.path());

    for (segment, at) in [(1, 3), (1, 17), (2, 40), (3, 50), (2, 64), (1, 99)] {
        let block = |count| count * at / 100;
        let (stored_offset, count) = damage_block(dir.path(), segment, block);
        assert!(count > 60, "a segment of many blocks: {count}");
        check_scan_ends_at_damage(dir.path(), &ids, &lens, &plain, (segment, stored_offset));
        // The same byte flipped back: the store is whole again for the next place.
        damage_block(dir.path(), segment, block);
    }
}

/// Iterations on several threads at once, on a machine kept busier than its cores by
/// threads that only spin, so that each iteration's reader and read-ahead thread take
/// turns in many orders: each reads exactly what one iteration reads alone, and none
/// waits forever for a block (a scan that has not ended after a minute fails the test).
#[test]
fn iterations_on_many_threads_at_once_read_what_one_reads_alone() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), options().with_compression(Compression::ZSTD)).expect("open");
    let (ids, lens) = fill(&log);
    let wanted: Vec<_> = [DENSE, SHORT]
        .iter()
        .map(|&s| scan(&log, ids[s], 0, u64::MAX).expect("plain scan"))
        .collect();
    log.reclaim().expect("compress");
    let log = Arc::new(log);
    let (ids, lens, wanted) = (Arc::new(ids), Arc::new(lens), Arc::new(wanted));
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let (done, finished) = std::sync::mpsc::channel();
    for t in 0..4 {
        let (log, ids, lens, wanted, done) = (
            log.clone(),
            ids.clone(),
            lens.clone(),
            wanted.clone(),
            done.clone(),
        );
        std::thread::spawn(move || {
            let mut mismatches = Vec::new();
            for round in 0..3 {
                let which = (t + round) % 2;
                let stream = [DENSE, SHORT][which];
                let got = scan(&log, ids[stream], 0, lens[stream]);
                if !got.as_ref().is_ok_and(|got| *got == wanted[which]) {
                    mismatches.push(format!("thread {t} round {round} stream {stream}"));
                }
            }
            // The log is let go of before the test is told this thread is done.
            drop((log, ids, lens, wanted));
            let _ = done.send(mismatches);
        });
    }
    let mut mismatches = Vec::new();
    for _ in 0..4 {
        match finished.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(m) => mismatches.extend(m),
            Err(e) => panic!("a scan did not end within a minute: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().expect("spinner");
    }
    assert!(mismatches.is_empty(), "scans differ: {mismatches:?}");
    Arc::try_unwrap(log)
        .map_err(|_| "the log is still shared")
        .expect("every scan ended")
        .close()
        .expect("close");
}
