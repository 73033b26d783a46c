//! Power loss during the rewrite of mostly dead segments: a store of interleaved streams,
//! most of them deleted, is reclaimed with the power cut after every possible number of
//! storage operations, then crashed with several outcomes of what was unsynced. Every
//! recovery must open and match the model: each live stream holds exactly its records, in
//! order, once (the old copy or the new, never both and never neither), deleted streams stay
//! deleted, `verify` finds the store intact, and the store goes on working. Across the cuts,
//! recoveries must include segments still in their old form and segments rewritten. The same
//! schedule runs with compression on, where the rewrite also compresses every sealed segment
//! (spec: segment.md#compressed-segments): each segment is found whole, plain or compressed.

use std::path::{Path, PathBuf};

use sessionlog_log::verify::verify_store;
use sessionlog_log::{Append, Compression, Durability, Log, LogOptions, Seq, StreamId};
use sessionlog_testkit::{Fault, SimConfig, SimStorage};

const SEGMENT_BYTES: u64 = 64 << 10;
const CRASH_SEEDS_PER_CUT: u64 = 3;
const STREAMS: usize = 10;
const RECORDS: u32 = 24;
const KEPT: [usize; 2] = [2, 7];

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES)
}

fn dir() -> &'static Path {
    Path::new("/store")
}

fn payload(stream: usize, i: u32) -> Vec<u8> {
    let mut p = format!("s{stream} {i};").into_bytes();
    p.resize(
        900 + (i as usize * 131 + stream * 17) % 700,
        b'a' + (i % 26) as u8,
    );
    p
}

/// The model: every record of every stream, all durable before the reclaim starts.
fn expected(stream: usize) -> Vec<Vec<u8>> {
    (0..RECORDS).map(|i| payload(stream, i)).collect()
}

/// Interleaved streams over several segments; all but `KEPT` deleted, durably.
fn build(sim: &SimStorage) {
    let log = Log::open_with(sim.as_storage(), dir(), options()).expect("open");
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    for i in 0..RECORDS {
        for (s, id) in ids.iter().enumerate() {
            log.commit(&[Append::new(*id, 1, &payload(s, i))], Durability::Buffered)
                .expect("commit");
        }
    }
    for (s, id) in ids.iter().enumerate() {
        if !KEPT.contains(&s) {
            log.delete_stream(*id, Durability::Buffered)
                .expect("delete");
        }
    }
    log.close().expect("close");
}

fn segment_sizes(sim: &SimStorage) -> Vec<(PathBuf, usize)> {
    let mut out: Vec<(PathBuf, usize)> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| {
            let len = sim.file_contents(&p).map_or(0, |c| c.len());
            (p, len)
        })
        .collect();
    out.sort();
    out
}

