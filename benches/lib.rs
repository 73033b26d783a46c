//! Shared helpers for the benchmarks: where stores and results live, seeded data, latency
//! percentiles, and the machine probe that every bench binary runs first so its figures can
//! be read as ratios to what the disk itself does in the same run.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

/// CPU time the calling thread has run (`CLOCK_THREAD_CPUTIME_ID`, exact to the call; the
/// running thread's figure in `/proc/thread-self/schedstat` moves only at scheduler ticks,
/// too coarse for spans of a millisecond). Other work on a shared machine disturbs it much
/// less than wall time. Callgrind does not follow it (it is read through the vDSO).
pub fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.unsigned_abs(),
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The target directory the bench binary was built into (`target/` or `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // A bench binary lives at `<target>/<profile>/deps/<name>-<hash>`.
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Where results (`probe.json`, one JSON file per bench) are written:
/// `<target>/sessionlog-bench/`.
pub fn results_dir() -> PathBuf {
    let dir = target_dir().join("sessionlog-bench");
    std::fs::create_dir_all(&dir).expect("creating the results directory");
    dir
}

/// Where bench stores are built: `SESSIONLOG_BENCH_DIR` when set, else
/// `<target>/sessionlog-bench/stores`. Must be on the file system being measured, not tmpfs.
pub fn bench_dir() -> PathBuf {
    let dir = std::env::var_os("SESSIONLOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| results_dir().join("stores"));
    std::fs::create_dir_all(&dir).expect("creating the bench directory");
    dir
}

/// A fresh, empty directory `name` under [`bench_dir`] (removed first if it exists).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = bench_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a store directory");
    dir
}

/// Set (to anything) to keep the large stores some benches build (the 2 GiB sealed store of
/// `recovery`, the long session and the 100,000 sessions of `store`) for the next run, which
/// then reuses them while their marker file is there. Unset, every bench removes them.
pub const KEEP_STORES_ENV: &str = "SESSIONLOG_BENCH_KEEP_STORES";

/// Whether the large stores benches build are kept for the next run ([`KEEP_STORES_ENV`]).
pub fn keep_stores() -> bool {
    std::env::var_os(KEEP_STORES_ENV).is_some()
}

/// Removes a store a bench built and reuses only when kept ([`keep_stores`]).
pub fn done_with_store(dir: &Path) {
    if keep_stores() {
        println!("kept {} ({KEEP_STORES_ENV} is set)", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Writes `value` as pretty JSON to `<results_dir>/<name>`.
pub fn write_json(name: &str, value: &impl Serialize) {
    let path = results_dir().join(name);
    let text = serde_json::to_string_pretty(value).expect("serializing results");
    std::fs::write(&path, text + "\n").expect("writing results");
    println!("wrote {}", path.display());
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

/// A small seeded generator (SplitMix64): the same seed gives the same data on every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, (self.next_u64() % (i as u64 + 1)) as usize);
        }
    }
}

/// Creates `sessions` streams named `session-NNNNNN` and gives each `records` records of
/// `data`, `concurrent` sessions at a time interleaved record by record (as concurrent
/// agents write), all buffered; returns the streams in creation order. The caller flushes.
pub fn fill_interleaved_sessions(
    log: &sessionlog_log::Log,
    sessions: usize,
    records: usize,
    concurrent: usize,
    data: &[u8],
) -> Vec<sessionlog_log::StreamId> {
    use sessionlog_log::{Append, Durability};
    let mut ids = Vec::with_capacity(sessions);
    for group in (0..sessions).step_by(concurrent) {
        let members: Vec<_> = (group..(group + concurrent).min(sessions))
            .map(|i| {
                log.create_stream(&format!("session-{i:06}"))
                    .expect("create")
            })
            .collect();
        for _ in 0..records {
            for s in &members {
                log.commit(&[Append::new(*s, 1, data)], Durability::Buffered)
                    .expect("commit");
            }
        }
        ids.extend(members);
    }
    ids
}

/// `len` bytes of seeded payload: printable text with some repetition, like the JSON events
/// the session layer stores.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    const WORDS: &[&[u8]] = &[
        b"{\"type\":",
        b"\"tool_result\"",
        b",\"text\":\"",
        b"the ",
        b"session ",
        b"log ",
        b"record ",
        b"append ",
        b"durable ",
        b"stream ",
        b"\\n",
        b"0x",
        b"\",\"id\":",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        if rng.next_u64() % 4 == 0 {
            let mut b = [0u8; 8];
            rng.fill(&mut b);
            out.extend(b.iter().map(|x| b'a' + x % 26));
        } else {
            out.extend_from_slice(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]);
        }
    }
    out.truncate(len);
    out
}

/// Percentiles of a latency sample.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub p90_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: u64,
    /// Largest sample, in nanoseconds.
    pub max_ns: u64,
    /// Mean, in nanoseconds.
    pub mean_ns: u64,
}

impl Percentiles {
    /// Percentiles of `samples` (nanoseconds), sorting them in place.
    pub fn of(samples: &mut [u64]) -> Percentiles {
        samples.sort_unstable();
        let n = samples.len();
        let at = |q: f64| -> u64 {
            if n == 0 {
                return 0;
            }
            samples[(((n as f64) * q).ceil() as usize).clamp(1, n) - 1]
        };
        Percentiles {
            count: n,
            p50_ns: at(0.50),
            p90_ns: at(0.90),
            p99_ns: at(0.99),
            max_ns: samples.last().copied().unwrap_or(0),
            mean_ns: if n == 0 {
                0
            } else {
                (samples.iter().map(|&s| u128::from(s)).sum::<u128>() / n as u128) as u64
            },
        }
    }
}

/// Nanoseconds of `d`, saturating.
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Formats nanoseconds for people: `812 ns`, `3.41 µs`, `1.27 ms`.
pub fn human_ns(ns: u64) -> String {
    let n = ns as f64;
    if n < 1e3 {
        format!("{ns} ns")
    } else if n < 1e6 {
        format!("{:.2} µs", n / 1e3)
    } else if n < 1e9 {
        format!("{:.3} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

/// What the disk under the bench directory does by itself, measured in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// The directory probed (where stores are built).
    pub dir: String,
    /// Its file system type.
    pub fs_type: String,
    /// Online CPUs.
    pub nproc: usize,
    /// Unix time of the probe, seconds.
    pub unix_time: u64,
    /// `pwrite` of 4 KiB + `fdatasync`, overwriting blocks that were written and synced
    /// before (no allocation or extent change): the floor a durable commit cannot beat.
    pub fdatasync_4k: Percentiles,
    /// The same into a file preallocated with `fallocate` and never written (ext4 keeps such
    /// extents "unwritten"; the first write converts them, which is metadata the sync must
    /// journal). This is what an append into a fresh preallocated segment pays.
    pub fdatasync_4k_fallocated: Percentiles,
    /// Sequential durable bandwidth: 1 MiB `pwrite`s, each followed by `fdatasync`, over
    /// written blocks, in MB/s (10^6 bytes).
    pub seq_durable_mb_s: f64,
    /// The same appending into fallocated (unwritten) space, MB/s.
    pub seq_durable_fallocated_mb_s: f64,
    /// Buffered (no sync) 1 MiB `pwrite`s into fallocated space of a new file, MB/s: the rate
    /// at which the kernel takes data into new page-cache pages, which bounds a buffered
    /// append that hands its buffer to the kernel.
    pub page_cache_write_mb_s: f64,
}

impl Probe {
    /// fdatasync floor p50 in nanoseconds.
    pub fn fsync_p50_ns(&self) -> u64 {
        self.fdatasync_4k.p50_ns
    }

    /// How many records of `bytes_per_record` on-disk bytes the sequential durable bandwidth
    /// would carry per second.
    pub fn records_equivalent(&self, bytes_per_record: f64) -> f64 {
        self.seq_durable_mb_s * 1e6 / bytes_per_record
    }

    /// The one-line reminder a bench prints beside its results:
    /// `probe: fdatasync p50 … p99 …, sequential durable … MB/s`.
    pub fn summary(&self) -> String {
        format!(
            "probe: fdatasync p50 {} p99 {}, sequential durable {:.0} MB/s",
            human_ns(self.fdatasync_4k.p50_ns),
            human_ns(self.fdatasync_4k.p99_ns),
            self.seq_durable_mb_s
        )
    }
}

const PROBE_FILE_BYTES: u64 = 64 << 20;
const PROBE_SYNC_SAMPLES: usize = 400;
const PROBE_BANDWIDTH_BYTES: u64 = 128 << 20;

/// Measures the fdatasync floor and the sequential durable bandwidth in `dir` (which must be
/// on the file system the stores use), prints them, writes `probe.json` and returns them.
pub fn probe() -> Probe {
    let dir = bench_dir();
    let fs = fs_type(&dir);
    if fs == "tmpfs" || fs == "ramfs" {
        eprintln!(
            "warning: {} is on {fs}: durable figures mean nothing there; set SESSIONLOG_BENCH_DIR",
            dir.display()
        );
    }
    let p = run_probe(&dir, &fs).expect("running the disk probe");
    println!(
        "probe: {} ({}), nproc {}: fdatasync 4 KiB p50 {} p99 {} (fallocated: p50 {} p99 {}); \
         sequential durable 1 MiB+fdatasync {:.1} MB/s (fallocated: {:.1} MB/s); \
         buffered write into new pages {:.1} MB/s",
        p.dir,
        p.fs_type,
        p.nproc,
        human_ns(p.fdatasync_4k.p50_ns),
        human_ns(p.fdatasync_4k.p99_ns),
        human_ns(p.fdatasync_4k_fallocated.p50_ns),
        human_ns(p.fdatasync_4k_fallocated.p99_ns),
        p.seq_durable_mb_s,
        p.seq_durable_fallocated_mb_s,
        p.page_cache_write_mb_s,
    );
    write_json("probe.json", &p);
    p
}

fn run_probe(dir: &Path, fs: &str) -> io::Result<Probe> {
    let path = dir.join("probe.dat");
    let _ = std::fs::remove_file(&path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    // Written blocks: fill with real data and sync, so later overwrites change no metadata.
    let mib = vec![0x5Au8; 1 << 20];
    for i in 0..PROBE_FILE_BYTES >> 20 {
        file.write_all_at(&mib, i << 20)?;
    }
    file.sync_all()?;
    let fdatasync_4k = sync_latencies(&file, PROBE_SYNC_SAMPLES)?;
    let seq_durable_mb_s = durable_bandwidth(&file, &mib, PROBE_BANDWIDTH_BYTES, false)?;
    drop(file);

    let fallocated = |name: &str| -> io::Result<File> {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let _ = std::fs::remove_file(&path);
        rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, PROBE_FILE_BYTES)?;
        f.sync_all()?;
        Ok(f)
    };
    let f = fallocated("probe-falloc.dat")?;
    let fdatasync_4k_fallocated = sync_latencies(&f, PROBE_SYNC_SAMPLES)?;
    drop(f);
    let f = fallocated("probe-falloc-bw.dat")?;
    let seq_durable_fallocated_mb_s = durable_bandwidth(&f, &mib, PROBE_FILE_BYTES, true)?;
    drop(f);
    let f = fallocated("probe-cache.dat")?;
    let t = Instant::now();
    for i in 0..PROBE_FILE_BYTES >> 20 {
        f.write_all_at(&mib, i << 20)?;
    }
    let page_cache_write_mb_s = PROBE_FILE_BYTES as f64 / t.elapsed().as_secs_f64() / 1e6;
    drop(f);

    Ok(Probe {
        dir: dir.display().to_string(),
        fs_type: fs.to_owned(),
        nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        fdatasync_4k,
        fdatasync_4k_fallocated,
        seq_durable_mb_s,
        seq_durable_fallocated_mb_s,
        page_cache_write_mb_s,
    })
}

/// `samples` appends of 4 KiB at increasing offsets, each followed by `fdatasync`; the first
/// tenth is warm-up and not counted.
fn sync_latencies(file: &File, samples: usize) -> io::Result<Percentiles> {
    let block = vec![0xA5u8; 4096];
    let warmup = samples / 10;
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + warmup {
        let at = (i as u64 * 4096) % PROBE_FILE_BYTES;
        let t = Instant::now();
        file.write_all_at(&block, at)?;
        rustix::fs::fdatasync(file)?;
        if i >= warmup {
            out.push(ns(t.elapsed()));
        }
    }
    Ok(Percentiles::of(&mut out))
}

/// MB/s of `total` bytes written as 1 MiB `pwrite` + `fdatasync` steps.
fn durable_bandwidth(file: &File, mib: &[u8], total: u64, once: bool) -> io::Result<f64> {
    // Warm-up: a few steps not counted (only over written blocks; fallocated space is
    // measured from its first write).
    if !once {
        for i in 0..4u64 {
            file.write_all_at(mib, i << 20)?;
            rustix::fs::fdatasync(file)?;
        }
    }
    let t = Instant::now();
    let mut written = 0u64;
    while written < total {
        file.write_all_at(mib, written % PROBE_FILE_BYTES)?;
        rustix::fs::fdatasync(file)?;
        written += mib.len() as u64;
    }
    Ok(written as f64 / t.elapsed().as_secs_f64() / 1e6)
}

/// Removes the page-cache copy of a file's clean pages, so the next read comes from the
/// disk (a "cold" read, as after a machine restart). Needs no privileges.
pub fn evict_from_page_cache(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

/// Evicts every file directly inside `dir` from the page cache.
pub fn evict_dir_from_page_cache(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            evict_from_page_cache(&entry.path())?;
        }
    }
    Ok(())
}

/// Total size in bytes of the files directly inside `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// What `iter_custom` measured in each call, so the calls of the measurement phase (the last
/// `sample_size` ones, after criterion's warm-up calls) can be summed into a rate.
#[derive(Debug, Default, Clone)]
pub struct Calls {
    calls: Vec<(u64, Duration)>,
}

impl Calls {
    /// Notes one call: `items` done in `elapsed`.
    pub fn push(&mut self, items: u64, elapsed: Duration) {
        self.calls.push((items, elapsed));
    }

    /// Items per second over the last `n` calls.
    pub fn rate_last(&self, n: usize) -> f64 {
        let tail = &self.calls[self.calls.len().saturating_sub(n)..];
        let items: u64 = tail.iter().map(|c| c.0).sum();
        let secs: f64 = tail.iter().map(|c| c.1.as_secs_f64()).sum();
        if secs == 0.0 {
            0.0
        } else {
            items as f64 / secs
        }
    }

    /// Calls noted.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether no call was noted.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// Sample size every bench uses: few samples, bounded run time.
pub const SAMPLE_SIZE: usize = 10;

/// A quick re-measurement of the fdatasync floor (4 KiB overwrite + `fdatasync`, `samples`
/// times) next to a measurement: shared disks change speed within a run, so figures are
/// also given against the floor measured right before and after them.
pub fn fdatasync_floor_now(samples: usize) -> Percentiles {
    let path = bench_dir().join("probe-now.dat");
    let _ = std::fs::remove_file(&path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .expect("creating the probe file");
    let _ = std::fs::remove_file(&path);
    let block = vec![0x3Cu8; 4096];
    let blocks = samples as u64 + 8;
    for i in 0..blocks {
        file.write_all_at(&block, i * 4096).expect("probe write");
    }
    file.sync_all().expect("probe sync");
    let mut out = Vec::with_capacity(samples);
    for i in 0..blocks {
        let t = Instant::now();
        file.write_all_at(&block, i * 4096).expect("probe write");
        rustix::fs::fdatasync(&file).expect("probe fdatasync");
        if i >= 8 {
            out.push(ns(t.elapsed()));
        }
    }
    Percentiles::of(&mut out)
}

/// Appends the generated agent traffic of one long session (seed 42: turns, steps, tool
/// calls, a summary compaction every 50 turns keeping 40 nodes) to `h` until it holds at
/// least `events` events. Nothing is committed.
pub fn fill_long_session(h: &mut sessionlog::SessionHandle, events: u64) {
    LongSession::start(h).fill(h, events);
}

/// The generator behind [`fill_long_session`], kept between calls so that a session can be
/// grown in steps (committing, or stopping short of a checkpoint, between them) into the
/// same traffic that one call writes.
#[derive(Debug)]
pub struct LongSession {
    workload: sessionlog::workload::Workload,
}

impl LongSession {
    /// Appends the session's start to `h`, a session with no event yet.
    pub fn start(h: &mut sessionlog::SessionHandle) -> Self {
        use sessionlog::workload::{Workload, WorkloadConfig};
        let mut workload = Workload::new(
            42,
            WorkloadConfig::default()
                .with_compact_every_turns(Some(50))
                .with_keep_tail_nodes(40),
        );
        for e in workload.session_start(1) {
            h.append(e).expect("append");
        }
        Self { workload }
    }

    /// Appends whole turns (and the compactions they call for) until `h` holds at least
    /// `events` events. Nothing is committed.
    pub fn fill(&mut self, h: &mut sessionlog::SessionHandle, events: u64) {
        while h.next_seq().get() < events {
            self.turn(h);
        }
    }

    /// Appends whole turns as long as the next one (and a compaction after it) leaves `h`
    /// holding fewer than `limit` events: the most a session can be grown short of `limit`
    /// in turns. Nothing is committed.
    pub fn fill_short_of(&mut self, h: &mut sessionlog::SessionHandle, limit: u64) {
        /// More than a compaction appends.
        const COMPACTION: u64 = 16;
        loop {
            let next = h.next_seq().get();
            let turn = self.workload.clone().turn(next, 2, None).len() as u64;
            if next + turn + COMPACTION >= limit {
                return;
            }
            self.turn(h);
        }
    }

    /// One turn, and the compaction it calls for.
    fn turn(&mut self, h: &mut sessionlog::SessionHandle) {
        let next = h.next_seq().get();
        for e in self.workload.turn(next, 2, None) {
            h.append(e).expect("append");
        }
        if self.workload.wants_compaction() {
            let surface = h.state().surface();
            if let Some(compaction) = self.workload.compaction(&surface, h.next_seq(), 3) {
                h.append_atomic(compaction).expect("compaction");
            }
        }
    }
}

/// Appends the benchmark session of `benches/compare`'s replay table to `h` (seed 42, the
/// default workload, a turn every second from 1,700,000,000,000 ms, compactions as the
/// workload asks) until it holds at least `events` events. Commits every `commit_every`
/// turns when given, and once at the end.
pub fn fill_compare_session(
    h: &mut sessionlog::SessionHandle,
    events: u64,
    commit_every: Option<u64>,
) {
    use sessionlog::workload::{Workload, WorkloadConfig};
    Workload::new(42, WorkloadConfig::default())
        .fill(h, events, 1_700_000_000_000, commit_every)
        .expect("the benchmark session");
}

/// Reads every key once untimed (warm), then times `reads` point reads one by one, cycling
/// through `keys`.
pub fn point_read_latencies(
    log: &sessionlog_log::Log,
    keys: &[(sessionlog_log::StreamId, sessionlog_log::Seq)],
    reads: usize,
) -> Percentiles {
    for &(s, q) in keys {
        log.read(s, q).expect("read");
    }
    let mut lat = Vec::with_capacity(reads);
    for i in 0..reads {
        let (s, q) = keys[i % keys.len()];
        let t = std::time::Instant::now();
        let r = log.read(s, q).expect("read");
        let e = t.elapsed();
        std::hint::black_box(r);
        lat.push(ns(e));
    }
    Percentiles::of(&mut lat)
}

/// Session `name` loaded whole, every event held in memory and folded by
/// `Session::from_events` (the way a writer resumed before the state checkpoint): the
/// baseline the incremental resume and the maintained figures are measured against.
pub fn whole_session(store: &sessionlog::Store, name: &str) -> sessionlog::session::Session {
    use sessionlog::session::{FormatVersion, Seq, Session};
    let header = store.header(name).expect("header");
    let events = store.raw_events(name, Seq(0)).expect("events");
    Session::from_events(header, FormatVersion::current(), events).expect("whole fold")
}

/// CPU time (user + sys) this process has used so far, every thread's, ended ones too, in
/// nanoseconds: fields 14 and 15 of /proc/self/stat, in clock ticks of 10 ms.
pub fn process_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it follow its `)`.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    ticks * 10_000_000
}

/// Where a shipping bench ships to: the S3 server of SESSIONLOG_S3_ENDPOINT (with
/// SESSIONLOG_S3_BUCKET and the AWS_* credentials) under the prefix `bench/{name}-{pid}`, or
/// else the directory `bucket-{name}` under [`bench_dir`]; and a description for the report.
pub fn bench_object_store(
    name: &str,
) -> (std::sync::Arc<dyn sessionlog_remote::ObjectStore>, String) {
    use sessionlog_remote::{DirObjectStore, S3Config, S3ObjectStore};
    if let Ok(endpoint) = std::env::var("SESSIONLOG_S3_ENDPOINT") {
        let config = S3Config {
            bucket: std::env::var("SESSIONLOG_S3_BUCKET")
                .unwrap_or_else(|_| "sessionlog-ci".into()),
            prefix: format!("bench/{name}-{}", std::process::id()),
            endpoint: Some(endpoint.clone()),
            ..S3Config::default()
        };
        let store = S3ObjectStore::new(&config).expect("S3 client");
        (std::sync::Arc::new(store), format!("S3 at {endpoint}"))
    } else {
        let store = DirObjectStore::new(fresh_dir(&format!("bucket-{name}"))).expect("bucket");
        (
            std::sync::Arc::new(store),
            "a directory on the measured disk".into(),
        )
    }
}

/// Removes what a bench shipped to [`bench_object_store`]`(name)`: every object under the
/// directories a shipper writes (an S3 prefix outlives the bench otherwise), then the bucket
/// directory, if it was one. A failed delete is reported, not fatal.
pub fn remove_bench_objects(objects: &dyn sessionlog_remote::ObjectStore, name: &str) {
    for dir in sessionlog_remote::SHIPPED_DIRS {
        for key in objects.list(dir).unwrap_or_default() {
            if let Err(e) = objects.delete(&key) {
                eprintln!("could not remove the shipped object {key}: {e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(bench_dir().join(format!("bucket-{name}")));
}
