//! With several syncs allowed in flight (`max_concurrent_syncs` > 1), every commit that
//! returned as durable survives a power loss, and each stream is a gap-free prefix.

use std::path::Path;
use std::sync::{Arc, Mutex};

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};
use sessionlog_testkit::{CrashPolicy, SimStorage};

/// What a commit returned: stream index, seq, payload.
type Acked = Arc<Mutex<Vec<(usize, u64, Vec<u8>)>>>;

#[test]
fn acknowledged_commits_survive_with_overlapping_syncs() {
    for seed in 0..40u64 {
        let sim = SimStorage::new(seed);
        let opts = LogOptions::default()
            .with_max_concurrent_syncs(1 + (seed % 4) as u32)
            .with_segment_size_bytes(64 << 10)
            .with_preallocate(seed % 2 == 0);
        let log = Log::open_with(sim.as_storage(), Path::new("/s"), opts.clone()).expect("open");
        let streams: Vec<_> = (0..6)
            .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
            .collect();
        let acked: Acked = Arc::default();
        std::thread::scope(|scope| {
            for (i, &s) in streams.iter().enumerate() {
                let (log, acked) = (log.clone(), acked.clone());
                scope.spawn(move || {
                    for n in 0..40u64 {
                        let payload =
                            format!("{seed}-{i}-{n}-{}", "x".repeat((n * 37 % 300) as usize))
                                .into_bytes();
                        let r = log
                            .commit(&[Append::new(s, 1, &payload)], Durability::Sync)
                            .expect("commit");
                        acked.lock().expect("lock").push((i, r.seqs[0].0, payload));
                    }
                });
            }
        });
        drop(log);
        let policy = if seed % 3 == 0 {
            CrashPolicy::lose_everything_unsynced()
        } else {
            CrashPolicy::default()
        };
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
        sim.crash_with(&mut rng, &policy);
        let log = Log::open_with(sim.as_storage(), Path::new("/s"), opts)
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        for (i, seq, payload) in acked.lock().expect("lock").iter() {
            let s = log
                .stream_id(&format!("s{i}"))
                .unwrap_or_else(|| panic!("seed {seed}: stream s{i} lost"));
            let r = log
                .read(s, Seq(*seq))
                .unwrap_or_else(|e| panic!("seed {seed}: s{i} seq {seq} lost: {e}"));
            assert_eq!(&r.payload[..], &payload[..], "seed {seed}: s{i} seq {seq}");
        }
        for info in log.streams() {
            let n = log
                .iter(info.id, Seq(0), info.next_seq)
                .filter(|r| r.is_ok())
                .count() as u64;
            assert_eq!(
                n, info.next_seq.0,
                "seed {seed}: {} is gap-free and readable",
                info.name
            );
        }
    }
}
