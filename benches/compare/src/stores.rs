//! The stores compared, behind one small interface: open a store for `sessions` sessions,
//! then each session's writer commits batches of events durably (or, for SQLite `NORMAL`,
//! as durably as that mode makes them).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use protobuf::well_known_types::BytesValue;
use raft_engine::{Config as RaftConfig, Engine, LogBatch, MessageExt};
use rusqlite::Connection;
use sessionlog::{SessionHandle, SessionHeader};
use sessionlog_log::{Append, Durability, Log, LogOptions, StreamId};

use crate::feed::{Feed, FeedKind};

/// Which store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// sessionlog's log: one stream per session, `Durability::Sync` commits.
    Sessionlog,
    /// The same log with `zero_ahead_bytes = 0`: appends land in fallocated (unwritten)
    /// extents, as before zero-ahead; the baseline of that change in the same run.
    SessionlogFallocated,
    /// sessionlog's `Store`: one session per writer, validated events through
    /// `SessionHandle::append`, made durable by `SessionHandle::commit`.
    SessionlogStore,
    /// SQLite, WAL, `synchronous=FULL`: one row per event, one transaction per commit.
    SqliteFull,
    /// SQLite, WAL, `synchronous=NORMAL` (not durable on power loss: syncs at checkpoints).
    SqliteNormal,
    /// One JSONL file per session, a line per event, `fdatasync` per commit.
    Jsonl,
    /// raft-engine: one raft group per session, `write(batch, sync = true)`.
    RaftEngine,
    /// okaywal: one entry per commit, committed durably.
    Okaywal,
}

impl Kind {
    /// Every store, sessionlog first.
    pub const ALL: [Kind; 8] = [
        Kind::Sessionlog,
        Kind::SessionlogFallocated,
        Kind::SessionlogStore,
        Kind::SqliteFull,
        Kind::SqliteNormal,
        Kind::Jsonl,
        Kind::RaftEngine,
        Kind::Okaywal,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sessionlog => "sessionlog",
            Kind::SessionlogFallocated => "sessionlog, zero-ahead off",
            Kind::SessionlogStore => "sessionlog Store",
            Kind::SqliteFull => "SQLite WAL FULL",
            Kind::SqliteNormal => "SQLite WAL NORMAL",
            Kind::Jsonl => "JSONL + fdatasync",
            Kind::RaftEngine => "raft-engine",
            Kind::Okaywal => "okaywal",
        }
    }

    /// Name on the command line (child processes).
    pub fn arg(self) -> &'static str {
        match self {
            Kind::Sessionlog => "sessionlog",
            Kind::SessionlogFallocated => "sessionlog-fallocated",
            Kind::SessionlogStore => "sessionlog-store",
            Kind::SqliteFull => "sqlite-full",
            Kind::SqliteNormal => "sqlite-normal",
            Kind::Jsonl => "jsonl",
            Kind::RaftEngine => "raft-engine",
            Kind::Okaywal => "okaywal",
        }
    }

    /// Whether it runs the crash-and-reopen test (the `Store` row and the zero-ahead baseline
    /// are the same log as the `sessionlog` row underneath; its reopen is measured there).
    pub fn crash_tested(self) -> bool {
        !matches!(self, Kind::SessionlogStore | Kind::SessionlogFallocated)
    }

    /// The kind named `arg`.
    pub fn from_arg(arg: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.arg() == arg)
    }
}

/// How okaywal is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalRetention {
    /// Its defaults: 1 MiB preallocated files, checkpointed after 768 KiB and recycled (the
    /// checkpointer here does nothing: the entries would have been applied elsewhere).
    Defaults,
    /// Never checkpoint, so the log keeps every entry, as a session store must.
    KeepAll,
}

/// An open store.
pub enum Store {
    /// sessionlog.
    Sessionlog { log: Log, streams: Vec<StreamId> },
    /// sessionlog's `Store`: each session's writer until it is handed out (the writers keep
    /// the store open).
    SessionlogSessions(Mutex<Vec<Option<SessionHandle>>>),
    /// SQLite (both modes): one connection, shared.
    Sqlite(Arc<Mutex<Connection>>),
    /// JSONL: one file per session in `dir`.
    Jsonl { dir: PathBuf },
    /// raft-engine.
    RaftEngine(Arc<Engine>),
    /// okaywal.
    Okaywal(okaywal::WriteAheadLog),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Store::Sessionlog { .. } => "Store::Sessionlog",
            Store::SessionlogSessions(_) => "Store::SessionlogSessions",
            Store::Sqlite(_) => "Store::Sqlite",
            Store::Jsonl { .. } => "Store::Jsonl",
            Store::RaftEngine(_) => "Store::RaftEngine",
            Store::Okaywal(_) => "Store::Okaywal",
        })
    }
}

