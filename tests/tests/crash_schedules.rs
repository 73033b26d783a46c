//! Crash schedules: random operations against a log on simulated storage, a power loss at a
//! random point (between operations, or in the middle of one through an injected fault or a
//! power cut; reclaims among the operations), recovery with the default mode, and a check of the recovered log against the
//! reference model; then more operations on the recovered log and another check.
//!
//! `cargo test` runs 20,000 schedules. `SESSIONLOG_CRASH_SCHEDULES=1000000` runs that many;
//! `SESSIONLOG_CRASH_SEED=<seed>` runs one schedule and prints its trace. A failing schedule
//! prints its seed and the command that reproduces it.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use sessionlog_log::{
    Append, Compression, Durability, Error, Log, LogOptions, RecoveryMode, Seq, StreamId,
};
use sessionlog_testkit::adapter::snapshot_sampled;
use sessionlog_testkit::{
    CrashPolicy, Fault, FaultError, LogSnapshot, ModelAppend, ModelRecord, OpKind, ReferenceModel,
    Restart, SimConfig, SimStorage,
};

const DEFAULT_SCHEDULES: u64 = 20_000;
const SEED_BASE: u64 = 0x5E55_1060_0000_0000;
const MAX_STREAMS: usize = 6;
const MAX_RECORDS_PER_COMMIT: usize = 4;
const PAYLOAD_POOL_BYTES: usize = 1 << 20;
/// Records per stream also read by seq at each check (iteration reads them all).
const POINT_READS: usize = 8;

fn payload_pool() -> &'static Bytes {
    static POOL: OnceLock<Bytes> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut bytes = vec![0; PAYLOAD_POOL_BYTES];
        StdRng::seed_from_u64(SEED_BASE).fill_bytes(&mut bytes);
        Bytes::from(bytes)
    })
}

/// What one schedule exercised, summed over a run to prove the schedules reach the states
/// that matter.
#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    schedules: u64,
    commits: u64,
    power_losses: u64,
    power_losses_that_lost_data: u64,
    ops_lost: u64,
    unsynced_ops_kept: u64,
    failed_ops: u64,
    tail_cuts: u64,
    footers_rebuilt: u64,
    multi_segment_logs: u64,
    reclaims: u64,
    segments_reclaimed: u64,
    segments_rewritten: u64,
    interrupted_recoveries: u64,
    strict_opens_refused: u64,
    strict_opens_clean: u64,
}

impl Coverage {
    fn add(&mut self, other: &Coverage) {
        self.schedules += other.schedules;
        self.commits += other.commits;
        self.power_losses += other.power_losses;
        self.power_losses_that_lost_data += other.power_losses_that_lost_data;
        self.ops_lost += other.ops_lost;
        self.unsynced_ops_kept += other.unsynced_ops_kept;
        self.failed_ops += other.failed_ops;
        self.tail_cuts += other.tail_cuts;
        self.footers_rebuilt += other.footers_rebuilt;
        self.multi_segment_logs += other.multi_segment_logs;
        self.reclaims += other.reclaims;
        self.segments_reclaimed += other.segments_reclaimed;
        self.segments_rewritten += other.segments_rewritten;
        self.interrupted_recoveries += other.interrupted_recoveries;
        self.strict_opens_refused += other.strict_opens_refused;
        self.strict_opens_clean += other.strict_opens_clean;
    }
}

/// Whether an operation went through or the log failed (and is now poisoned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Done,
    LogFailed,
}

/// An error the log returns when storage failed under it: the operation's outcome is unknown.
fn is_storage_failure(error: &Error) -> bool {
    matches!(error, Error::Poisoned { .. } | Error::Io { .. })
}

struct Schedule {
    rng: StdRng,
    sim: SimStorage,
    dir: PathBuf,
    options: LogOptions,
    log: Option<Log>,
    model: ReferenceModel,
    streams_created: usize,
    /// Some schedules write large records, so segments fill and roll within a schedule.
    large_payloads: bool,
    trace: Vec<String>,
    coverage: Coverage,
}

