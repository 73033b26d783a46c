//! `sessionlog migrate`: copies every session from one `SessionStore` to another (SQLite
//! file, DSH JSONL directory, sessionlog store), losslessly: headers and event envelopes are
//! copied as stored bytes, and events go over in batches that never split a run of chunk
//! deltas, so a DSH writer packs them exactly as the original file did.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use sessionlog::{Store, StoreOptions};
use sessionlog_adapters::{DshDirStore, SqliteStore};
use sessionlog_session::{Event, NewEvent, SessionStore, StoreError};

use crate::Failure;

/// Events read per call from the source.
const READ_PAGE_EVENTS: usize = 4096;
/// Names listed per call.
const LIST_PAGE_NAMES: usize = 1024;

/// Where sessions live, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A DSH JSONL session tree.
    Dsh(PathBuf),
    /// A sessionlog store directory.
    Store(PathBuf),
}

impl Location {
    /// Parses `sqlite:PATH`, `dsh:DIR` or `store:DIR`.
    pub(crate) fn parse(spec: &str) -> Result<Location, Failure> {
        let (kind, path) = spec.split_once(':').unwrap_or(("", spec));
        if path.is_empty() {
            return Err(usage(spec));
        }
        let path = PathBuf::from(path);
        match kind {
            "sqlite" => Ok(Location::Sqlite(path)),
            "dsh" => Ok(Location::Dsh(path)),
            "store" => Ok(Location::Store(path)),
            _ => Err(usage(spec)),
        }
    }

    fn open(&self) -> Result<Box<dyn SessionStore>, Failure> {
        Ok(match self {
            Location::Sqlite(path) => Box::new(SqliteStore::open(path).map_err(failure)?),
            Location::Dsh(dir) => Box::new(DshDirStore::open(dir).map_err(failure)?),
            Location::Store(dir) => Box::new(Store::open(dir, StoreOptions::default())?),
        })
    }

    fn path(&self) -> &Path {
        match self {
            Location::Sqlite(p) | Location::Dsh(p) | Location::Store(p) => p,
        }
    }
}

fn usage(spec: &str) -> Failure {
    Failure::new(
        2,
        format!("cannot read location {spec:?}: write sqlite:PATH, dsh:DIR or store:DIR"),
    )
}

/// Refusals of input exit with 3, everything else with 2.
fn failure(e: StoreError) -> Failure {
    Failure::new(if e.is_refusal() { 3 } else { 2 }, e.to_string())
}

fn in_session(name: &str) -> impl Fn(StoreError) -> Failure + '_ {
    move |e| {
        let code = if e.is_refusal() { 3 } else { 2 };
        Failure::new(code, format!("session {name:?}: {e}"))
    }
}

/// Runs the migration; prints one count line on stdout.
pub(crate) fn migrate(from: &str, to: &str) -> Result<u8, Failure> {
    let (from, to) = (Location::parse(from)?, Location::parse(to)?);
    if from.path() == to.path() {
        return Err(Failure::new(2, "--from and --to name the same place"));
    }
    let source = from.open()?;
    let names = all_names(source.as_ref())?;
    let target = to.open()?;
    // Refuse before writing anything rather than leave a half-done migration.
    for name in &names {
        match target.next_seq(name) {
            Err(StoreError::NoSuchSession(_)) => {}
            Ok(_) => {
                return Err(Failure::new(
                    3,
                    format!(
                        "the destination already has a session named {name:?}; nothing was copied"
                    ),
                ))
            }
            Err(e) => return Err(in_session(name)(e)),
        }
    }
    let bar = ProgressBar::new(names.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} sessions, {msg} events [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut events = 0u64;
    for name in &names {
        events += copy_session(source.as_ref(), target.as_ref(), name)?;
        bar.inc(1);
        bar.set_message(events.to_string());
    }
    bar.finish_and_clear();
    println!(
        "migrated {} sessions, {events} events, from {} to {}",
        names.len(),
        from.path().display(),
        to.path().display()
    );
    Ok(0)
}

fn all_names(store: &dyn SessionStore) -> Result<Vec<String>, Failure> {
    let mut names = Vec::new();
    loop {
        let page = store
            .list(names.last().map(String::as_str), LIST_PAGE_NAMES)
            .map_err(failure)?;
        if page.is_empty() {
            return Ok(names);
        }
        names.extend(page);
    }
}

/// Copies one session; returns its event count.
fn copy_session(
    source: &dyn SessionStore,
    target: &dyn SessionStore,
    name: &str,
) -> Result<u64, Failure> {
    let err = in_session(name);
    let header = source.load_header(name).map_err(&err)?;
    target.create(name, &header).map_err(&err)?;
    let mut next = 0u64;
    let mut pending: Vec<Event> = Vec::new();
    loop {
        let page = source
            .read_from(name, next + pending.len() as u64, READ_PAGE_EVENTS)
            .map_err(&err)?;
        let done = page.len() < READ_PAGE_EVENTS;
        pending.extend(page);
        // Write up to the last event that starts a new run, so no chunk run is split.
        let cut = if done {
            pending.len()
        } else {
            pending
                .iter()
                .rposition(|e| e.stored_type() != "assistant/chunk")
                .unwrap_or(0)
        };
        if cut > 0 {
            let batch: Vec<NewEvent<'_>> = pending[..cut]
                .iter()
                .map(|e| NewEvent::Raw(e.raw().as_bytes()))
                .collect();
            next = target.append(name, &batch, next).map_err(&err)?;
            pending.drain(..cut);
        }
        if done {
            break;
        }
    }
    target.commit(name).map_err(&err)?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_name_their_kind() {
        assert_eq!(
            Location::parse("dsh:/a/b").ok(),
            Some(Location::Dsh("/a/b".into()))
        );
        assert_eq!(
            Location::parse("sqlite:x.db").ok(),
            Some(Location::Sqlite("x.db".into()))
        );
        assert_eq!(
            Location::parse("store:s").ok(),
            Some(Location::Store("s".into()))
        );
        for bad in ["", "dsh:", "/plain/path", "zip:x"] {
            assert!(Location::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
