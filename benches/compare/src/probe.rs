//! What the disk under the comparison directory does by itself, measured in the same run: the
//! `fdatasync` floor and the sequential durable bandwidth. The same method as the machine probe
//! of `benches/lib.rs`, so figures can be read against each other.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::stats::{ns, Percentiles};

/// The probe's figures.
#[derive(Debug, Clone)]
pub struct Probe {
    /// File system type of the directory probed.
    pub fs_type: String,
    /// `pwrite` of 4 KiB + `fdatasync` over blocks written and synced before: the floor a
    /// durable commit cannot beat.
    pub fdatasync_4k: Percentiles,
    /// 1 MiB `pwrite`s, each followed by `fdatasync`, over written blocks, in MB/s.
    pub seq_durable_mb_s: f64,
}

const FILE_BYTES: u64 = 64 << 20;
const SYNC_SAMPLES: usize = 400;
const BANDWIDTH_BYTES: u64 = 128 << 20;

/// Runs the probe in `dir`.
pub fn run(dir: &Path) -> io::Result<Probe> {
    let fs_type = fs_type(dir);
    if fs_type == "tmpfs" || fs_type == "ramfs" {
        eprintln!(
            "warning: {} is on {fs_type}: durable figures mean nothing there; use --dir",
            dir.display()
        );
    }
    let file = scratch(dir, "probe.dat")?;
    // Written blocks: fill with real data and sync, so later overwrites change no metadata.
    let mib = vec![0x5Au8; 1 << 20];
    for i in 0..FILE_BYTES >> 20 {
        file.write_all_at(&mib, i << 20)?;
    }
    file.sync_all()?;
    let fdatasync_4k = sync_latencies(&file, SYNC_SAMPLES)?;
    for i in 0..4u64 {
        file.write_all_at(&mib, i << 20)?;
        rustix::fs::fdatasync(&file)?;
    }
    let t = Instant::now();
    let mut written = 0u64;
    while written < BANDWIDTH_BYTES {
        file.write_all_at(&mib, written % FILE_BYTES)?;
        rustix::fs::fdatasync(&file)?;
        written += mib.len() as u64;
    }
    let seq_durable_mb_s = written as f64 / t.elapsed().as_secs_f64() / 1e6;
    Ok(Probe {
        fs_type,
        fdatasync_4k,
        seq_durable_mb_s,
    })
}

/// A quick re-measurement of the fdatasync floor right next to a measurement: a shared disk
/// changes speed within a run.
pub fn floor_now(dir: &Path, samples: usize) -> io::Result<Percentiles> {
    let file = scratch(dir, "probe-now.dat")?;
    let block = vec![0x3Cu8; 4096];
    for i in 0..samples as u64 {
        file.write_all_at(&block, i * 4096)?;
    }
    file.sync_all()?;
    sync_latencies(&file, samples)
}

/// A new file, unlinked at once (it lives while the handle does).
fn scratch(dir: &Path, name: &str) -> io::Result<File> {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// `samples` 4 KiB writes over written blocks, each followed by `fdatasync`; a tenth more
/// first as warm-up, not counted.
fn sync_latencies(file: &File, samples: usize) -> io::Result<Percentiles> {
    let block = vec![0xA5u8; 4096];
    let warmup = samples / 10;
    let span = (samples as u64).min(FILE_BYTES / 4096);
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + warmup {
        let at = (i as u64 % span) * 4096;
        let t = Instant::now();
        file.write_all_at(&block, at)?;
        rustix::fs::fdatasync(file)?;
        if i >= warmup {
            out.push(ns(t.elapsed()));
        }
    }
    Ok(Percentiles::of(&mut out))
}

/// The file system type of `path` as `/proc/self/mounts` names it (longest mount prefix).
pub fn fs_type(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_dev), Some(mnt), Some(ty)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if path.starts_with(mnt) && best.as_ref().is_none_or(|(l, _)| mnt.len() >= *l) {
            best = Some((mnt.len(), ty.to_owned()));
        }
    }
    best.map_or_else(|| "unknown".into(), |(_, t)| t)
}