impl Schedule {
    fn new(seed: u64) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let options = LogOptions::default()
            .with_segment_size_bytes(64 << 10)
            .with_write_buffer_bytes([0, 256, 4096, 1 << 20][rng.gen_range(0..4)])
            .with_index_interval_bytes([64, 512, 4096][rng.gen_range(0..3)])
            .with_preallocate(rng.gen_bool(0.5))
            // Half the schedules compress sealed segments when they reclaim; chosen by the
            // seed's parity, not the generator, so every seed's schedule stays what it was.
            .with_compression(if seed % 2 == 0 {
                Compression::None
            } else {
                Compression::ZSTD
            });
        Schedule {
            large_payloads: rng.gen_bool(0.12),
            sim: SimStorage::with_config(
                rng.gen(),
                SimConfig {
                    sector_size: if rng.gen_bool(0.25) { 4096 } else { 512 },
                    short_reads: rng.gen_bool(0.5),
                },
            ),
            rng,
            dir: PathBuf::from("/store"),
            options,
            log: None,
            model: ReferenceModel::new(),
            streams_created: 0,
            trace: Vec::new(),
            coverage: Coverage {
                schedules: 1,
                ..Coverage::default()
            },
        }
    }

    fn note(&mut self, line: String) {
        self.trace.push(line);
    }

    /// The whole schedule: operations (maybe failing), a power loss, recovery and a check,
    /// more operations on the recovered log, then a power loss or a clean restart.
    fn run(&mut self) -> Result<(), String> {
        self.note(format!(
            "options {:?}, large payloads: {}",
            self.options, self.large_payloads
        ));
        let log = self.open().map_err(|e| format!("open: {e}"))?;
        self.log = Some(log);
        let ops = self.rng.gen_range(1..=20);
        self.random_ops(ops, true)?;
        self.power_loss()?;
        let ops = self.rng.gen_range(1..=10);
        self.random_ops(ops, false)?;
        if self.rng.gen_bool(0.5) {
            self.power_loss()
        } else {
            self.clean_restart().and_then(|step| match step {
                Step::Done => Ok(()),
                Step::LogFailed => Err("clean restart failed without faults".into()),
            })
        }
    }

    fn open(&self) -> Result<Log, Error> {
        Log::open_with(self.sim.as_storage(), &self.dir, self.options.clone())
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("a log is open between restarts")
    }

    fn random_ops(&mut self, count: usize, with_faults: bool) -> Result<(), String> {
        if with_faults && self.rng.gen_bool(0.4) {
            self.arm_random_fault();
        }
        for _ in 0..count {
            let step = match self.rng.gen_range(0..100) {
                0..=9 => self.create_stream()?,
                10..=12 => self.delete_stream()?,
                13..=79 => self.commit()?,
                80..=90 => self.flush()?,
                91..=93 => self.live_check()?,
                94..=95 => self.reclaim()?,
                _ => self.clean_restart()?,
            };
            if step == Step::LogFailed {
                self.coverage.failed_ops += 1;
                break;
            }
        }
        Ok(())
    }

    fn arm_random_fault(&mut self) {
        let rng = &mut self.rng;
        let fault = if rng.gen_bool(0.3) {
            Fault::power_cut_after(rng.gen_range(0..120))
        } else {
            let kinds = [
                OpKind::Write,
                OpKind::Write,
                OpKind::SyncData,
                OpKind::SyncAll,
                OpKind::SyncDir,
                OpKind::Resize,
                OpKind::Namespace,
                OpKind::Read,
            ];
            let mut fault = Fault::on(kinds[rng.gen_range(0..kinds.len())])
                .after(rng.gen_range(0..12))
                .with_error(if rng.gen_bool(0.5) {
                    FaultError::Io
                } else {
                    FaultError::NoSpace
                });
            if rng.gen_bool(0.5) {
                fault = fault.sticky();
            }
            if rng.gen_bool(0.5) {
                fault = fault.short_write();
            }
            fault
        };
        self.note(format!("arm {fault:?}"));
        self.sim.inject(fault);
    }

    fn create_stream(&mut self) -> Result<Step, String> {
        if self.model.streams().len() >= MAX_STREAMS {
            return self.commit();
        }
        let name = format!("s{}", self.streams_created);
        self.streams_created += 1;
        match self.log().create_stream(&name) {
            Ok(id) => {
                self.note(format!("create {name} -> {id}"));
                self.model.stream_created(&name, id.0, false);
                Ok(Step::Done)
            }
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("create {name} failed: {e}"));
                self.model.stream_creation_failed(&name);
                Ok(Step::LogFailed)
            }
            Err(e) => Err(format!("create {name}: unexpected error {e}")),
        }
    }

    fn delete_stream(&mut self) -> Result<Step, String> {
        let streams = self.model.streams();
        if streams.is_empty() {
            return self.create_stream();
        }
        let name = streams[self.rng.gen_range(0..streams.len())].clone();
        let id = self
            .log()
            .stream_id(&name)
            .ok_or("an acknowledged stream has no id in the live log")?;
        let durability = if self.rng.gen_bool(0.4) {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        match self.log().delete_stream(id, durability) {
            Ok(()) => {
                self.note(format!("delete {name} {durability:?}"));
                self.model
                    .stream_deleted(&name, durability == Durability::Sync);
                Ok(Step::Done)
            }
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("delete {name} failed: {e}"));
                self.model.stream_deletion_failed(&name);
                Ok(Step::LogFailed)
            }
            Err(e) => Err(format!("delete {name}: unexpected error {e}")),
        }
    }

    fn random_payload(&mut self) -> Bytes {
        let len = match self.rng.gen_range(0..100) {
            0..=49 if self.large_payloads => self.rng.gen_range(2000..8000),
            0..=74 => self.rng.gen_range(0..200),
            75..=96 => self.rng.gen_range(200..1500),
            _ => self.rng.gen_range(1500..6000),
        };
        // Slices of one random pool: distinct contents without generating bytes per record.
        let start = self.rng.gen_range(0..PAYLOAD_POOL_BYTES - len);
        payload_pool().slice(start..start + len)
    }

    fn commit(&mut self) -> Result<Step, String> {
        let streams = self.model.streams();
        if streams.is_empty() {
            return self.create_stream();
        }
        let count = self.rng.gen_range(1..=MAX_RECORDS_PER_COMMIT);
        let mut appends = Vec::with_capacity(count);
        for _ in 0..count {
            let stream = streams[self.rng.gen_range(0..streams.len())].clone();
            let record = ModelRecord {
                kind: self.rng.gen_range(0..0xF0),
                flags: self.rng.gen(),
                payload: self.random_payload(),
            };
            appends.push(ModelAppend { stream, record });
        }
        let seqs = self.model.seqs_for(&appends);
        let state_expected_seqs = self.rng.gen_bool(0.3);
        let ids: Vec<StreamId> = appends
            .iter()
            .map(|a| self.log().stream_id(&a.stream))
            .collect::<Option<_>>()
            .ok_or("an acknowledged stream has no id in the live log")?;
        let batch: Vec<Append<'_>> = appends
            .iter()
            .zip(&ids)
            .zip(&seqs)
            .map(|((a, id), seq)| Append {
                stream: *id,
                kind: a.record.kind,
                flags: a.record.flags,
                payload: &a.record.payload,
                expected_seq: state_expected_seqs.then_some(Seq(*seq)),
            })
            .collect();
        let durability = if self.rng.gen_bool(0.4) {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        let summary: Vec<String> = appends
            .iter()
            .zip(&seqs)
            .map(|(a, s)| format!("{}#{s}:{}B", a.stream, a.record.payload.len()))
            .collect();
        let result = self.log().commit(&batch, durability);
        self.coverage.commits += 1;
        match result {
            Ok(receipt) => {
                self.note(format!(
                    "commit {durability:?} {summary:?} -> lsn {}",
                    receipt.lsn
                ));
                let got: Vec<u64> = receipt.seqs.iter().map(|s| s.0).collect();
                self.model
                    .committed(
                        &appends,
                        durability == Durability::Sync,
                        receipt.lsn.0,
                        &got,
                    )
                    .map_err(|v| v.to_string())?;
                Ok(Step::Done)
            }
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("commit {durability:?} {summary:?} failed: {e}"));
                self.model.commit_failed(&appends);
                Ok(Step::LogFailed)
            }
            Err(e) => Err(format!("commit {summary:?}: unexpected error {e}")),
        }
    }

    fn flush(&mut self) -> Result<Step, String> {
        match self.log().flush() {
            Ok(()) => {
                self.note("flush".into());
                self.model.flushed();
                Ok(Step::Done)
            }
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("flush failed: {e}"));
                Ok(Step::LogFailed)
            }
            Err(e) => Err(format!("flush: unexpected error {e}")),
        }
    }

    /// Reclaims the segments nothing live needs and rewrites the mostly dead ones: the records
    /// of live streams stay as they were, and on
    /// success everything acknowledged is durable (reclaim syncs first).
    fn reclaim(&mut self) -> Result<Step, String> {
        self.coverage.reclaims += 1;
        match self.log().reclaim() {
            Ok(report) => {
                self.note(format!("reclaim: {report:?}"));
                self.coverage.segments_reclaimed += report.segments_removed.len() as u64;
                self.coverage.segments_rewritten += report.segments_rewritten.len() as u64;
                self.model.flushed();
                Ok(Step::Done)
            }
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("reclaim failed: {e}"));
                Ok(Step::LogFailed)
            }
            Err(e) => Err(format!("reclaim: unexpected error {e}")),
        }
    }

    /// Reads the whole live log and compares it with the model (skipped while a fault is
    /// armed, since a read may then fail).
    fn live_check(&mut self) -> Result<Step, String> {
        if self.sim.armed_faults() > 0 {
            return Ok(Step::Done);
        }
        self.note("live check".into());
        let snap = snapshot_sampled(self.log(), POINT_READS)?;
        self.model.check_live(&snap).map_err(|v| v.to_string())?;
        Ok(Step::Done)
    }

    /// Closes the log and opens it again, without a power loss.
    fn clean_restart(&mut self) -> Result<Step, String> {
        let log = self.log.take().expect("open");
        match log.close() {
            Ok(()) => self.model.flushed(),
            Err(e) if is_storage_failure(&e) => {
                self.note(format!("close failed: {e}"));
                return Ok(Step::LogFailed);
            }
            Err(e) => return Err(format!("close: unexpected error {e}")),
        }
        let faults_armed = self.sim.armed_faults() > 0;
        // After a clean close nothing is damaged, so even the strictest mode must open it.
        let strict = self
            .options
            .clone()
            .with_recovery_mode(RecoveryMode::AbsoluteConsistency);
        let log = match Log::open_with(self.sim.as_storage(), &self.dir, strict) {
            Ok(log) => log,
            Err(e) if faults_armed && is_storage_failure(&e) => {
                self.note(format!("reopen failed: {e}"));
                return Ok(Step::LogFailed);
            }
            Err(e) => return Err(format!("reopen after a clean close: {e}")),
        };
        self.note(format!("clean restart: {:?}", log.recovery_report()));
        if let Some(cut) = log
            .recovery_report()
            .tail_cut
            .as_ref()
            .filter(|cut| cut.nonzero_bytes > 0)
        {
            return Err(format!("recovery cut data after a clean close: {cut:?}"));
        }
        let snap = match snapshot_sampled(&log, POINT_READS) {
            Ok(snap) => snap,
            Err(_) if faults_armed => {
                self.log = Some(log);
                return Ok(Step::LogFailed);
            }
            Err(e) => return Err(e),
        };
        self.log = Some(log);
        self.model
            .check_recovered(&snap, Restart::Process)
            .map_err(|v| v.to_string())?;
        Ok(Step::Done)
    }

    /// Cuts the power, reopens (maybe with recovery itself interrupted by another power
    /// loss) and checks the recovered log against the model.
    fn power_loss(&mut self) -> Result<(), String> {
        self.crash()?;
        if self.rng.gen_bool(0.1) {
            let cut = self.rng.gen_range(0..40);
            self.sim.inject(Fault::power_cut_after(cut));
            self.note(format!("recovery with power cut after {cut} ops"));
            if let Ok(log) = self.open() {
                self.log = Some(log);
            }
            self.coverage.interrupted_recoveries += 1;
            self.crash()?;
        }
        if self.rng.gen_bool(0.05) {
            self.recovery_with_a_read_error()?;
        }
        let strict = if self.rng.gen_bool(0.2) {
            self.strict_open_after_a_crash()?
        } else {
            None
        };
        let log = self
            .open()
            .map_err(|e| format!("recovery after a power loss failed: {e}"))?;
        let report = log.recovery_report().clone();
        self.note(format!("recovered: {report:?}"));
        self.coverage.tail_cuts += u64::from(
            report
                .tail_cut
                .as_ref()
                .is_some_and(|cut| cut.nonzero_bytes > 0),
        );
        self.coverage.footers_rebuilt += report.footers_rebuilt.len() as u64;
        self.coverage.multi_segment_logs += u64::from(report.segments > 1);
        let snap = snapshot_sampled(&log, POINT_READS)?;
        self.log = Some(log);
        if strict.as_ref().is_some_and(|strict| *strict != snap) {
            return Err(format!(
                "the strict open saw {strict:?} but the default recovery then found {snap:?}"
            ));
        }
        let summary = self
            .model
            .check_recovered(&snap, Restart::PowerLoss)
            .map_err(|v| v.to_string())?;
        self.note(format!("model: {summary:?}"));
        self.coverage.ops_lost += summary.lost as u64;
        self.coverage.unsynced_ops_kept += summary.kept_beyond_durable as u64;
        Ok(())
    }

    /// Opens with `AbsoluteConsistency`: it either finds no damage (and then sees what the
    /// default mode will recover) or fails with a corruption error and changes no byte.
    fn strict_open_after_a_crash(&mut self) -> Result<Option<LogSnapshot>, String> {
        let files_before = self.file_images();
        let strict = self
            .options
            .clone()
            .with_recovery_mode(RecoveryMode::AbsoluteConsistency);
        match Log::open_with(self.sim.as_storage(), &self.dir, strict) {
            Ok(log) => {
                self.note("strict open found no damage".into());
                self.coverage.strict_opens_clean += 1;
                let snap = snapshot_sampled(&log, POINT_READS)?;
                log.close()
                    .map_err(|e| format!("closing the strict open: {e}"))?;
                Ok(Some(snap))
            }
            Err(Error::Corrupted {
                segment, offset, ..
            }) => {
                self.note(format!(
                    "strict open refused: segment {segment} offset {offset}"
                ));
                self.coverage.strict_opens_refused += 1;
                if self.file_images() != files_before {
                    return Err("a strict open that refused the store changed its files".into());
                }
                Ok(None)
            }
            Err(e) => Err(format!("strict open after a crash: unexpected error {e}")),
        }
    }

    /// Every file with its current contents.
    fn file_images(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        self.sim
            .file_paths()
            .into_iter()
            .map(|path| {
                let contents = self.sim.file_contents(&path);
                (path, contents)
            })
            .collect()
    }

    /// Recovery that hits a read error must fail with an I/O error and change nothing that
    /// matters: the next open (checked by the caller) must still find every durable record.
    fn recovery_with_a_read_error(&mut self) -> Result<(), String> {
        let skip = self.rng.gen_range(0..4);
        self.sim.inject(Fault::on(OpKind::Read).after(skip));
        let outcome = self.open();
        let fired = self.sim.armed_faults() == 0;
        self.sim.clear_faults();
        self.note(format!(
            "recovery with a read error after {skip} reads: fired {fired}, {:?}",
            outcome.as_ref().map(|log| log.recovery_report())
        ));
        match outcome {
            Err(e) if !is_storage_failure(&e) => Err(format!(
                "a read error during recovery was reported as something else: {e}"
            )),
            Ok(_) if fired => Err("recovery ignored a read error".into()),
            _ => Ok(()),
        }
    }

    /// A power loss: the storage keeps what the crash policy allows; the old log is dropped
    /// only afterwards, so nothing it does on the way out reaches the new state.
    fn crash(&mut self) -> Result<(), String> {
        let crash_seed = self.rng.gen();
        let report = if self.rng.gen_bool(0.15) {
            let policy = CrashPolicy::keep_everything_written();
            self.sim
                .crash_with(&mut StdRng::seed_from_u64(crash_seed), &policy)
        } else {
            self.sim.crash(crash_seed)
        };
        self.coverage.power_losses += 1;
        self.coverage.power_losses_that_lost_data += u64::from(report.lost_anything());
        self.note(format!(
            "crash {crash_seed:#x}: {}",
            report.to_string().trim_end()
        ));
        drop(self.log.take());
        Ok(())
    }
}

