//! Every `SessionStore` implementation passes the conformance suite: in-memory, SQLite, the
//! DSH JSONL directory and the engine (`sessionlog::Store`).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sessionlog::{LogOptions, Store, StoreOptions};
use sessionlog_adapters::{DshDirStore, MemoryStore, SqliteStore};
use sessionlog_session::{Event, NewEvent, SessionStore, StoreResult};
use sessionlog_testkit::conformance::{run, Report, Subject};
use tempfile::TempDir;

/// Appends bytes to a file, as a write cut short by a crash leaves them.
fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new()
        .append(true)
        .open(path)
        .expect("file to tear");
    file.write_all(bytes).expect("tear");
}

fn check(report: Report, skipped: &[&str]) {
    report.assert_passed();
    let names: Vec<&str> = report.skipped.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names, skipped,
        "{}: skipped scenarios",
        report.implementation
    );
}

struct Memory(Arc<MemoryStore>);

impl Subject for Memory {
    fn open(&mut self) -> Box<dyn SessionStore> {
        Box::new(self.0.clone())
    }
    fn durable(&self) -> bool {
        false
    }
}

#[test]
fn memory_store_conforms() {
    check(
        run("memory", || Memory(Arc::new(MemoryStore::default()))),
        &[
            "reopen_keeps_committed_events",
            "torn_tail_is_cut_on_reopen",
        ],
    );
}

struct Sqlite(TempDir);

impl Subject for Sqlite {
    fn open(&mut self) -> Box<dyn SessionStore> {
        Box::new(SqliteStore::open(self.0.path().join("sessions.db")).expect("open sqlite"))
    }
}

#[test]
fn sqlite_store_conforms() {
    check(
        run("sqlite", || Sqlite(tempfile::tempdir().expect("tempdir"))),
        &["torn_tail_is_cut_on_reopen"],
    );
}

struct DshDir(TempDir);

impl Subject for DshDir {
    fn open(&mut self) -> Box<dyn SessionStore> {
        Box::new(DshDirStore::open(self.0.path()).expect("open dsh dir"))
    }
    fn tear_tail(&mut self, session: &str) -> bool {
        let store = DshDirStore::open(self.0.path()).expect("open dsh dir");
        append_bytes(
            &store.session_path(session),
            br#"{"type":"turn/start","seq":3,"ti"#,
        );
        true
    }
}

#[test]
fn dsh_directory_store_conforms() {
    check(
        run("dsh dir", || DshDir(tempfile::tempdir().expect("tempdir"))),
        &[],
    );
}

struct Engine(TempDir);

fn active_segment(dir: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("store dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segments.sort();
    segments.pop().expect("a segment file")
}

impl Subject for Engine {
    fn open(&mut self) -> Box<dyn SessionStore> {
        let options =
            StoreOptions::default().with_log(LogOptions::default().with_preallocate(false));
        Box::new(Store::open(self.0.path(), options).expect("open store"))
    }
    fn tear_tail(&mut self, _session: &str) -> bool {
        // The start of a batch that never finished: bytes that cannot validate.
        append_bytes(&active_segment(self.0.path()), &[0x5A; 37]);
        true
    }
}

#[test]
fn sessionlog_store_conforms() {
    check(
        run("sessionlog::Store", || {
            Engine(tempfile::tempdir().expect("tempdir"))
        }),
        &[],
    );
}

/// A store that trusts every writer: it appends at the session's next seq whatever the
/// writer expected.
#[derive(Debug)]
struct Careless(MemoryStore);

impl SessionStore for Careless {
    fn create(&self, name: &str, header: &sessionlog_session::SessionHeader) -> StoreResult<()> {
        self.0.create(name, header)
    }
    fn append(&self, name: &str, events: &[NewEvent<'_>], _expected: u64) -> StoreResult<u64> {
        let next = self.0.next_seq(name)?;
        self.0.append(name, events, next)
    }
    fn commit(&self, name: &str) -> StoreResult<()> {
        self.0.commit(name)
    }
    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        self.0.read_from(name, from, limit)
    }
    fn load_header(&self, name: &str) -> StoreResult<sessionlog_session::SessionHeader> {
        self.0.load_header(name)
    }
    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        self.0.next_seq(name)
    }
    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        self.0.list(after, limit)
    }
    fn delete(&self, name: &str) -> StoreResult<()> {
        self.0.delete(name)
    }
}

struct CarelessSubject;

impl Subject for CarelessSubject {
    fn open(&mut self) -> Box<dyn SessionStore> {
        Box::new(Careless(MemoryStore::default()))
    }
    fn durable(&self) -> bool {
        false
    }
}

#[test]
fn the_suite_catches_a_store_that_ignores_stale_writers() {
    let report = run("careless", || CarelessSubject);
    let failed: Vec<&str> = report.failed.iter().map(|(name, _)| *name).collect();
    assert!(
        failed.contains(&"stale_writer_is_rejected")
            && failed.contains(&"racing_writers_cannot_both_win"),
        "failed: {failed:?}"
    );
}
