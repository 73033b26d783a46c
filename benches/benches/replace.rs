//! Writing a new checkpoint file, as the cache writes one: a temporary file created and
//! written, then `Storage::rename` over the old one (the baseline), against
//! `Storage::replace_unordered`, and against the cache's way (format-spec/cache.md#frames):
//! the checkpoint appended to the file as a frame while the file stays within `cache::append_limit` (eight
//! frames, 64 KiB at most and 4 KiB at least), else a new file put in place by
//! `replace_unordered` (so a checkpoint of 256 KiB is always a new file), and against the
//! same with the file held open between checkpoints (its size asked, then one write), as
//! the cache holds the files it writes last. For checkpoints
//! of 1 KiB, 4 KiB and 256 KiB, the sizes of a small checkpoint and of a long transcript's
//! rest. The kinds alternate within each round; the figures are the CPU time of the calling thread and the
//! wall time, per replacement, best of `RUNS` rounds and as ratios in the same run, with
//! the probe. The directory is removed at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use sessionlog_benches::{fresh_dir, human_ns, ns, probe, thread_cpu};
use sessionlog_log::{OpenMode, RealStorage, Storage};

/// Replacements per round and kind.
const REPLACEMENTS: usize = 200;
const RUNS: usize = 5;

/// How a checkpoint is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rename,
    Unordered,
    Frames,
    /// Frames appended to the file held open since it was written (its size asked, then
    /// one write), as the cache appends to the files it holds.
    Held,
}

/// Writes `bytes` as a checkpoint `REPLACEMENTS` times, the `kind` way; returns the CPU
/// time and the wall time per checkpoint.
fn replace(dir: &Path, bytes: &[u8], kind: Kind) -> (Duration, Duration) {
    let storage = RealStorage;
    let (tmp, path) = (dir.join("c.tmp"), dir.join("c"));
    let (cpu, wall) = (thread_cpu(), Instant::now());
    let n = bytes.len() as u64;
    // The file as the last write left it; the cache appends only to such a file.
    let mut left = None;
    let mut held: Option<std::sync::Arc<dyn sessionlog_log::StorageFile>> = None;
    for _ in 0..REPLACEMENTS {
        if let (Kind::Frames | Kind::Held, Some(at)) = (kind, left) {
            if at + n <= sessionlog::cache::append_limit(n) {
                // The file held open (`Kind::Held` only) is asked its size; otherwise the
                // file is opened by name, and closed after the write.
                let f = match &held {
                    Some(f) => {
                        assert_eq!(f.len_if_named().expect("len"), Some(at));
                        f.clone()
                    }
                    None => {
                        let f = storage.open_file(&path, OpenMode::ReadWrite).expect("open");
                        assert_eq!(f.len().expect("len"), at);
                        f
                    }
                };
                f.write_all_at(bytes, at).expect("append");
                left = Some(at + n);
                continue;
            }
        }
        let f = storage
            .open_file(&tmp, OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(bytes, 0).expect("write");
        if kind == Kind::Held {
            held = Some(f);
        } else {
            drop(f);
        }
        if kind == Kind::Rename {
            storage.rename(&tmp, &path).expect("rename");
        } else {
            storage.replace_unordered(&tmp, &path).expect("replace");
        }
        left = Some(n);
    }
    let per = |d: Duration| d / REPLACEMENTS as u32;
    (per(thread_cpu() - cpu), per(wall.elapsed()))
}

fn main() {
    let probe = probe();
    let dir = fresh_dir("replace");
    println!("{}", probe.summary());
    for size in [1usize << 10, 4 << 10, 256 << 10] {
        let bytes = vec![0x5Au8; size];
        // The old file exists before the first checkpoint of each kind.
        std::fs::write(dir.join("c"), &bytes).expect("seed");
        let kinds = [Kind::Rename, Kind::Unordered, Kind::Frames, Kind::Held];
        let mut best = [(Duration::MAX, Duration::MAX); 4];
        for _ in 0..RUNS {
            for (k, kind) in kinds.into_iter().enumerate() {
                let (cpu, wall) = replace(&dir, &bytes, kind);
                best[k] = (best[k].0.min(cpu), best[k].1.min(wall));
            }
        }
        let [(rc, rw), (uc, uw), (fc, fw), (hc, hw)] = best;
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "{} KiB: rename over the old file {} CPU, {} wall; replace_unordered {} CPU ({:.2}x), {} wall ({:.2}x); appended as frames {} CPU ({:.2}x), {} wall ({:.2}x); to a file held open {} CPU ({:.2}x), {} wall ({:.2}x); best of {RUNS} rounds of {REPLACEMENTS}",
            size >> 10,
            human_ns(ns(rc)),
            human_ns(ns(rw)),
            human_ns(ns(uc)),
            r(uc, rc),
            human_ns(ns(uw)),
            r(uw, rw),
            human_ns(ns(fc)),
            r(fc, rc),
            human_ns(ns(fw)),
            r(fw, rw),
            human_ns(ns(hc)),
            r(hc, rc),
            human_ns(ns(hw)),
            r(hw, rw),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
