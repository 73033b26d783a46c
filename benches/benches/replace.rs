//! Putting a new checkpoint file in place of the old one, as the cache writes every
//! checkpoint: a temporary file created and written, then `Storage::rename` over the old
//! one (the baseline) against `Storage::replace_unordered`, for files of 4 KiB and
//! 256 KiB, the sizes of a small checkpoint and of a long transcript's rest. Both kinds
//! alternate within each round; the figures are the CPU time of the calling thread and the
//! wall time, per replacement, best of `RUNS` rounds and as ratios in the same run, with
//! the probe. The directory is removed at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use sessionlog_benches::{fresh_dir, human_ns, ns, probe, thread_cpu};
use sessionlog_log::{OpenMode, RealStorage, Storage};

/// Replacements per round and kind.
const REPLACEMENTS: usize = 200;
const RUNS: usize = 5;

/// Writes `bytes` to a new temporary file and puts it in place of `path` `REPLACEMENTS`
/// times; returns the CPU time and the wall time per replacement.
fn replace(dir: &Path, bytes: &[u8], unordered: bool) -> (Duration, Duration) {
    let storage = RealStorage;
    let (tmp, path) = (dir.join("c.tmp"), dir.join("c"));
    let (cpu, wall) = (thread_cpu(), Instant::now());
    for _ in 0..REPLACEMENTS {
        let f = storage
            .open_file(&tmp, OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(bytes, 0).expect("write");
        drop(f);
        if unordered {
            storage.replace_unordered(&tmp, &path).expect("replace");
        } else {
            storage.rename(&tmp, &path).expect("rename");
        }
    }
    let per = |d: Duration| d / REPLACEMENTS as u32;
    (per(thread_cpu() - cpu), per(wall.elapsed()))
}

fn main() {
    let probe = probe();
    let dir = fresh_dir("replace");
    println!("{}", probe.summary());
    for size in [4usize << 10, 256 << 10] {
        let bytes = vec![0x5Au8; size];
        // The old file exists before the first replacement of each kind.
        std::fs::write(dir.join("c"), &bytes).expect("seed");
        let mut best = [(Duration::MAX, Duration::MAX); 2];
        for _ in 0..RUNS {
            for (k, unordered) in [false, true].into_iter().enumerate() {
                let (cpu, wall) = replace(&dir, &bytes, unordered);
                best[k] = (best[k].0.min(cpu), best[k].1.min(wall));
            }
        }
        let [(rc, rw), (uc, uw)] = best;
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "{} KiB: rename over the old file {} CPU, {} wall; replace_unordered {} CPU ({:.2}x), {} wall ({:.2}x); best of {RUNS} rounds of {REPLACEMENTS}",
            size >> 10,
            human_ns(ns(rc)),
            human_ns(ns(rw)),
            human_ns(ns(uc)),
            r(uc, rc),
            human_ns(ns(uw)),
            r(uw, rw),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
