//! Restart after a crash: a child process (this binary, `--crash-child`) fills a store with
//! 1 KiB events from many sessions in durable batches, reports that it is done and is killed
//! with SIGKILL before it closes anything; then the store is reopened and timed until each
//! session's last event is known (what resuming a session needs). Bytes on disk per event are
//! measured on the same files, before the reopen.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use raft_engine::Engine;
use sessionlog_log::Log;

use crate::appends::EVENT_BYTES;
use crate::feed::FeedKind;
use crate::stats::{dir_bytes, event_json};
use crate::stores::{
    log_options, raft_config, session_name, sqlite_open, wal_config, Kind, Store, WalManager,
    WalRetention,
};

/// Sessions written by the crash child.
pub const SESSIONS: usize = 64;
/// Events per durable batch in the crash child.
pub const BATCH: usize = 100;

/// One store's restart.
#[derive(Debug, Clone)]
pub struct CrashResult {
    /// The store.
    pub kind: Kind,
    /// Events written (and acknowledged) before the kill.
    pub events: u64,
    /// Time from open to knowing every session's last event.
    pub reopen: Duration,
    /// Events the reopened store holds (a check).
    pub found: u64,
    /// Apparent length of its files.
    pub bytes_len: u64,
    /// Allocated bytes of its files.
    pub bytes_alloc: u64,
    /// sessionlog only: apparent and allocated bytes once its sealed segments are compressed.
    pub compressed: Option<(u64, u64)>,
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The child: writes `per_session` events to each of [`SESSIONS`] sessions of `kind` in
/// `dir`, prints `ready` and waits to be killed.
pub fn child(kind: Kind, dir: &Path, per_session: usize) -> io::Result<()> {
    let store = Store::create(kind, dir, SESSIONS, WalRetention::KeepAll, FeedKind::Fixed)?;
    let mut writers = (0..SESSIONS)
        .map(|i| store.writer(i))
        .collect::<io::Result<Vec<_>>>()?;
    let mut written = 0u64;
    for round in 0..per_session.div_ceil(BATCH) {
        let n = BATCH.min(per_session - round * BATCH);
        for (s, w) in writers.iter_mut().enumerate() {
            let events: Vec<Vec<u8>> = (0..n)
                .map(|k| event_json(((s * per_session) + round * BATCH + k) as u64, EVENT_BYTES))
                .collect();
            let refs: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
            w.commit(&refs)?;
            written += n as u64;
        }
    }
    println!("ready {written}");
    io::Write::flush(&mut io::stdout())?;
    // Never close: wait to be killed.
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Runs the child for `kind` in a fresh `dir`, kills it, measures the files and the reopen.
pub fn run(kind: Kind, dir: &Path, per_session: usize) -> io::Result<CrashResult> {
    let _ = std::fs::remove_dir_all(dir);
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("--crash-child")
        .arg(kind.arg())
        .arg(dir)
        .arg(per_session.to_string())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    child.kill()?; // SIGKILL
    let status = child.wait()?;
    let events: u64 = line
        .strip_prefix("ready ")
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io_err(format!("crash child for {} failed ({status})", kind.name())))?;
    let (bytes_len, bytes_alloc) = dir_bytes(dir);

    let (found, reopen) = reopen(kind, dir)?;
    let compressed = if kind == Kind::Sessionlog {
        crate::replay::compress_sealed(dir)?;
        Some(dir_bytes(dir))
    } else {
        None
    };
    let _ = std::fs::remove_dir_all(dir);
    Ok(CrashResult {
        kind,
        events,
        reopen,
        found,
        bytes_len,
        bytes_alloc,
        compressed,
    })
}

/// Opens the store and learns every session's end; returns the events it holds and the time
/// that took (closing the store is not timed).
fn reopen(kind: Kind, dir: &Path) -> io::Result<(u64, Duration)> {
    let t = Instant::now();
    Ok(match kind {
        Kind::SessionlogStore | Kind::SessionlogFallocated => {
            return Err(io_err(
                "this row is not crash-tested on its own: its log is the sessionlog row's",
            ))
        }
        Kind::Sessionlog => {
            let log = Log::open(dir, log_options()).map_err(io_err)?;
            let n = (0..SESSIONS)
                .map(|i| {
                    let id = log.stream_id(&session_name(i)).expect("session exists");
                    log.stream_info(id).map_or(0, |s| s.next_seq.0)
                })
                .sum();
            let d = t.elapsed();
            drop(log);
            (n, d)
        }
        Kind::SqliteFull | Kind::SqliteNormal => {
            let conn = sqlite_open(&dir.join("sessions.db"), kind == Kind::SqliteFull)?;
            let mut stmt = conn
                .prepare("SELECT max(seq) FROM events WHERE session_id = ?1")
                .map_err(io_err)?;
            let mut n = 0u64;
            for i in 0..SESSIONS {
                let max: Option<i64> = stmt.query_row([i as i64], |r| r.get(0)).map_err(io_err)?;
                n += max.map_or(0, |m| m as u64 + 1);
            }
            (n, t.elapsed())
        }
        Kind::Jsonl => {
            // Each file's last complete line, parsed: where the session ends.
            let mut n = 0u64;
            for i in 0..SESSIONS {
                let path = dir.join(format!("{}.jsonl", session_name(i)));
                let mut f = std::fs::File::open(&path)?;
                let len = f.metadata()?.len();
                let tail = len.min(64 << 10);
                f.seek(SeekFrom::Start(len - tail))?;
                let mut buf = Vec::with_capacity(tail as usize);
                f.read_to_end(&mut buf)?;
                let body = match buf.iter().rposition(|&b| b == b'\n') {
                    Some(end) => &buf[..end],
                    None => &buf[..0],
                };
                let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
                let v: serde_json::Value =
                    serde_json::from_slice(&body[start..]).map_err(io_err)?;
                std::hint::black_box(&v);
                // Lines are fixed-size here, so the count follows from the length.
                n += len / (EVENT_BYTES as u64 + 1);
            }
            (n, t.elapsed())
        }
        Kind::RaftEngine => {
            let engine = Engine::open(raft_config(dir)).map_err(io_err)?;
            let n = (0..SESSIONS)
                .map(|i| engine.last_index(i as u64 + 1).unwrap_or(0))
                .sum();
            let d = t.elapsed();
            drop(engine);
            (n, d)
        }
        Kind::Okaywal => {
            let manager = WalManager::default();
            let recovered = manager.recovered.clone();
            let wal = wal_config(dir, WalRetention::KeepAll).open(manager)?;
            let d = t.elapsed();
            drop(wal);
            // Entries are batches of BATCH events.
            (recovered.load(Ordering::Relaxed) * BATCH as u64, d)
        }
    })
}