fn reproduce_command(seed: u64) -> String {
    format!(
        "SESSIONLOG_CRASH_SEED={seed:#x} cargo test -p sessionlog-tests --test crash_schedules -- --nocapture"
    )
}

/// Runs one schedule; a failure (or a panic inside the log) comes back as a message with the
/// seed, the reproduce command and the trace.
fn run_schedule(seed: u64) -> Result<Coverage, String> {
    let mut schedule = Schedule::new(seed);
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| schedule.run()));
    let error = match outcome {
        Ok(Ok(())) => return Ok(schedule.coverage),
        Ok(Err(error)) => error,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            format!("panicked: {what}")
        }
    };
    Err(format!(
        "crash schedule {seed:#x} failed: {error}\nreproduce: {}\ntrace:\n  {}",
        reproduce_command(seed),
        schedule.trace.join("\n  ")
    ))
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    let value = value.trim();
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={value} is not a number")))
}

/// Runs `count` schedules on all cores; stops at the first failure.
fn run_schedules(count: u64) -> Result<Coverage, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let total = Mutex::new(Coverage::default());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut mine = Coverage::default();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    if count >= 100_000 && i > 0 && i % (count / 10) == 0 {
                        eprintln!("crash schedules: {i} of {count} run");
                    }
                    match run_schedule(SEED_BASE.wrapping_add(i)) {
                        Ok(coverage) => mine.add(&coverage),
                        Err(message) => {
                            stop.store(true, Ordering::Relaxed);
                            failure.lock().unwrap().get_or_insert(message);
                        }
                    }
                }
                total.lock().unwrap().add(&mine);
            });
        }
    });
    match failure.into_inner().unwrap() {
        Some(message) => Err(message),
        None => Ok(total.into_inner().unwrap()),
    }
}

