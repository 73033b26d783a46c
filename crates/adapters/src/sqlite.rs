//! The SQLite store: one row per event, WAL journal, `synchronous=FULL`. Layout and the
//! reasons for it are in `SQLITE.md`.
//!
//! Every append is one transaction that also advances the session's `next_seq` with a
//! compare-and-set, so the database itself refuses a stale writer even if this process's
//! cache were wrong. With `synchronous=FULL` a committed transaction is durable, so the
//! durability point is the append itself and [`SessionStore::commit`] has nothing left to do.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use sessionlog_session::store_trait::{append_validated, check_name, lock, SessionCache};
use sessionlog_session::{
    Event, FormatVersion, NewEvent, Session, SessionHeader, SessionStore, StoreError, StoreResult,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    header   TEXT NOT NULL,
    next_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    session_id INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    envelope   TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
";

/// Idle sessions kept folded in memory.
const CACHE_SESSIONS: usize = 4096;

struct Open {
    id: i64,
    session: Session,
}

/// Sessions in one SQLite database file.
pub struct SqliteStore {
    connection: Mutex<Connection>,
    version: FormatVersion,
    cache: SessionCache<Open>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

fn io(e: rusqlite::Error) -> StoreError {
    StoreError::io(e)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, validating with the current format.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<SqliteStore> {
        SqliteStore::open_with(path, FormatVersion::current())
    }

    /// Opens the database at `path`, validating appends with `version`.
    pub fn open_with(path: impl AsRef<Path>, version: FormatVersion) -> StoreResult<SqliteStore> {
        let connection = Connection::open(path).map_err(io)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(io)?;
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(io)?;
        connection.execute_batch(SCHEMA).map_err(io)?;
        Ok(SqliteStore {
            connection: Mutex::new(connection),
            version,
            cache: SessionCache::new(CACHE_SESSIONS),
        })
    }

    /// Opens an existing database at `path` for reading only (SQLite's read-only mode):
    /// nothing is created, and every write fails. Fails when `path` does not exist.
    pub fn open_read_only(path: impl AsRef<Path>) -> StoreResult<SqliteStore> {
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(io)?;
        Ok(SqliteStore {
            connection: Mutex::new(connection),
            version: FormatVersion::current(),
            cache: SessionCache::new(CACHE_SESSIONS),
        })
    }

    fn session_row(conn: &Connection, name: &str) -> StoreResult<(i64, String)> {
        conn.query_row(
            "SELECT id, header FROM sessions WHERE name = ?1",
            params![name],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(io)?
        .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))
    }

    fn load(&self, name: &str) -> StoreResult<Open> {
        let conn = lock(&self.connection);
        let (id, header) = Self::session_row(&conn, name)?;
        let corrupt = |detail: String| StoreError::Corrupt {
            session: name.to_owned(),
            detail,
        };
        let header = SessionHeader::parse(&header).map_err(|e| corrupt(e.to_string()))?;
        let mut statement = conn
            .prepare_cached("SELECT seq, envelope FROM events WHERE session_id = ?1 ORDER BY seq")
            .map_err(io)?;
        let mut rows = statement.query(params![id]).map_err(io)?;
        let mut events = Vec::new();
        while let Some(row) = rows.next().map_err(io)? {
            let seq: i64 = row.get(0).map_err(io)?;
            let envelope: String = row.get(1).map_err(io)?;
            if seq != events.len() as i64 {
                return Err(corrupt(format!(
                    "row for seq {seq} where {} was due",
                    events.len()
                )));
            }
            let event =
                Event::parse(&envelope, events.len() as u64).map_err(|e| corrupt(e.to_string()))?;
            events.push(event);
        }
        let session = Session::from_events(header, self.version.clone(), events)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(Open { id, session })
    }

    fn write_rows(&self, name: &str, open: &Open, from: usize, expected: u64) -> StoreResult<()> {
        let mut conn = lock(&self.connection);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(io)?;
        let next = open.session.next_seq().get();
        let changed = tx
            .execute(
                "UPDATE sessions SET next_seq = ?1 WHERE id = ?2 AND next_seq = ?3",
                params![next as i64, open.id, expected as i64],
            )
            .map_err(io)?;
        if changed != 1 {
            let actual: Option<i64> = tx
                .query_row(
                    "SELECT next_seq FROM sessions WHERE id = ?1",
                    params![open.id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(io)?;
            // Another writer of this database got there first: the cached session is stale.
            return Err(StoreError::StaleWriter {
                session: name.to_owned(),
                expected,
                actual: actual.map_or(0, |n| n as u64),
            });
        }
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events (session_id, seq, type, envelope) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(io)?;
            for event in open.session.events().get(from..).unwrap_or_default() {
                insert
                    .execute(params![
                        open.id,
                        event.seq().get() as i64,
                        event.stored_type(),
                        event.raw()
                    ])
                    .map_err(io)?;
            }
        }
        tx.commit().map_err(io)
    }
}

impl SessionStore for SqliteStore {
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()> {
        check_name(name)?;
        self.cache.with_slot(name, |entry| {
            let conn = lock(&self.connection);
            let inserted = conn
                .execute(
                    "INSERT INTO sessions (name, header, next_seq) VALUES (?1, ?2, 0) \
                     ON CONFLICT (name) DO NOTHING",
                    params![name, header.raw()],
                )
                .map_err(io)?;
            if inserted == 0 {
                return Err(StoreError::Exists(name.to_owned()));
            }
            let id = conn.last_insert_rowid();
            let session = Session::new(header.clone(), self.version.clone());
            **entry = Some(Open { id, session });
            Ok(())
        })
    }

    fn append(&self, name: &str, events: &[NewEvent<'_>], expected: u64) -> StoreResult<u64> {
        self.cache.with(
            name,
            || self.load(name),
            |entry| {
                let Some(open) = entry.as_mut() else {
                    return Err(StoreError::NoSuchSession(name.to_owned()));
                };
                let from = append_validated(name, &mut open.session, events, expected)?;
                if let Err(e) = self.write_rows(name, open, from, expected) {
                    // The folded session ran ahead of the database: forget it, reload later.
                    **entry = None;
                    return Err(e);
                }
                Ok(open.session.next_seq().get())
            },
        )
    }

    fn commit(&self, name: &str) -> StoreResult<()> {
        self.next_seq(name).map(drop)
    }

    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        let conn = lock(&self.connection);
        let (id, _) = Self::session_row(&conn, name)?;
        let mut statement = conn
            .prepare_cached(
                "SELECT seq, envelope FROM events WHERE session_id = ?1 AND seq >= ?2 \
                 ORDER BY seq LIMIT ?3",
            )
            .map_err(io)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let mut rows = statement.query(params![id, from, limit]).map_err(io)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(io)? {
            let seq: i64 = row.get(0).map_err(io)?;
            let envelope: String = row.get(1).map_err(io)?;
            out.push(
                Event::parse(&envelope, seq as u64).map_err(|e| StoreError::Corrupt {
                    session: name.to_owned(),
                    detail: e.to_string(),
                })?,
            );
        }
        Ok(out)
    }

    fn load_header(&self, name: &str) -> StoreResult<SessionHeader> {
        let (_, header) = Self::session_row(&lock(&self.connection), name)?;
        SessionHeader::parse(&header).map_err(|e| StoreError::Corrupt {
            session: name.to_owned(),
            detail: e.to_string(),
        })
    }

    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        lock(&self.connection)
            .query_row(
                "SELECT next_seq FROM sessions WHERE name = ?1",
                params![name],
                |row| row.get::<_, i64>(0),
            )
            .optional()
            .map_err(io)?
            .map(|n| n as u64)
            .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))
    }

    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        let conn = lock(&self.connection);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Names compare with SQLite's BINARY collation: memcmp of UTF-8, the trait's order.
        let mut statement = conn
            .prepare_cached(
                "SELECT name FROM sessions WHERE ?1 IS NULL OR name > ?1 ORDER BY name LIMIT ?2",
            )
            .map_err(io)?;
        let names = statement
            .query_map(params![after, limit], |row| row.get(0))
            .map_err(io)?
            .collect::<Result<Vec<String>, _>>()
            .map_err(io)?;
        Ok(names)
    }

    fn delete(&self, name: &str) -> StoreResult<()> {
        self.cache.with_slot(name, |entry| {
            **entry = None;
            let mut conn = lock(&self.connection);
            let tx = conn.transaction().map_err(io)?;
            let (id, _) = Self::session_row(&tx, name)?;
            tx.execute("DELETE FROM events WHERE session_id = ?1", params![id])
                .map_err(io)?;
            tx.execute("DELETE FROM sessions WHERE id = ?1", params![id])
                .map_err(io)?;
            tx.commit().map_err(io)
        })
    }
}