/// raft-engine entries: a protobuf `BytesValue` holding the 8-byte little-endian entry
/// index, then the event (raft's own `Entry` is index, term and data; this is the same shape
/// without a dependency on the `raft` crate).
#[derive(Debug)]
pub struct RaftEntry;

impl MessageExt for RaftEntry {
    type Entry = BytesValue;

    fn index(e: &BytesValue) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&e.value[..8]);
        u64::from_le_bytes(b)
    }
}

/// okaywal's log manager: recovery reads every entry whole (what rebuilding state from it
/// takes); checkpoints apply nothing.
#[derive(Debug, Default)]
pub struct WalManager {
    /// Entries read by recovery.
    pub recovered: Arc<std::sync::atomic::AtomicU64>,
}

impl okaywal::LogManager for WalManager {
    fn recover(&mut self, entry: &mut okaywal::Entry<'_>) -> io::Result<()> {
        if entry.read_all_chunks()?.is_some() {
            self.recovered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    fn checkpoint_to(
        &mut self,
        _last_checkpointed_id: okaywal::EntryId,
        _checkpointed_entries: &mut okaywal::SegmentReader,
        _wal: &okaywal::WriteAheadLog,
    ) -> io::Result<()> {
        Ok(())
    }
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The name of session `i` (stream name, file name).
pub fn session_name(i: usize) -> String {
    format!("session-{i:04}")
}

/// sessionlog's options for the comparison: the defaults.
pub fn log_options() -> LogOptions {
    LogOptions::default()
}

/// raft-engine's configuration: its defaults in `dir`.
pub fn raft_config(dir: &Path) -> RaftConfig {
    RaftConfig {
        dir: dir.display().to_string(),
        ..RaftConfig::default()
    }
}

/// okaywal's configuration.
pub fn wal_config(dir: &Path, retention: WalRetention) -> okaywal::Configuration {
    let c = okaywal::Configuration::default_for(dir);
    match retention {
        WalRetention::Defaults => c,
        WalRetention::KeepAll => c
            .preallocate_bytes(64 << 20)
            .checkpoint_after_bytes(u64::MAX),
    }
}

/// Opens (creating) the SQLite database `path` in WAL mode with `synchronous` set.
pub fn sqlite_open(path: &Path, full: bool) -> io::Result<Connection> {
    let conn = Connection::open(path).map_err(io_err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(io_err)?;
    conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
        .map_err(io_err)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS events (
            session_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;",
    )
    .map_err(io_err)?;
    Ok(conn)
}

impl Store {
    /// Creates `kind` in the empty directory `dir` with `sessions` sessions, whose events
    /// will be `feed`'s.
    pub fn create(
        kind: Kind,
        dir: &Path,
        sessions: usize,
        retention: WalRetention,
        feed: FeedKind,
    ) -> io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        Ok(match kind {
            Kind::SessionlogStore => {
                let store = sessionlog::Store::open(
                    dir,
                    sessionlog::StoreOptions::default().with_log(log_options()),
                )
                .map_err(io_err)?;
                let mut handles = Vec::with_capacity(sessions);
                for i in 0..sessions {
                    let name = session_name(i);
                    let mut h = store
                        .create_session(&name, SessionHeader::new(&name, 0, None))
                        .map_err(io_err)?;
                    for input in feed.prologue() {
                        h.append(input).map_err(io_err)?;
                    }
                    h.commit().map_err(io_err)?;
                    handles.push(Some(h));
                }
                Store::SessionlogSessions(Mutex::new(handles))
            }
            Kind::Sessionlog | Kind::SessionlogFallocated => {
                let options = match kind {
                    Kind::SessionlogFallocated => log_options().with_zero_ahead_bytes(0),
                    _ => log_options(),
                };
                let log = Log::open(dir, options).map_err(io_err)?;
                let streams = (0..sessions)
                    .map(|i| log.create_stream(&session_name(i)).map_err(io_err))
                    .collect::<io::Result<Vec<_>>>()?;
                log.flush().map_err(io_err)?;
                Store::Sessionlog { log, streams }
            }
            Kind::SqliteFull | Kind::SqliteNormal => {
                let conn = sqlite_open(&dir.join("sessions.db"), kind == Kind::SqliteFull)?;
                Store::Sqlite(Arc::new(Mutex::new(conn)))
            }
            Kind::Jsonl => Store::Jsonl {
                dir: dir.to_owned(),
            },
            Kind::RaftEngine => {
                Store::RaftEngine(Arc::new(Engine::open(raft_config(dir)).map_err(io_err)?))
            }
            Kind::Okaywal => {
                Store::Okaywal(wal_config(dir, retention).open(WalManager::default())?)
            }
        })
    }

    /// The writer of session `i`.
    pub fn writer(&self, i: usize) -> io::Result<Writer> {
        Ok(match self {
            Store::Sessionlog { log, streams } => Writer::Sessionlog {
                log: log.clone(),
                stream: streams[i],
            },
            Store::SessionlogSessions(handles) => Writer::SessionlogStore(Box::new(
                handles
                    .lock()
                    .get_mut(i)
                    .and_then(Option::take)
                    .ok_or_else(|| io::Error::other(format!("no writer for session {i}")))?,
            )),
            Store::Sqlite(conn) => Writer::Sqlite {
                conn: conn.clone(),
                session: i as i64,
                next: 0,
            },
            Store::Jsonl { dir } => {
                let path = dir.join(format!("{}.jsonl", session_name(i)));
                let file = OpenOptions::new().create(true).append(true).open(&path)?;
                // The new file's directory entry must be durable too.
                File::open(dir)?.sync_all()?;
                Writer::Jsonl {
                    file,
                    line: Vec::new(),
                }
            }
            Store::RaftEngine(engine) => Writer::RaftEngine {
                engine: engine.clone(),
                group: i as u64 + 1,
                next: 1,
                batch: LogBatch::with_capacity(4),
            },
            Store::Okaywal(wal) => Writer::Okaywal {
                wal: wal.clone(),
                session: i as u64,
            },
        })
    }
}

/// One session's writer.
pub enum Writer {
    /// sessionlog.
    Sessionlog { log: Log, stream: StreamId },
    /// sessionlog's `Store`.
    SessionlogStore(Box<SessionHandle>),
    /// SQLite.
    Sqlite {
        conn: Arc<Mutex<Connection>>,
        session: i64,
        next: i64,
    },
    /// JSONL.
    Jsonl { file: File, line: Vec<u8> },
    /// raft-engine.
    RaftEngine {
        engine: Arc<Engine>,
        group: u64,
        next: u64,
        batch: LogBatch,
    },
    /// okaywal.
    Okaywal {
        wal: okaywal::WriteAheadLog,
        session: u64,
    },
}

impl Writer {
    /// Commits one event of `feed` durably: the `Store` appends the event itself (validated
    /// and folded), every other store its envelope bytes.
    pub fn commit_next(&mut self, feed: &mut Feed) -> io::Result<()> {
        match self {
            Writer::SessionlogStore(handle) => {
                handle.append(feed.next_input()?).map_err(io_err)?;
                handle.commit().map_err(io_err)
            }
            _ => {
                let bytes = feed.next_bytes()?;
                self.commit(&[&bytes])
            }
        }
    }

    /// Commits `events` as one batch; returns once it is durable (as the store defines it).
    pub fn commit(&mut self, events: &[&[u8]]) -> io::Result<()> {
        match self {
            Writer::SessionlogStore(_) => {
                return Err(io::Error::other(
                    "the Store takes events, not bytes: use commit_next",
                ))
            }
            Writer::Sessionlog { log, stream } => {
                let batch: Vec<Append<'_>> =
                    events.iter().map(|e| Append::new(*stream, 1, e)).collect();
                log.commit(&batch, Durability::Sync).map_err(io_err)?;
            }
            Writer::Sqlite {
                conn,
                session,
                next,
            } => {
                let mut conn = conn.lock();
                let tx = conn.transaction().map_err(io_err)?;
                {
                    let mut stmt = tx
                        .prepare_cached(
                            "INSERT INTO events (session_id, seq, body) VALUES (?1, ?2, ?3)",
                        )
                        .map_err(io_err)?;
                    for e in events {
                        let body = std::str::from_utf8(e).map_err(io_err)?;
                        stmt.execute(rusqlite::params![*session, *next, body])
                            .map_err(io_err)?;
                        *next += 1;
                    }
                }
                tx.commit().map_err(io_err)?;
            }
            Writer::Jsonl { file, line } => {
                line.clear();
                for e in events {
                    line.extend_from_slice(e);
                    line.push(b'\n');
                }
                file.write_all(line)?;
                file.sync_data()?;
            }
            Writer::RaftEngine {
                engine,
                group,
                next,
                batch,
            } => {
                let entries: Vec<BytesValue> = events
                    .iter()
                    .map(|e| {
                        let mut value = Vec::with_capacity(8 + e.len());
                        value.extend_from_slice(&next.to_le_bytes());
                        value.extend_from_slice(e);
                        *next += 1;
                        let mut v = BytesValue::new();
                        v.value = value;
                        v
                    })
                    .collect();
                batch
                    .add_entries::<RaftEntry>(*group, &entries)
                    .map_err(io_err)?;
                engine.write(batch, true).map_err(io_err)?;
            }
            Writer::Okaywal { wal, session } => {
                let mut entry = wal.begin_entry()?;
                let mut chunk = Vec::with_capacity(8 + events.first().map_or(0, |e| e.len()));
                for e in events {
                    chunk.clear();
                    chunk.extend_from_slice(&session.to_le_bytes());
                    chunk.extend_from_slice(e);
                    entry.write_chunk(&chunk)?;
                }
                entry.commit()?;
            }
        }
        Ok(())
    }
}
