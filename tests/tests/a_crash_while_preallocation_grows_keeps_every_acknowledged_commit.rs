//! Power loss while the active segment's preallocation grows: a store that reserves space in
//! doubling steps extends the file (an unsynced size change) in the middle of commits, so a
//! crash can keep or lose the step, keep it without the data written into it, or the reverse.
//! Every cut point of a workload that crosses every step of a small segment and rolls into
//! the next is tried, each with several crash outcomes; recovery must find the end of the
//! data whatever survived and hold every acknowledged durable commit, checked against the
//! reference model. The same schedules run again with zeros written ahead of the data in
//! small steps (`zero_ahead_bytes`), so cuts land before, inside and after those writes too.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use sessionlog_log::{Append, Durability, Error, Log, LogOptions, StreamId};
use sessionlog_testkit::adapter::snapshot;
use sessionlog_testkit::{
    Fault, ModelAppend, ModelRecord, ReferenceModel, Restart, SimConfig, SimStorage,
};

const SEGMENT_BYTES: u64 = 128 << 10;
const COMMITS: u64 = 48;
const CRASH_SEEDS_PER_CUT: u64 = 3;

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(SEGMENT_BYTES)
        .with_preallocate(true)
}

/// Commit `i`'s payload: recognisable and 1 to 6 KiB, so the workload crosses every
/// preallocation step of the first segment and rolls into a second.
fn payload(i: u64) -> Bytes {
    let mut bytes = format!("commit {i};").into_bytes();
    bytes.resize(1024 + (i as usize * 2711) % 5120, b'a' + (i % 26) as u8);
    Bytes::from(bytes)
}

fn is_storage_failure(error: &Error) -> bool {
    matches!(error, Error::Poisoned { .. } | Error::Io { .. })
}