fn read(log: &Log, stream: usize) -> Vec<Vec<u8>> {
    let id = log
        .stream_id(&format!("s{stream}"))
        .unwrap_or_else(|| panic!("s{stream} survives"));
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

fn check_model(log: &Log, context: &str) {
    for s in 0..STREAMS {
        if KEPT.contains(&s) {
            assert_eq!(read(log, s), expected(s), "{context}: s{s}");
        } else {
            assert_eq!(
                log.stream_id(&format!("s{s}")),
                None,
                "{context}: s{s} came back"
            );
        }
    }
}

/// Segment files whose header says format version 2 (compressed).
fn compressed_segments(sim: &SimStorage) -> usize {
    sim.file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .filter(|p| {
            sim.file_contents(p)
                .is_some_and(|c| c.get(8..12) == Some(&2u32.to_le_bytes()[..]))
        })
        .count()
}

/// Returns how many segments were found rewritten after recovery (with `options` from the
/// reclaim on).
fn run(cut: u64, crash_seed: u64, original: &[(PathBuf, usize)], options: &LogOptions) -> usize {
    let context = format!("cut {cut} crash {crash_seed}");
    let sim = SimStorage::with_config(
        cut.wrapping_mul(7919) ^ crash_seed,
        SimConfig {
            sector_size: if crash_seed % 2 == 0 { 512 } else { 4096 },
            short_reads: false,
        },
    );
    build(&sim);
    let log =
        Log::open_with(sim.as_storage(), dir(), options.clone()).expect("open before reclaim");
    sim.inject(Fault::power_cut_after(cut));
    let _ = log.reclaim();
    sim.crash(crash_seed);
    drop(log);
    sim.clear_faults();

    let log = Log::open_with(sim.as_storage(), dir(), options.clone())
        .unwrap_or_else(|e| panic!("{context}: recovery failed: {e}"));
    let sizes = segment_sizes(&sim);
    let compressing = options.compression != Compression::None;
    let rewritten = if compressing {
        compressed_segments(&sim)
    } else {
        sizes
            .iter()
            .filter(|(p, len)| original.iter().any(|(q, before)| q == p && len < before))
            .count()
    };
    check_model(&log, &context);
    assert!(
        sim.file_paths()
            .iter()
            .all(|p| !p.to_string_lossy().ends_with(".rewrite")),
        "{context}: the open removed every unrenamed rewrite"
    );
    let verified = verify_store(sim.as_storage(), dir()).expect("verify");
    assert!(verified.is_intact(), "{context}: {:?}", verified.damages);

    // The store goes on: a commit, a reclaim that finishes the job, a reopen.
    let kept = log.stream_id(&format!("s{}", KEPT[0])).expect("kept");
    log.commit(&[Append::new(kept, 1, b"after")], Durability::Sync)
        .expect("usable after recovery");
    log.reclaim().expect("reclaim after recovery");
    log.close().expect("close");
    if compressing {
        assert_eq!(
            compressed_segments(&sim) + 1,
            segment_sizes(&sim).len(),
            "{context}: the finishing reclaim compressed every sealed segment"
        );
    }
    let log = Log::open_with(sim.as_storage(), dir(), options.clone()).expect("reopen");
    let mut all = expected(KEPT[0]);
    all.push(b"after".to_vec());
    assert_eq!(
        read(&log, KEPT[0]),
        all,
        "{context}: after the second reclaim"
    );
    assert_eq!(read(&log, KEPT[1]), expected(KEPT[1]), "{context}");
    log.close().expect("close");
    let verified = verify_store(sim.as_storage(), dir()).expect("verify");
    assert!(verified.is_intact(), "{context}: {:?}", verified.damages);
    rewritten
}

/// Cuts the power after every storage operation of a reclaim with `options`; returns the
/// recoveries that found every segment in its old form and those that found some rewritten.
fn cut_everywhere(options: &LogOptions) -> (u64, u64) {
    // How many storage operations the reclaim takes, with no fault.
    let sim = SimStorage::new(5);
    build(&sim);
    let original = segment_sizes(&sim);
    let log = Log::open_with(sim.as_storage(), dir(), options.clone()).expect("open");
    let before = sim.stats();
    let report = log.reclaim().expect("reclaim");
    let after = sim.stats();
    assert!(
        report.segments_rewritten.len() >= 2,
        "the workload leaves mostly dead segments: {report:?}"
    );
    let ops = (after.namespace_ops - before.namespace_ops)
        + (after.sync_dir - before.sync_dir)
        + (after.sync_data + after.sync_all - before.sync_data - before.sync_all)
        + (after.writes - before.writes)
        + (after.reads - before.reads)
        + (after.resizes - before.resizes);
    // The counters miss operations a power cut also counts (opens, lengths, listings): cut
    // well past the end, so the last cuts let the whole reclaim through.
    let cuts = ops * 3 + 16;
    drop(log);

    let mut untouched = 0;
    let mut some_rewritten = 0;
    for cut in 0..cuts {
        for seed in 0..CRASH_SEEDS_PER_CUT {
            if run(cut, seed, &original, options) == 0 {
                untouched += 1;
            } else {
                some_rewritten += 1;
            }
        }
    }
    println!(
        "{cuts} cuts x {CRASH_SEEDS_PER_CUT} crashes: {untouched} recovered with every segment \
         in its old form, {some_rewritten} with rewritten segments"
    );
    (untouched, some_rewritten)
}

#[test]
fn a_power_cut_at_any_point_of_a_rewrite_keeps_each_live_record_exactly_once() {
    let (untouched, some_rewritten) = cut_everywhere(&options());
    assert!(some_rewritten > 0, "no crash kept a rewrite");
    assert!(untouched > 0, "no crash kept the old segments");
}

#[test]
fn a_power_cut_at_any_point_of_compressing_segments_keeps_each_live_record_exactly_once() {
    let (untouched, some_rewritten) =
        cut_everywhere(&options().with_compression(Compression::ZSTD));
    assert!(some_rewritten > 0, "no crash kept a compressed segment");
    assert!(untouched > 0, "no crash kept the old segments");
}
