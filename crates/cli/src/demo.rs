//! `sessionlog demo`: the whole engine at work on an embedded default.
//!
//! 1. Many concurrent agent sessions produce realistic traffic (request envelopes, prompts,
//!    streamed settlements, tool calls and results of varied sizes, turn and step
//!    boundaries) and commit durably at every step boundary: the commits of all sessions share
//!    fsyncs (group commit).
//! 2. A session whose context pressure crosses its threshold is compacted (summary
//!    replacement; the originals stay in the log).
//! 3. A child writer process is killed with SIGKILL in the middle of its turns; the store is
//!    reopened (recovery), and opening each of its sessions closes the open turn with
//!    `interrupted` closers.
//! 4. Every session is verified against what was acknowledged, messages are derived, and a
//!    summary table is printed. The exit code is non-zero when verification fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use sessionlog::session::compaction::{
    CompactionOutcome, CompactionPolicy, DeterministicSummarizer,
};
use sessionlog::session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{SessionHandle, Store, StoreOptions};

use crate::{out, Failure};

/// Settings of a demo run.
#[derive(Debug, Clone)]
pub(crate) struct DemoArgs {
    pub dir: Option<PathBuf>,
    pub sessions: usize,
    pub turns: usize,
    pub crash_sessions: usize,
    pub seed: u64,
    /// Keep the default temporary store after the run (a `--dir` store is always kept).
    pub keep: bool,
}

/// Where the demo's store is and whether it outlives the run.
struct StorePlace {
    dir: PathBuf,
    /// Removed at the end (the default temporary store without `--keep`).
    remove_at_end: bool,
}

impl StorePlace {
    fn choose(args: &DemoArgs) -> StorePlace {
        match &args.dir {
            Some(dir) => StorePlace {
                dir: dir.clone(),
                remove_at_end: false,
            },
            None => StorePlace {
                dir: std::env::temp_dir().join(format!(
                    "sessionlog-demo-{}-{}",
                    std::process::id(),
                    now_ms()
                )),
                remove_at_end: !args.keep,
            },
        }
    }

    fn fate(&self) -> &'static str {
        if self.remove_at_end {
            "a temporary directory, removed at the end; --keep keeps it"
        } else {
            "kept after the run"
        }
    }

    /// Removes the store if it is temporary and the run passed (a failed run keeps it for
    /// inspection); returns the line that says what happened to it.
    fn finish(&self, passed: bool) -> String {
        let size = dir_bytes(&self.dir) >> 20;
        if self.remove_at_end && passed {
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => format!("store removed: {} ({size} MiB)", self.dir.display()),
                Err(e) => format!(
                    "store kept at {} ({size} MiB): removing it failed: {e}",
                    self.dir.display()
                ),
            }
        } else if self.remove_at_end {
            format!(
                "store kept for inspection because verification failed: {} ({size} MiB)",
                self.dir.display()
            )
        } else {
            format!("store kept: {} ({size} MiB)", self.dir.display())
        }
    }
}

/// The name of the killed writer's session number `i`.
fn killed_name(i: usize) -> String {
    format!("killed-{i:02}")
}

/// How the sessions of the killed writer were found after the kill.
#[derive(Debug, Default)]
struct KilledOutcome {
    /// Their final turn was open: restart repair closed it.
    repaired: usize,
    /// Closer events appended over all repaired sessions.
    closers: usize,
    /// Killed between two turns: nothing to close.
    between_turns: usize,
    /// Killed before the session's first commit: it never became durable.
    never_committed: usize,
}

impl KilledOutcome {
    fn describe(&self, crash_sessions: usize) -> String {
        let mut text = format!(
            "{} of {crash_sessions} in the killed writer ({} closers appended: turns ended `interrupted`)",
            self.repaired, self.closers
        );
        if self.between_turns > 0 {
            text += &format!(
                "; {} killed between turns, nothing to close",
                self.between_turns
            );
        }
        if self.never_committed > 0 {
            text += &format!(
                "; {} killed before their first commit, never durable",
                self.never_committed
            );
        }
        text
    }
}

/// What was acknowledged of one session: events durable, and a checksum of their envelopes.
///
/// The envelopes are hashed as the demo appends them, from the events the handle returned,
/// not read back from the store: the final check then compares what the application gave
/// with what the store holds after reopening, instead of the store with itself.
#[derive(Debug, Clone, Default)]
struct Acked {
    events: u64,
    crc: u32,
    /// The checksum state after `hashed` envelopes (appends not durable yet included), so
    /// each envelope is hashed once.
    staged: crc32fast::Hasher,
    hashed: u64,
}

