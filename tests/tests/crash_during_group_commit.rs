//! Power loss while several threads commit at once: group commit shares writes and syncs
//! between threads, and a crash lands wherever the threads happen to be. Each thread owns one
//! stream; after recovery every stream must be a gap-free prefix of what its thread attempted,
//! hold every record acknowledged as durable, and the acknowledged commits that survived must
//! be closed downwards in log order (no commit survives while one the log wrote before it is
//! lost).
//!
//! Thread interleavings are not reproducible, so this complements the deterministic
//! `crash_schedules` rather than replacing it; a failure still prints the seed of the crash.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq, StreamId};
use sessionlog_testkit::SimStorage;

const RUNS: u64 = 150;
const THREADS: usize = 4;
const COMMITS_PER_THREAD: u64 = 40;

/// The payload of `seq` in the stream of `thread`: recognisable, and of varying size.
fn payload(thread: usize, seq: u64) -> Vec<u8> {
    let mut bytes = format!("thread {thread} seq {seq};").into_bytes();
    let filler = (seq as usize * 7919 + thread * 104_729) % 1500;
    bytes.resize(bytes.len() + filler, b'a' + (seq % 26) as u8);
    bytes
}

/// What one thread was told.
#[derive(Debug, Default)]
struct ThreadOutcome {
    /// `(lsn, seq, durable)` of every acknowledged commit, in order.
    acknowledged: Vec<(u64, u64, bool)>,
    /// Whether a commit failed (its record may or may not be there).
    failed_in_flight: bool,
}

fn writer(
    log: Log,
    stream: StreamId,
    thread: usize,
    seed: u64,
    acks: &AtomicUsize,
) -> ThreadOutcome {
    let mut rng = StdRng::seed_from_u64(seed ^ thread as u64);
    let mut outcome = ThreadOutcome::default();
    for seq in 0..COMMITS_PER_THREAD {
        let data = payload(thread, seq);
        let durable = rng.gen_bool(0.6);
        let durability = if durable {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        let append = Append {
            expected_seq: Some(Seq(seq)),
            ..Append::new(stream, 1, &data)
        };
        match log.commit(&[append], durability) {
            Ok(receipt) => {
                assert_eq!(receipt.seqs, vec![Seq(seq)]);
                outcome.acknowledged.push((receipt.lsn.0, seq, durable));
                acks.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::Poisoned { .. } | Error::Io { .. }) => {
                outcome.failed_in_flight = true;
                break;
            }
            Err(e) => panic!("thread {thread}: unexpected error {e}"),
        }
    }
    outcome
}

/// Checks one recovered log against what the threads were told.
fn check(log: &Log, ids: &[StreamId], outcomes: &[ThreadOutcome]) -> Result<(), String> {
    let mut present_len = Vec::new();
    for (thread, (id, outcome)) in ids.iter().zip(outcomes).enumerate() {
        let records: Vec<_> = log
            .iter(*id, Seq(0), Seq(u64::MAX))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("reading stream of thread {thread}: {e}"))?;
        for (i, record) in records.iter().enumerate() {
            if record.seq != Seq(i as u64) || record.payload != payload(thread, i as u64) {
                return Err(format!(
                    "thread {thread}: record {i} is not what was committed"
                ));
            }
        }
        let attempted = outcome.acknowledged.len() + usize::from(outcome.failed_in_flight);
        if records.len() > attempted {
            return Err(format!(
                "thread {thread}: {} records but only {attempted} commits were attempted",
                records.len()
            ));
        }
        if let Some((_, seq, _)) = outcome.acknowledged.iter().rev().find(|(_, _, d)| *d) {
            if records.len() as u64 <= *seq {
                return Err(format!(
                    "thread {thread}: durable seq {seq} lost ({} records)",
                    records.len()
                ));
            }
        }
        present_len.push(records.len() as u64);
    }
    // Acknowledged commits in log order: present ones must form a prefix, and it must reach
    // past the last durable one.
    let mut all: Vec<(u64, usize, u64, bool)> = outcomes
        .iter()
        .enumerate()
        .flat_map(|(t, o)| {
            o.acknowledged
                .iter()
                .map(move |(lsn, seq, d)| (*lsn, t, *seq, *d))
        })
        .collect();
    all.sort_unstable();
    let present: Vec<bool> = all
        .iter()
        .map(|(_, t, seq, _)| *seq < present_len[*t])
        .collect();
    let kept = present.iter().take_while(|p| **p).count();
    if let Some(later) = present[kept..].iter().position(|p| *p) {
        return Err(format!(
            "commit at lsn {:#x} survived but the earlier one at lsn {:#x} did not",
            all[kept + later].0,
            all[kept].0
        ));
    }
    if let Some(last_durable) = all.iter().rposition(|(_, _, _, d)| *d) {
        if last_durable >= kept {
            return Err(format!(
                "acknowledged commit at lsn {:#x} lost before durable lsn {:#x}",
                all[kept].0, all[last_durable].0
            ));
        }
    }
    Ok(())
}

/// Runs one crash; returns whether a commit was in flight (failed) when the power went out.
fn run(seed: u64) -> Result<bool, String> {
    let sim = SimStorage::new(seed);
    let dir = Path::new("/store");
    let options = LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_write_buffer_bytes(2048);
    let log = Log::open_with(sim.as_storage(), dir, options.clone()).map_err(|e| e.to_string())?;
    let ids: Vec<StreamId> = (0..THREADS)
        .map(|t| log.create_stream(&format!("thread-{t}")).expect("create"))
        .collect();
    log.flush().map_err(|e| e.to_string())?;

    let mut rng = StdRng::seed_from_u64(seed);
    let crash_after_acks = rng.gen_range(0..THREADS * COMMITS_PER_THREAD as usize);
    let acks = Arc::new(AtomicUsize::new(0));
    let outcomes: Vec<ThreadOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(t, id)| {
                let (log, acks) = (log.clone(), acks.clone());
                scope.spawn(move || writer(log, *id, t, seed, &acks))
            })
            .collect();
        while acks.load(Ordering::Relaxed) < crash_after_acks
            && !handles.iter().all(|h| h.is_finished())
        {
            std::thread::yield_now();
        }
        sim.crash(rng.gen());
        handles
            .into_iter()
            .map(|h| h.join().expect("writer thread"))
            .collect()
    });
    drop(log);

    let log =
        Log::open_with(sim.as_storage(), dir, options).map_err(|e| format!("recovery: {e}"))?;
    check(&log, &ids, &outcomes)?;
    // The recovered log keeps going.
    for (t, id) in ids.iter().enumerate() {
        if let Some(info) = log.stream_info(*id) {
            let data = payload(t, info.next_seq.0);
            log.commit(&[Append::new(*id, 1, &data)], Durability::Sync)
                .map_err(|e| format!("commit after recovery: {e}"))?;
        }
    }
    log.close()
        .map_err(|e| format!("close after recovery: {e}"))?;
    Ok(outcomes.iter().any(|o| o.failed_in_flight))
}

#[test]
fn power_loss_during_concurrent_commits_keeps_every_durable_commit_in_order() {
    let mut crashes_mid_commit = 0;
    for i in 0..RUNS {
        let seed = 0xC0_4C07_0000 + i;
        match run(seed) {
            Ok(mid_commit) => crashes_mid_commit += u64::from(mid_commit),
            Err(message) => panic!(
                "concurrent crash run {seed:#x} failed (thread timing is not reproducible): {message}"
            ),
        }
    }
    assert!(
        crashes_mid_commit > RUNS / 4,
        "only {crashes_mid_commit} of {RUNS} crashes hit a commit in flight"
    );
}