#[test]
fn every_crash_schedule_recovers_what_was_acknowledged() {
    if let Some(seed) = env_u64("SESSIONLOG_CRASH_SEED") {
        let mut schedule = Schedule::new(seed);
        let result = schedule.run();
        println!(
            "trace of schedule {seed:#x}:\n  {}",
            schedule.trace.join("\n  ")
        );
        if let Err(error) = result {
            panic!("crash schedule {seed:#x} failed: {error}");
        }
        return;
    }
    let count = env_u64("SESSIONLOG_CRASH_SCHEDULES").unwrap_or(DEFAULT_SCHEDULES);
    let started = Instant::now();
    let coverage = run_schedules(count).unwrap_or_else(|message| panic!("{message}"));
    println!(
        "{count} crash schedules in {:.1?}: {coverage:?}",
        started.elapsed()
    );
    assert_eq!(coverage.schedules, count);
    if count >= 1000 {
        // The schedules must reach the states worth testing, not just pass.
        assert!(
            coverage.power_losses_that_lost_data > count / 10,
            "{coverage:?}"
        );
        assert!(coverage.ops_lost > 0, "{coverage:?}");
        assert!(coverage.unsynced_ops_kept > 0, "{coverage:?}");
        assert!(coverage.failed_ops > count / 50, "{coverage:?}");
        assert!(coverage.tail_cuts > count / 50, "{coverage:?}");
        assert!(coverage.multi_segment_logs > count / 50, "{coverage:?}");
        assert!(coverage.segments_reclaimed > 0, "{coverage:?}");
        assert!(coverage.segments_rewritten > 0, "{coverage:?}");
        assert!(coverage.interrupted_recoveries > 0, "{coverage:?}");
    }
}