impl Acked {
    /// Hashes an event the demo appended, when it is the next one not hashed yet. An event
    /// the handle appended by itself (a compaction's) leaves a gap that
    /// [`advance`](Self::advance) reads back from the store.
    fn appended(&mut self, e: &sessionlog::session::Event) {
        if e.seq().get() == self.hashed {
            hash_envelope(&mut self.staged, e);
            self.hashed += 1;
        }
    }

    /// After a durable commit, acknowledges every event the handle's session has: those
    /// the demo appended were hashed as it appended them; any others are read back.
    fn advance(&mut self, h: &SessionHandle) -> Result<(), Failure> {
        let next = h.next_seq().get();
        if self.hashed < next {
            for e in h.events_from(sessionlog::Seq(self.hashed))? {
                hash_envelope(&mut self.staged, &e);
            }
            self.hashed = next;
        }
        self.events = next;
        self.crc = self.staged.clone().finalize();
        Ok(())
    }
}

/// How many of the first `upto` stored envelopes of session `name` there are, and the
/// checksum of those (each followed by a newline), read back from the log one at a time.
fn envelope_crc(store: &Store, name: &str, upto: u64) -> Result<(u64, u32), Failure> {
    let mut h = crc32fast::Hasher::new();
    let mut count = 0;
    for e in store.events(name, sessionlog::Seq(0))?.take(upto as usize) {
        hash_envelope(&mut h, &e?);
        count += 1;
    }
    Ok((count, h.finalize()))
}

/// Adds an envelope, as stored, and the newline after it to an acknowledgement checksum.
fn hash_envelope(h: &mut crc32fast::Hasher, e: &sessionlog::session::Event) {
    h.update(e.raw().as_bytes());
    h.update(b"\n");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn workload_config() -> WorkloadConfig {
    // A small context window so that sessions cross their compaction threshold in a demo.
    WorkloadConfig::default()
        .with_compact_every_turns(None)
        .with_context_window(24_000)
}

/// Appends one turn, committing durably at every step boundary. Returns commit latencies.
fn drive_turn(
    h: &mut SessionHandle,
    w: &mut Workload,
    acked: &mut Acked,
    interrupt_after: Option<usize>,
) -> Result<Vec<Duration>, Failure> {
    let next = h.next_seq().get();
    let mut latencies = Vec::new();
    // The model's reported usage follows what the session's surface holds, as a provider's
    // would: after a compaction its requests are smaller.
    w.set_context_tokens(
        h.token_view()
            .map(|v| v.surface_estimate.tokens + v.envelope_estimate.tokens),
    );
    for e in w.turn(next, now_ms(), interrupt_after) {
        let boundary = matches!(e.event_type.as_str(), "step/end" | "turn/end");
        acked.appended(h.append(e)?);
        if boundary {
            let t = Instant::now();
            h.commit()?;
            latencies.push(t.elapsed());
            acked.advance(h)?;
        }
    }
    Ok(latencies)
}

/// Compacts when the estimated prompt of the next request reaches 80% of the window.
fn maybe_compact(
    h: &mut SessionHandle,
    counter: &Arc<dyn TokenCounter>,
    acked: &mut Acked,
) -> Result<bool, Failure> {
    // The handle keeps its token projection up to date: asking costs O(1) per turn.
    let pressure = h.pressure();
    let policy = CompactionPolicy::default();
    if !policy.should_compact(&pressure) {
        return Ok(false);
    }
    let outcome = h.compact(
        &policy,
        &mut DeterministicSummarizer::new(),
        counter.clone(),
        now_ms(),
    )?;
    acked.advance(h)?;
    Ok(matches!(outcome, CompactionOutcome::Compacted(_)))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                // Allocated bytes, not the preallocated length.
                Ok(m) => total += std::os::unix::fs::MetadataExt::blocks(&m) * 512,
                Err(_) => {}
            }
        }
    }
    total
}

