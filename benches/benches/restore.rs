//! Restore of a large shipped store: a store of `SESSIONLOG_RESTORE_MIB` MiB (default 1,024)
//! written as 64 sessions of 1 KiB records through the log, shipped whole, then restored on
//! a "new node" (an absent directory) `SESSIONLOG_RESTORE_ROUNDS` times (default 3); each
//! restore is timed from the call to its return (every object fetched and checked, the
//! files synced, the store verified and put in place) and reported as MB/s of bytes
//! restored, beside the probe's sequential durable bandwidth measured in the same run.
//!
//! The object store is an S3 server when SESSIONLOG_S3_ENDPOINT is set (with
//! SESSIONLOG_S3_BUCKET and the AWS_* credentials; `bash .ci/with-seaweedfs.sh` sets them for
//! a SeaweedFS on loopback), else a directory on the measured disk. Every store, bucket
//! directory and restored copy is removed at the end.

use std::time::{Duration, Instant};

use serde_json::json;
use sessionlog_benches::{bench_dir, fresh_dir, probe, write_json};
use sessionlog_log::{Append, Durability, Log, LogOptions};
use sessionlog_remote::{restore, RestoreOptions, Shipper};

const SESSIONS: usize = 64;
const RECORD_BYTES: usize = 1024;
/// Records per commit while the store is written.
const BATCH: usize = 256;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes about `bytes` of 1 KiB records into a new store, round robin over the sessions,
/// and makes them durable.
fn write_store(bytes: u64) -> Log {
    let dir = fresh_dir("restore-source");
    let log = Log::open(&dir, LogOptions::default()).expect("open the source store");
    let streams: Vec<_> = (0..SESSIONS)
        .map(|i| {
            log.create_stream(&format!("session-{i}"))
                .expect("create a stream")
        })
        .collect();
    let mut payload = vec![0u8; RECORD_BYTES];
    let records = bytes / RECORD_BYTES as u64;
    let mut written = 0u64;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    while written < records {
        let n = BATCH.min((records - written) as usize);
        // Payloads differ from record to record (so nothing downstream sees repeated pages).
        let payloads: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                for b in payload.iter_mut().step_by(8) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    *b = state as u8;
                }
                payload.clone()
            })
            .collect();
        let appends: Vec<Append<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(k, p)| Append {
                stream: streams[(written as usize + k) % SESSIONS],
                kind: 1,
                flags: 0,
                payload: p,
                expected_seq: None,
            })
            .collect();
        log.commit(&appends, Durability::Buffered)
            .expect("commit a batch");
        written += n as u64;
    }
    log.flush().expect("flush the source store");
    log
}

fn main() {
    let probe = probe();
    let mib = env_u64("SESSIONLOG_RESTORE_MIB", 1024);
    let rounds = env_u64("SESSIONLOG_RESTORE_ROUNDS", 3).max(1);
    let started = Instant::now();
    let log = write_store(mib << 20);
    println!("wrote a {mib} MiB store in {:.1?}", started.elapsed());
    let (objects, where_to) = sessionlog_benches::bench_object_store("restore");
    let started = Instant::now();
    let shipped = Shipper::new(objects.clone(), 0)
        .ship(&log)
        .expect("ship the store");
    let ship_time = started.elapsed();
    log.close().expect("close the source store");
    println!(
        "shipped generation {} to {where_to} in {ship_time:.2?}",
        shipped.generation
    );
    let mut times: Vec<Duration> = Vec::new();
    let mut report = None;
    for round in 0..rounds {
        let target = bench_dir().join("restore-target");
        let _ = std::fs::remove_dir_all(&target);
        let started = Instant::now();
        let restored = restore(&*objects, &target, &RestoreOptions::default()).expect("restore");
        let took = started.elapsed();
        println!(
            "round {}: restored {:.1} MB ({} segments, {} sessions) in {took:.2?} = {:.1} MB/s",
            round + 1,
            restored.bytes as f64 / 1e6,
            restored.segments,
            restored.sessions,
            restored.bytes as f64 / 1e6 / took.as_secs_f64()
        );
        assert_eq!(restored.sessions, SESSIONS, "every session restored");
        times.push(took);
        report = Some(restored);
        let _ = std::fs::remove_dir_all(&target);
    }
    let report = report.expect("a restore ran");
    times.sort();
    let median = times[times.len() / 2];
    let mb_s = |t: Duration| report.bytes as f64 / 1e6 / t.as_secs_f64();
    println!(
        "restore of a {mib} MiB store from {where_to}: median of {rounds} {median:.2?} = {:.1} MB/s \
         (best {:.1} MB/s); the probe's sequential durable write {:.1} MB/s ({:.2}x of it)",
        mb_s(median),
        mb_s(times[0]),
        probe.seq_durable_mb_s,
        mb_s(median) / probe.seq_durable_mb_s,
    );
    write_json(
        "restore.json",
        &json!({
            "probe": probe,
            "objects": where_to,
            "store_mib": mib,
            "restored_bytes": report.bytes,
            "segments": report.segments,
            "ship_seconds": ship_time.as_secs_f64(),
            "restore_seconds": times.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
            "median_mb_s": mb_s(median),
        }),
    );
    for name in ["restore-source", "restore-target"] {
        let _ = std::fs::remove_dir_all(bench_dir().join(name));
    }
    sessionlog_benches::remove_bench_objects(&*objects, "restore");
}