/// Runs the workload until it ends or the storage fails; the model learns every outcome.
fn workload(log: &Log, stream: StreamId, model: &mut ReferenceModel) {
    for i in 0..COMMITS {
        let append = ModelAppend {
            stream: "s".into(),
            record: ModelRecord {
                kind: 1,
                flags: 0,
                payload: payload(i),
            },
        };
        let durable = i % 3 != 1;
        let durability = if durable {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        match log.commit(
            &[Append::new(stream, 1, &append.record.payload)],
            durability,
        ) {
            Ok(receipt) => {
                let seqs: Vec<u64> = receipt.seqs.iter().map(|s| s.0).collect();
                model
                    .committed(&[append], durable, receipt.lsn.0, &seqs)
                    .expect("receipt agrees with the model");
            }
            Err(e) if is_storage_failure(&e) => {
                model.commit_failed(&[append]);
                return;
            }
            Err(e) => panic!("commit {i}: unexpected error {e}"),
        }
    }
}

/// Segment files whose written image is longer than their durable one: an unsynced growth.
fn unsynced_growths(sim: &SimStorage) -> usize {
    let segments: Vec<PathBuf> = sim
        .file_paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segments
        .iter()
        .filter(|p| {
            let written = sim.file_contents(p).map_or(0, |c| c.len());
            let durable = sim.durable_contents(p).map_or(0, |c| c.len());
            written > durable
        })
        .count()
}

/// One run: the workload with the power cut after `cut` storage operations, a crash, then
/// recovery checked against the model. Returns whether the crash caught a growth unsynced.
fn run(cut: u64, crash_seed: u64, sector_size: u64, options: &LogOptions) -> bool {
    let dir = Path::new("/store");
    let sim = SimStorage::with_config(
        cut ^ crash_seed.rotate_left(32),
        SimConfig {
            sector_size,
            short_reads: false,
        },
    );
    let mut model = ReferenceModel::new();
    let log = Log::open_with(sim.as_storage(), dir, options.clone()).expect("open");
    let stream = log.create_stream("s").expect("create");
    log.flush().expect("flush");
    model.stream_created("s", stream.0, true);
    sim.inject(Fault::power_cut_after(cut));
    workload(&log, stream, &mut model);
    let caught_growth = unsynced_growths(&sim) > 0;
    sim.crash(crash_seed);
    drop(log);
    let log = Log::open_with(sim.as_storage(), dir, options.clone())
        .unwrap_or_else(|e| panic!("cut {cut} crash {crash_seed:#x}: recovery failed: {e}"));
    let snap = snapshot(&log).expect("read the recovered log");
    model
        .check_recovered(&snap, Restart::PowerLoss)
        .unwrap_or_else(|v| panic!("cut {cut} crash {crash_seed:#x}: {v}"));
    // The recovered log keeps working across the remaining steps.
    workload(&log, stream, &mut model);
    log.close().expect("close");
    let log = Log::open_with(sim.as_storage(), dir, options.clone()).expect("reopen");
    let snap = snapshot(&log).expect("read the reopened log");
    model
        .check_recovered(&snap, Restart::Process)
        .unwrap_or_else(|v| panic!("cut {cut} crash {crash_seed:#x} after reopen: {v}"));
    caught_growth
}

/// What the workload does to storage when nothing fails.
struct DryRun {
    /// Storage operations that count against a power cut.
    ops: u64,
    /// Preallocation steps (resizes).
    growth_steps: u64,
    /// Write calls.
    writes: u64,
}

/// Runs the workload once without a cut and counts what it does to storage.
fn dry_run(options: &LogOptions) -> DryRun {
    let sim = SimStorage::new(1);
    let log = Log::open_with(sim.as_storage(), Path::new("/store"), options.clone()).expect("open");
    let stream = log.create_stream("s").expect("create");
    let before = sim.stats();
    let ops_before = op_count(&sim);
    workload(&log, stream, &mut {
        let mut m = ReferenceModel::new();
        m.stream_created("s", stream.0, true);
        m
    });
    let ops = op_count(&sim) - ops_before;
    let after = sim.stats();
    assert!(
        log.stats().segments >= 2,
        "the workload must roll into a second segment"
    );
    log.close().expect("close");
    DryRun {
        ops,
        growth_steps: after.resizes - before.resizes,
        writes: after.writes - before.writes,
    }
}

/// Every cut point of the workload, each with a few crash outcomes and both sector sizes;
/// returns how many crashes caught a growth unsynced.
fn every_cut(ops: u64, options: &LogOptions) -> usize {
    let mut caught = 0;
    for cut in 0..ops + 2 {
        for seed in 0..CRASH_SEEDS_PER_CUT {
            let sector = if (cut + seed) % 2 == 0 { 512 } else { 4096 };
            caught += usize::from(run(cut, 0xC0FFEE ^ (seed << 20), sector, options));
        }
    }
    caught
}

#[test]
fn a_power_cut_at_any_point_of_a_growing_preallocation_loses_no_acknowledged_commit() {
    let DryRun {
        ops, growth_steps, ..
    } = dry_run(&options());
    // 16 → 32 → 64 → 128 KiB in the first segment, then the whole second one at its creation.
    assert!(growth_steps >= 4, "only {growth_steps} preallocation steps");

    let caught = every_cut(ops, &options());
    println!(
        "{ops} operations, {growth_steps} preallocation steps; {caught} of {} crashes caught a \
         step unsynced",
        (ops + 2) * CRASH_SEEDS_PER_CUT
    );
    assert!(
        caught >= growth_steps as usize,
        "only {caught} crashes caught a preallocation step unsynced"
    );
}

#[test]
fn a_power_cut_at_any_point_while_zeros_are_written_ahead_loses_no_acknowledged_commit() {
    // A small step, so the workload writes zeros ahead many times in each segment.
    let zero_ahead = options().with_zero_ahead_bytes(4 << 10);
    let with = dry_run(&zero_ahead);
    let without = dry_run(&options().with_zero_ahead_bytes(0));
    let zero_writes = with.writes.saturating_sub(without.writes);
    assert!(
        zero_writes >= 16,
        "only {zero_writes} writes of zeros ahead: the schedules would barely reach them"
    );
    every_cut(with.ops, &zero_ahead);
}

/// Storage operations that count against a power-cut fault, as far as the stats see them.
fn op_count(sim: &SimStorage) -> u64 {
    let s = sim.stats();
    s.reads + s.writes + s.sync_data + s.sync_all + s.sync_dir + s.resizes + s.namespace_ops
}