pub(crate) fn demo(args: DemoArgs) -> Result<u8, Failure> {
    let place = StorePlace::choose(&args);
    let dir = place.dir.clone();
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    {
        return Err(Failure::new(
            2,
            format!(
                "{} is not empty; give the demo a new directory",
                dir.display()
            ),
        ));
    }
    println!(
        "sessionlog demo: store {} ({})",
        dir.display(),
        place.fate()
    );
    let crash_plan = if args.crash_sessions == 0 {
        "no writer killed (--crash-sessions 0)".to_owned()
    } else {
        format!(
            "then a writer of {} sessions killed mid-turn",
            args.crash_sessions
        )
    };
    println!(
        "{} concurrent sessions x {} turns, durable commit at every step boundary; {crash_plan}",
        args.sessions, args.turns
    );
    let started = Instant::now();

    // Phase 1 and 2: concurrent sessions with group commit and compaction.
    let store = Store::open(&dir, StoreOptions::default())?;
    let bar = ProgressBar::new((args.sessions * args.turns) as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:40}] {pos}/{len} turns {msg}")
            .map_err(|e| Failure::new(2, e.to_string()))?
            .progress_chars("=> "),
    );
    bar.set_prefix("agents");
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let acked: Arc<Mutex<HashMap<String, Acked>>> = Arc::new(Mutex::new(HashMap::new()));
    let compactions = Arc::new(AtomicU64::new(0));
    let events = Arc::new(AtomicU64::new(0));
    let phase = Instant::now();
    let errors: Vec<Failure> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..args.sessions)
            .map(|i| {
                let (store, bar, latencies, acked, compactions, events) =
                    (&store, &bar, &latencies, &acked, &compactions, &events);
                let seed = args.seed.wrapping_add(i as u64);
                scope.spawn(move || -> Result<(), Failure> {
                    let name = format!("agent-{i:03}");
                    let mut h = store.create_session(
                        &name,
                        SessionHeader::new(&name, now_ms(), Some("/demo")),
                    )?;
                    let mut w = Workload::new(seed, workload_config());
                    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
                    let mut mine = Acked::default();
                    for e in w.session_start(now_ms()) {
                        mine.appended(h.append(e)?);
                    }
                    let mut lat = Vec::new();
                    for _ in 0..args.turns {
                        lat.extend(drive_turn(&mut h, &mut w, &mut mine, None)?);
                        if maybe_compact(&mut h, &counter, &mut mine)? {
                            compactions.fetch_add(1, Ordering::Relaxed);
                        }
                        bar.inc(1);
                    }
                    // With no turns (or a final compaction) some events are not yet durable.
                    h.commit()?;
                    mine.advance(&h)?;
                    events.fetch_add(h.next_seq().get(), Ordering::Relaxed);
                    latencies
                        .lock()
                        .map_err(|_| Failure::new(2, "a demo thread panicked"))?
                        .extend(lat);
                    acked
                        .lock()
                        .map_err(|_| Failure::new(2, "a demo thread panicked"))?
                        .insert(name, mine);
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Failure::new(2, "a demo thread panicked")))
                    .err()
            })
            .collect()
    });
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let write_time = phase.elapsed();
    bar.finish_with_message("done");
    let stats = store.log_reader().stats();
    drop(store);

    // Phase 3: a writer killed mid-turn.
    let crash_acked = if args.crash_sessions == 0 {
        HashMap::new()
    } else {
        run_and_kill_child(&dir, args.crash_sessions, args.seed ^ 0xC0FFEE)?
    };
    let reopen = Instant::now();
    let store = Store::open(&dir, StoreOptions::default())?;
    let recovery_time = reopen.elapsed();
    let report = store.log_reader().recovery_report().clone();
    let mut killed = KilledOutcome::default();
    for i in 0..args.crash_sessions {
        let name = killed_name(i);
        match store.open_session(&name) {
            Ok((_h, c)) if c.is_empty() => killed.between_turns += 1,
            Ok((_h, c)) => {
                killed.repaired += 1;
                killed.closers += c.len();
            }
            Err(sessionlog::Error::NoSuchSession(_)) if !crash_acked.contains_key(&name) => {
                killed.never_committed += 1
            }
            Err(e) => return Err(e.into()),
        }
    }

    // Phase 4: verify against what was acknowledged, derive every session.
    let verify_bar = ProgressBar::new((args.sessions + crash_acked.len()) as u64);
    verify_bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:40}] {pos}/{len} sessions")
            .map_err(|e| Failure::new(2, e.to_string()))?
            .progress_chars("=> "),
    );
    verify_bar.set_prefix("verify");
    let mut failures = Vec::new();
    let all_acked: Vec<(String, Acked)> = acked
        .lock()
        .map_err(|_| Failure::new(2, "poisoned"))?
        .clone()
        .into_iter()
        .chain(crash_acked)
        .collect();
    let mut derive_time = Duration::ZERO;
    let mut messages = 0usize;
    // A second, read-only opening without the checkpoint cache folds every session from
    // its whole log, to check the cached views against.
    let full = Store::open_read_only(&dir, StoreOptions::default().with_projection_cache(false))?;
    for (name, a) in &all_acked {
        if envelope_crc(&store, name, a.events)? != (a.events, a.crc) {
            failures.push(format!(
                "{name}: the {} acknowledged events are not all there, byte for byte",
                a.events
            ));
        }
        let derive_started = Instant::now();
        let view = store.view(name)?;
        derive_time += derive_started.elapsed();
        if view.surface.derive_messages_json() != full.view(name)?.surface.derive_messages_json() {
            failures.push(format!("{name}: the cached view and a full fold disagree"));
        }
        messages += view.surface.derive_messages().len();
        verify_bar.inc(1);
    }
    verify_bar.finish();
    let stats_after = store.log_reader().stats();
    drop(full);
    drop(store);
    let integrity = sessionlog_log::verify_store(Arc::new(sessionlog_log::RealStorage), &dir)?;
    if !integrity.is_intact() {
        failures.extend(
            integrity
                .damages
                .iter()
                .map(|d| format!("segment {} offset {}: {}", d.segment.0, d.offset, d.what)),
        );
    }

    let mut lat = latencies
        .lock()
        .map_err(|_| Failure::new(2, "poisoned"))?
        .clone();
    lat.sort();
    let total_events = events.load(Ordering::Relaxed);
    let rows = vec![
        (
            "sessions",
            if args.crash_sessions == 0 {
                format!("{} agents; no writer killed", args.sessions)
            } else {
                format!(
                    "{} agents + {} in a writer killed mid-turn",
                    args.sessions, args.crash_sessions
                )
            },
        ),
        (
            "events written",
            format!(
                "{total_events} ({:.0} events/s with durable commits)",
                total_events as f64 / write_time.as_secs_f64()
            ),
        ),
        (
            "durable commits",
            format!(
                "{} ({} fdatasyncs: {:.1} commits per sync)",
                lat.len(),
                stats.syncs,
                lat.len() as f64 / stats.syncs.max(1) as f64
            ),
        ),
        (
            "commit latency",
            format!(
                "p50 {:.2?}  p99 {:.2?}",
                percentile(&lat, 0.5),
                percentile(&lat, 0.99)
            ),
        ),
        (
            "compactions",
            format!("{}", compactions.load(Ordering::Relaxed)),
        ),
        (
            "recovery (reopen)",
            format!(
                "{recovery_time:.2?}; tail cut: {}",
                report.tail_cut.as_ref().map_or(
                    "none (a killed process loses no written bytes)".to_owned(),
                    |c| format!("{} bytes at offset {}", c.bytes, c.offset)
                )
            ),
        ),
        (
            "sessions repaired",
            if args.crash_sessions == 0 {
                "none (no writer killed)".to_owned()
            } else {
                killed.describe(args.crash_sessions)
            },
        ),
        (
            "derive messages",
            format!(
                "{messages} messages of {} sessions in {derive_time:.2?} (cold cache: full folds)",
                all_acked.len()
            ),
        ),
        (
            "bytes on disk",
            format!(
                "{:.1} MiB of log data in {} segments ({:.0} bytes per event); {} MiB allocated",
                stats_after.bytes as f64 / (1 << 20) as f64,
                integrity.segments.len(),
                stats_after.bytes as f64 / stats_after.records.max(1) as f64,
                dir_bytes(&dir) >> 20
            ),
        ),
        (
            "verification",
            if failures.is_empty() {
                "PASS: every acknowledged event present, checksums intact".to_owned()
            } else {
                format!("FAIL: {} problems", failures.len())
            },
        ),
        ("total time", format!("{:.1?}", started.elapsed())),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut w = std::io::stdout().lock();
    let mut table = String::from("\n");
    for (k, v) in &rows {
        table += &format!("  {k:<width$}  {v}\n");
    }
    for f in failures.iter().take(20) {
        table += &format!("  problem: {f}\n");
    }
    table += &format!("\n{}\n", place.finish(failures.is_empty()));
    out(&mut w, table.as_bytes())?;
    Ok(if failures.is_empty() { 0 } else { 1 })
}

