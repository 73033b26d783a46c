//! Power loss during reclaim: a store whose first segments hold only deleted streams is
//! reclaimed with the power cut after every possible number of storage operations, then
//! crashed with several outcomes of what was unsynced. Every recovery must open, hold every
//! record of the live stream (all durable before reclaim began), keep the deleted streams
//! deleted and their ids unused, and go on working; across the cuts, recoveries must include
//! stores that kept their whole history and stores that start at a checkpoint.

use std::path::Path;

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};
use sessionlog_testkit::{Fault, SimConfig, SimStorage};

const SEGMENT_BYTES: u64 = 64 << 10;
const CRASH_SEEDS_PER_CUT: u64 = 4;

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES)
}

fn payload(name: &str, i: u32) -> Vec<u8> {
    let mut p = format!("{name} {i};").into_bytes();
    p.resize(2500 + (i as usize * 131) % 900, b'a' + (i % 26) as u8);
    p
}

/// Two streams fill the first segments and are deleted; "kept" is written after them.
fn build(sim: &SimStorage) -> u64 {
    let log = Log::open_with(sim.as_storage(), Path::new("/store"), options()).expect("open");
    let kept = log.create_stream("kept").expect("create");
    for name in ["doomed-1", "doomed-2"] {
        let s = log.create_stream(name).expect("create");
        for i in 0..25 {
            log.commit(
                &[Append::new(s, 1, &payload(name, i))],
                Durability::Buffered,
            )
            .expect("commit");
        }
        log.delete_stream(s, Durability::Buffered).expect("delete");
    }
    for i in 0..20 {
        log.commit(
            &[Append::new(kept, 1, &payload("kept", i))],
            Durability::Buffered,
        )
        .expect("commit");
    }
    log.close().expect("close");
    20
}

fn read_kept(log: &Log) -> Vec<Vec<u8>> {
    let id = log.stream_id("kept").expect("kept survives");
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

/// Returns (segments removed before the crash, first segment number after recovery).
fn run(cut: u64, crash_seed: u64) -> (usize, u64) {
    let sim = SimStorage::with_config(
        cut.wrapping_mul(31) ^ crash_seed,
        SimConfig {
            sector_size: if crash_seed % 2 == 0 { 512 } else { 4096 },
            short_reads: false,
        },
    );
    let kept_records = build(&sim);
    let expected: Vec<Vec<u8>> = (0..kept_records as u32)
        .map(|i| payload("kept", i))
        .collect();
    let dir = Path::new("/store");
    let log = Log::open_with(sim.as_storage(), dir, options()).expect("open before reclaim");
    sim.inject(Fault::power_cut_after(cut));
    let removed = match log.reclaim() {
        Ok(report) => report.segments_removed.len(),
        Err(_) => usize::MAX,
    };
    sim.crash(crash_seed);
    drop(log);
    let log = Log::open_with(sim.as_storage(), dir, options())
        .unwrap_or_else(|e| panic!("cut {cut} crash {crash_seed}: recovery failed: {e}"));
    let first = sim
        .file_paths()
        .iter()
        .filter_map(|p| {
            p.file_name()?
                .to_str()?
                .strip_suffix(".seg")?
                .parse::<u64>()
                .ok()
        })
        .min()
        .unwrap_or(0);
    assert_eq!(read_kept(&log), expected, "cut {cut} crash {crash_seed}");
    for name in ["doomed-1", "doomed-2"] {
        assert_eq!(log.stream_id(name), None, "cut {cut}: {name} came back");
    }
    let fresh = log.create_stream("fresh").expect("create after recovery");
    assert!(fresh.0 > 3, "cut {cut}: id {fresh} reused");
    let kept = log.stream_id("kept").expect("kept");
    log.commit(&[Append::new(kept, 1, b"after")], Durability::Sync)
        .expect("usable after recovery");
    // A second reclaim after recovery finishes the job and the store still reopens.
    log.reclaim().expect("reclaim after recovery");
    log.close().expect("close");
    let log = Log::open_with(sim.as_storage(), dir, options()).expect("reopen");
    let mut all = expected.clone();
    all.push(b"after".to_vec());
    assert_eq!(
        read_kept(&log),
        all,
        "cut {cut} crash {crash_seed} after reopen"
    );
    log.close().expect("close");
    (removed, first)
}

#[test]
fn a_power_cut_at_any_point_of_a_reclaim_loses_no_live_record_and_revives_no_deleted_stream() {
    // How many storage operations a reclaim takes, with no fault.
    let sim = SimStorage::new(3);
    build(&sim);
    let log = Log::open_with(sim.as_storage(), Path::new("/store"), options()).expect("open");
    let before = sim.stats();
    let report = log.reclaim().expect("reclaim");
    let after = sim.stats();
    assert!(
        report.segments_removed.len() >= 2,
        "the workload leaves at least two dead segments: {report:?}"
    );
    let ops = (after.namespace_ops - before.namespace_ops)
        + (after.sync_dir - before.sync_dir)
        + (after.sync_data + after.sync_all - before.sync_data - before.sync_all)
        + (after.writes - before.writes)
        + (after.reads - before.reads);
    // The counters miss operations a power cut also counts (opens, lengths, listings): cut
    // well past the end, so the last cuts let the whole reclaim through.
    let cuts = ops * 4 + 16;
    drop(log);

    let mut full_history = 0;
    let mut started_at_checkpoint = 0;
    for cut in 0..cuts {
        for seed in 0..CRASH_SEEDS_PER_CUT {
            let (_, first) = run(cut, seed);
            if first == 1 {
                full_history += 1;
            } else {
                started_at_checkpoint += 1;
            }
        }
    }
    println!(
        "{cuts} cuts x {CRASH_SEEDS_PER_CUT} crashes: {full_history} kept segment 1 to the end, \
         {started_at_checkpoint} ended starting at a checkpoint"
    );
    assert!(started_at_checkpoint > 0, "no crash left a reclaimed store");
    assert!(full_history > 0, "no crash kept the whole history");
}
