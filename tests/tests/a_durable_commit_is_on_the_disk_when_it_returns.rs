//! A committer that asked for durability finds its record in the durable image of the store's
//! files the moment its commit returns, not merely by the end of the run: a log dropped at the
//! end syncs everything, so a check after it cannot tell a commit acknowledged early. Committers
//! of a group return without the log's lock once the group is durable; this holds them to it,
//! at one to four syncs in flight, with segment rolls, flushes and buffered committers beside
//! them.

use std::path::Path;

use sessionlog_log::{Append, Durability, Log, LogOptions};
use sessionlog_testkit::SimStorage;

const SYNC_WRITERS: usize = 8;
const COMMITS: usize = 40;

/// Whether `needle` is in the durable image of any file of the store.
fn durable_somewhere(sim: &SimStorage, needle: &[u8]) -> bool {
    sim.file_paths().iter().any(|path| {
        sim.durable_contents(path)
            .is_some_and(|image| image.windows(needle.len()).any(|w| w == needle))
    })
}

#[test]
fn every_sync_commit_is_durable_when_it_returns() {
    for seed in 0..12u64 {
        let sim = SimStorage::new(seed);
        let options = LogOptions::default()
            .with_max_concurrent_syncs(1 + (seed % 4) as u32)
            .with_segment_size_bytes(64 << 10)
            .with_write_buffer_bytes(2 << 10)
            .with_preallocate(seed % 2 == 0);
        let log = Log::open_with(sim.as_storage(), Path::new("/s"), options).expect("open");
        let streams: Vec<_> = (0..SYNC_WRITERS + 2)
            .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
            .collect();
        std::thread::scope(|scope| {
            for (w, &stream) in streams.iter().enumerate() {
                let (log, sim) = (&log, &sim);
                scope.spawn(move || {
                    let buffered = w >= SYNC_WRITERS;
                    for n in 0..COMMITS {
                        // Unique, and long enough not to turn up by chance.
                        let payload = format!(
                            "seed {seed} writer {w} commit {n} {}",
                            "#".repeat(20 + n * 13 % 200)
                        )
                        .into_bytes();
                        let durability = if buffered {
                            Durability::Buffered
                        } else {
                            Durability::Sync
                        };
                        log.commit(&[Append::new(stream, 1, &payload)], durability)
                            .expect("commit");
                        if buffered {
                            if n % 8 == 7 {
                                log.flush().expect("flush");
                            }
                        } else {
                            assert!(
                                durable_somewhere(sim, &payload),
                                "seed {seed}: writer {w} commit {n} returned before its \
                                 record was durable"
                            );
                        }
                    }
                });
            }
        });
        assert!(log.stats().segments > 1, "seed {seed}: no segment rolled");
    }
}