/// Runs a child writer on `dir`, kills it with SIGKILL mid-turn, and returns what it had
/// acknowledged per session.
fn run_and_kill_child(
    dir: &Path,
    sessions: usize,
    seed: u64,
) -> Result<HashMap<String, Acked>, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::new(2, format!("locating the sessionlog binary: {e}")))?;
    let mut child = Command::new(exe)
        .arg("demo-child")
        .arg("--store")
        .arg(dir)
        .args([
            "--sessions",
            &sessions.to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure::new(2, format!("starting the child writer: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Failure::new(2, "no child stdout"))?;
    let mut acked = HashMap::new();
    let mut lines = BufReader::new(stdout).lines();
    // Kill after a varying number of acknowledgements, so the kill lands mid-turn.
    let kill_after = 40 + (seed % 60) as usize;
    let mut seen = 0;
    for line in lines.by_ref() {
        let line = line.map_err(|e| Failure::new(2, e.to_string()))?;
        let mut parts = line.split(' ');
        if let (Some("ack"), Some(name), Some(n), Some(crc)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            let parse = |s: &str| {
                s.parse::<u64>()
                    .map_err(|e| Failure::new(2, format!("child ack {line:?}: {e}")))
            };
            acked.insert(
                name.to_owned(),
                Acked {
                    events: parse(n)?,
                    crc: parse(crc)? as u32,
                    ..Acked::default()
                },
            );
            seen += 1;
            if seen >= kill_after {
                break;
            }
        }
    }
    child
        .kill()
        .map_err(|e| Failure::new(2, format!("killing the child writer: {e}")))?;
    let _ = child.wait();
    // Acknowledgements printed before the kill but not yet read still count.
    for line in lines.map_while(Result::ok) {
        let mut parts = line.split(' ');
        if let (Some("ack"), Some(name), Some(n), Some(crc)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        {
            if let (Ok(n), Ok(crc)) = (n.parse::<u64>(), crc.parse::<u64>()) {
                acked.insert(
                    name.to_owned(),
                    Acked {
                        events: n,
                        crc: crc as u32,
                        ..Acked::default()
                    },
                );
            }
        }
    }
    Ok(acked)
}

/// The child writer: round-robin turns over its sessions, printing `ack NAME EVENTS CRC` after
/// each durable commit, until it is killed.
pub(crate) fn demo_child(dir: &Path, sessions: usize, seed: u64) -> Result<u8, Failure> {
    if sessions == 0 {
        // With nothing to write, the round-robin below would spin without ever printing.
        return Err(Failure::new(2, "demo-child needs --sessions 1 or more"));
    }
    let store = Store::open(dir, StoreOptions::default())?;
    let mut all: Vec<(SessionHandle, Workload, Acked)> = Vec::new();
    for i in 0..sessions {
        let name = killed_name(i);
        let mut h =
            store.create_session(&name, SessionHeader::new(&name, now_ms(), Some("/demo")))?;
        let mut w = Workload::new(seed.wrapping_add(i as u64), workload_config());
        let mut acked = Acked::default();
        for e in w.session_start(now_ms()) {
            acked.appended(h.append(e)?);
        }
        all.push((h, w, acked));
    }
    let mut stdout = std::io::stdout().lock();
    // Round-robin over the sessions one commit span at a time (up to the next step boundary),
    // so at any moment nearly every session is in the middle of a turn.
    let mut pending: Vec<std::collections::VecDeque<sessionlog::session::EventInput>> =
        vec![Default::default(); all.len()];
    loop {
        for (i, (h, w, acked)) in all.iter_mut().enumerate() {
            if pending[i].is_empty() {
                let next = h.next_seq().get();
                pending[i].extend(w.turn(next, now_ms(), None));
            }
            while let Some(e) = pending[i].pop_front() {
                let boundary = matches!(e.event_type.as_str(), "step/end" | "turn/end");
                acked.appended(h.append(e)?);
                if boundary {
                    break;
                }
            }
            h.commit()?;
            acked.advance(h)?;
            writeln!(stdout, "ack {} {} {}", h.name(), acked.events, acked.crc)
                .map_err(|e| Failure::new(2, e.to_string()))?;
            stdout.flush().map_err(|e| Failure::new(2, e.to_string()))?;
        }
    }
}
