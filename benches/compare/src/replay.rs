//! Replay of one long session of realistic traffic (the seeded workload generator of the
//! `sessionlog` crate): how long a reader takes to get from files on disk to the session's
//! state. The same events are stored three ways: a sessionlog store, a JSONL file (one line
//! per event, the envelope as written), and SQLite (one row per event).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{CacheUse, Store as SlStore, StoreOptions};
use sessionlog_session::{import_jsonl, ImportOptions, SessionHeader};

use crate::stats::dir_bytes;
use crate::stores::{log_options, sqlite_open};

const SESSION: &str = "long-session";

/// One way of replaying.
#[derive(Debug, Clone)]
pub struct ReplayRow {
    /// What was timed.
    pub what: &'static str,
    /// Which store it reads.
    pub store: &'static str,
    /// Best time of the repetitions.
    pub time: Duration,
    /// Events it produced or folded (a check that every way read the whole session).
    pub events: u64,
}

/// The replay results.
#[derive(Debug, Clone)]
pub struct Replay {
    /// Events in the session.
    pub events: u64,
    /// Bytes of the event envelopes (JSON, no newlines).
    pub payload_bytes: u64,
    /// Timed ways of reading it.
    pub rows: Vec<ReplayRow>,
    /// Allocated bytes on disk per store: sessionlog, JSONL, SQLite.
    pub disk: Vec<(&'static str, u64, u64)>,
    /// Time to build the three stores (not compared).
    pub build: Duration,
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Builds the three stores of a session of `events` events under `dir`, then times each way
/// of reading it, best of `reps`.
pub fn run(dir: &Path, events: u64, reps: usize) -> io::Result<Replay> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let sl_dir = dir.join("sessionlog");
    let jsonl_path = dir.join("long-session.jsonl");
    let db_path = dir.join("sqlite").join("sessions.db");
    std::fs::create_dir_all(db_path.parent().expect("has a parent"))?;

    let built = Instant::now();
    let store_options = StoreOptions::default().with_log(log_options());
    let payload_bytes;
    let stored;
    {
        let store = SlStore::open(&sl_dir, store_options.clone()).map_err(io_err)?;
        let header = SessionHeader::new(SESSION, 1_700_000_000, Some("/work"));
        let header_line = header.raw().to_owned();
        let mut h = store.create_session(SESSION, header).map_err(io_err)?;
        let mut w = Workload::new(42, WorkloadConfig::default());
        let mut time = 1_700_000_000_000i64;
        for e in w.session_start(time) {
            h.append(e).map_err(io_err)?;
        }
        while h.next_seq().get() < events {
            time += 1000;
            let next = h.next_seq().get();
            for e in w.turn(next, time, None) {
                h.append(e).map_err(io_err)?;
            }
            if w.wants_compaction() {
                let surface = h.state().surface();
                if let Some(c) = w.compaction(&surface, h.next_seq(), time) {
                    for e in c {
                        h.append(e).map_err(io_err)?;
                    }
                }
            }
            if w.turns().is_multiple_of(32) {
                h.commit().map_err(io_err)?;
            }
        }
        h.commit().map_err(io_err)?;
        stored = h.next_seq().get();
        let all_events = h.events_from(sessionlog::Seq(0)).map_err(io_err)?;

        // The same envelopes as JSONL (header line first) and as SQLite rows.
        let mut out = io::BufWriter::with_capacity(1 << 20, File::create(&jsonl_path)?);
        out.write_all(header_line.as_bytes())?;
        out.write_all(b"\n")?;
        let mut bytes = 0u64;
        for e in &all_events {
            out.write_all(e.raw().as_bytes())?;
            out.write_all(b"\n")?;
            bytes += e.raw().len() as u64;
        }
        payload_bytes = bytes;
        out.into_inner().map_err(io_err)?.sync_all()?;

        let mut conn = sqlite_open(&db_path, true)?;
        let tx = conn.transaction().map_err(io_err)?;
        {
            let mut stmt = tx
                .prepare("INSERT INTO events (session_id, seq, body) VALUES (?1, ?2, ?3)")
                .map_err(io_err)?;
            for e in &all_events {
                stmt.execute(rusqlite::params![1i64, e.seq().get() as i64, e.raw()])
                    .map_err(io_err)?;
            }
        }
        tx.commit().map_err(io_err)?;
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(io_err)?;
        drop(h);
        store.close().map_err(io_err)?;
    }
    let build = built.elapsed();

    let mut rows = Vec::new();
    let best = |f: &mut dyn FnMut() -> io::Result<u64>| -> io::Result<(Duration, u64)> {
        let mut best = Duration::MAX;
        let mut n = 0;
        for _ in 0..reps {
            let t = Instant::now();
            n = f()?;
            best = best.min(t.elapsed());
        }
        Ok((best, n))
    };

    // sessionlog: reopen and derive with the projection cache deleted (it is rebuilt and
    // written), then with it warm, then the full fold of every event.
    let cache_dir = sl_dir.join(sessionlog::cache::CACHE_DIR);
    let (t, n) = best(&mut || {
        let _ = std::fs::remove_dir_all(&cache_dir);
        let store = SlStore::open(&sl_dir, store_options.clone()).map_err(io_err)?;
        let view = store.view(SESSION).map_err(io_err)?;
        assert!(
            matches!(view.cache, CacheUse::Rebuilt(_)),
            "{:?}",
            view.cache
        );
        Ok(view.events)
    })?;
    rows.push(ReplayRow {
        what: "reopen + derive (`view`), projection cache deleted",
        store: "sessionlog",
        time: t,
        events: n,
    });
    let (t, n) = best(&mut || {
        let store = SlStore::open(&sl_dir, store_options.clone()).map_err(io_err)?;
        let view = store.view(SESSION).map_err(io_err)?;
        assert!(
            matches!(view.cache, CacheUse::Hit { .. }),
            "{:?}",
            view.cache
        );
        Ok(view.events)
    })?;
    rows.push(ReplayRow {
        what: "reopen + derive (`view`), projection cache warm",
        store: "sessionlog",
        time: t,
        events: n,
    });
    let (t, n) = best(&mut || {
        let options = store_options.clone().with_projection_cache(false);
        let store = SlStore::open(&sl_dir, options).map_err(io_err)?;
        let state = store.session_state(SESSION).map_err(io_err)?;
        Ok(state.next_seq().get())
    })?;
    rows.push(ReplayRow {
        what: "reopen + full fold of every event (`session_state`, no checkpoint)",
        store: "sessionlog",
        time: t,
        events: n,
    });

    // JSONL: parse every line with serde_json; then the same file through the session
    // crate's importer, which parses, validates and folds (what a harness does to resume).
    let (t, n) = best(&mut || {
        let mut r = BufReader::with_capacity(1 << 20, File::open(&jsonl_path)?);
        let mut line = String::new();
        let mut n = 0u64;
        let mut first = true;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                break;
            }
            let v: serde_json::Value = serde_json::from_str(line.trim_end()).map_err(io_err)?;
            std::hint::black_box(&v);
            if first {
                first = false;
            } else {
                n += 1;
            }
        }
        Ok(n)
    })?;
    rows.push(ReplayRow {
        what: "read + parse every line (serde_json::Value)",
        store: "JSONL",
        time: t,
        events: n,
    });
    let (t, n) = best(&mut || {
        let bytes = std::fs::read(&jsonl_path)?;
        let imported = import_jsonl(&bytes, &ImportOptions::default()).map_err(io_err)?;
        Ok(imported.session.events().len() as u64)
    })?;
    rows.push(ReplayRow {
        what: "read + parse + validate + fold (`import_jsonl`)",
        store: "JSONL",
        time: t,
        events: n,
    });

    // SQLite: open and select every row of the session in order; then also parse each.
    for parse in [false, true] {
        let (t, n) = best(&mut || {
            let conn = sqlite_open(&db_path, true)?;
            let mut stmt = conn
                .prepare("SELECT body FROM events WHERE session_id = ?1 ORDER BY seq")
                .map_err(io_err)?;
            let mut rows = stmt.query([1i64]).map_err(io_err)?;
            let mut n = 0u64;
            while let Some(row) = rows.next().map_err(io_err)? {
                let body = row.get_ref(0).map_err(io_err)?.as_str().map_err(io_err)?;
                if parse {
                    let v: serde_json::Value = serde_json::from_str(body).map_err(io_err)?;
                    std::hint::black_box(&v);
                } else {
                    std::hint::black_box(body);
                }
                n += 1;
            }
            Ok(n)
        })?;
        rows.push(ReplayRow {
            what: if parse {
                "open + SELECT all rows in order + parse each (serde_json::Value)"
            } else {
                "open + SELECT all rows in order"
            },
            store: "SQLite",
            time: t,
            events: n,
        });
    }
    for r in &rows {
        if r.events != stored {
            eprintln!(
                "warning: {} / {} read {} events, the session has {stored}",
                r.store, r.what, r.events
            );
        }
    }
    let _ = std::fs::remove_dir_all(&cache_dir);
    let mut disk = vec![
        ("sessionlog", dir_bytes(&sl_dir).0, dir_bytes(&sl_dir).1),
        {
            let (len, alloc) = file_bytes(&jsonl_path)?;
            ("JSONL", len, alloc)
        },
        (
            "SQLite",
            dir_bytes(db_path.parent().expect("parent")).0,
            dir_bytes(db_path.parent().expect("parent")).1,
        ),
    ];
    // The same store once `gc --compress` compressed it (active segment sealed first), read cold
    // again; and the JSONL file compressed whole with zstd at its default level, as DeepSeek
    // Harness writes `session.vN.jsonl.zstd`.
    compress_sealed(&sl_dir)?;
    let (t, n) = best(&mut || {
        let _ = std::fs::remove_dir_all(&cache_dir);
        let store = SlStore::open(&sl_dir, store_options.clone()).map_err(io_err)?;
        Ok(store.view(SESSION).map_err(io_err)?.events)
    })?;
    rows.push(ReplayRow {
        what: "reopen + derive (`view`), projection cache deleted, compressed by `gc --compress`",
        store: "sessionlog",
        time: t,
        events: n,
    });
    let _ = std::fs::remove_dir_all(&cache_dir);
    let (len, alloc) = dir_bytes(&sl_dir);
    disk.push(("sessionlog, compressed by `gc --compress`", len, alloc));
    let zst_path = dir.join("long-session.jsonl.zst");
    std::fs::write(
        &zst_path,
        zstd::bulk::compress(&std::fs::read(&jsonl_path)?, 3)?,
    )?;
    let (len, alloc) = file_bytes(&zst_path)?;
    disk.push(("JSONL + zstd", len, alloc));
    Ok(Replay {
        events: stored,
        payload_bytes,
        rows,
        disk,
        build,
    })
}

/// Apparent length and allocated bytes of one file.
fn file_bytes(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.len(), m.blocks() * 512))
}

/// Compresses the store at `dir` as `sessionlog gc --compress` does: the active segment is
/// sealed, then reclaim compresses every sealed segment.
pub fn compress_sealed(dir: &Path) -> io::Result<()> {
    let options = log_options().with_compression(sessionlog_log::Compression::ZSTD);
    let log = sessionlog_log::Log::open(dir, options).map_err(io_err)?;
    log.seal_active().map_err(io_err)?;
    log.reclaim().map_err(io_err)?;
    log.close().map_err(io_err)
}
