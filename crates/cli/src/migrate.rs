//! `sessionlog migrate`: copies every session from one `SessionStore` to another (SQLite
//! file, DSH JSONL directory, sessionlog store), losslessly: headers and event envelopes are
//! copied as stored bytes, and events go over in batches that never split a run of chunk
//! deltas, so a DSH writer packs them exactly as the original file did.
//!
//! The source is only read: SQLite files and DSH trees are opened read-only, and a source that
//! does not exist is refused before anything is created, at the source or the destination. A
//! `dsh:` source may be a DSH home (holding `sessions/`), its `sessions/` root (one directory
//! per project), or one project directory (one directory per session); session names are the
//! DSH session ids. A source without sessions is refused unless `--allow-empty`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use sessionlog::Access;
use sessionlog_adapters::{
    decode_session_dir, encode_session_dir, newest_session_file, DshDirStore, SqliteStore,
};
use sessionlog_session::{
    export_format, file_header, import_and_export_to, import_jsonl, ChildFact, DshFormat, Event,
    ExportOptions, ImportOptions, NewEvent, SessionStore, StoreError,
};

use crate::{open_store, Failure};

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

    /// Opens a destination (a sessionlog store is created when absent or empty).
    fn open(&self) -> Result<Box<dyn SessionStore>, Failure> {
        Ok(match self {
            Location::Sqlite(path) => Box::new(SqliteStore::open(path).map_err(Failure::from)?),
            Location::Dsh(dir) => Box::new(DshDirStore::open(dir).map_err(Failure::from)?),
            Location::Store(dir) => Box::new(open_store(dir, Access::CreateOrOpen)?),
        })
    }

    fn path(&self) -> &Path {
        match self {
            Location::Sqlite(p) | Location::Dsh(p) | Location::Store(p) => p,
        }
    }
}

/// The source, opened for reading: one or more stores (a DSH root has one per project).
struct Source {
    stores: Vec<Box<dyn SessionStore>>,
    /// What was found, for the user.
    found: String,
}

/// A directory that names a session in DSH's layout: `<dir>/session.jsonl`.
fn is_session_dir(path: &Path) -> bool {
    newest_session_file(path).ok().flatten().is_some()
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(decode_session_dir)
            .is_some()
}

/// The subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::new(2, format!("reading {}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Failure::new(2, format!("reading {}: {e}", dir.display())))?
            .path();
        if path.is_dir() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn missing(kind: &str, path: &Path) -> Failure {
    Failure::new(
        2,
        format!(
            "the source {kind} {} does not exist; nothing was created or copied",
            path.display()
        ),
    )
}

impl Location {
    /// Opens the source for reading, refusing one that does not exist.
    fn open_source(&self) -> Result<Source, Failure> {
        match self {
            Location::Sqlite(path) => {
                if !path.is_file() {
                    return Err(missing("SQLite file", path));
                }
                let store = SqliteStore::open_read_only(path).map_err(Failure::from)?;
                Ok(Source {
                    stores: vec![Box::new(store)],
                    found: format!("SQLite file {}", path.display()),
                })
            }
            Location::Store(dir) => {
                if !dir.is_dir() {
                    return Err(missing("store directory", dir));
                }
                let empty = std::fs::read_dir(dir)
                    .map_err(|e| Failure::new(2, format!("reading {}: {e}", dir.display())))?
                    .next()
                    .is_none();
                // An empty directory holds no store: opening it would make one there.
                let stores: Vec<Box<dyn SessionStore>> = if empty {
                    Vec::new()
                } else {
                    vec![Box::new(open_store(dir, Access::ReadOnly)?)]
                };
                Ok(Source {
                    stores,
                    found: format!("store {}", dir.display()),
                })
            }
            Location::Dsh(dir) => open_dsh_source(dir),
        }
    }
}

/// Finds the DSH session directories under `dir`: a DSH home, a `sessions/` root or one
/// project directory.
fn open_dsh_source(dir: &Path) -> Result<Source, Failure> {
    if !dir.is_dir() {
        return Err(missing("DSH directory", dir));
    }
    let home = dir.join("sessions").is_dir() && !is_session_dir(&dir.join("sessions"));
    let root = if home {
        dir.join("sessions")
    } else {
        dir.to_path_buf()
    };
    // Session directories directly under the root make it a project directory; directories
    // holding session directories are projects of a sessions root. (A root may hold both.)
    let mut projects = Vec::new();
    let mut direct_sessions = false;
    for sub in subdirs(&root)? {
        if is_session_dir(&sub) {
            direct_sessions = true;
        } else if subdirs(&sub)?.iter().any(|d| is_session_dir(d)) {
            projects.push(sub);
        }
    }
    let what = match (home, direct_sessions, projects.is_empty()) {
        (true, _, _) => "DSH home",
        (false, true, true) => "DSH project directory",
        (false, false, false) => "DSH sessions root",
        _ => "DSH directory",
    };
    let project_count = projects.len() + usize::from(direct_sessions);
    if direct_sessions {
        projects.insert(0, root.clone());
    }
    let stores = projects
        .iter()
        .map(|p| {
            DshDirStore::open_read_only(p)
                .map(|s| Box::new(s) as Box<dyn SessionStore>)
                .map_err(Failure::from)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Source {
        stores,
        found: format!(
            "{what} {} ({})",
            dir.display(),
            plural(project_count, "project", "projects")
        ),
    })
}

fn usage(spec: &str) -> Failure {
    Failure::new(
        2,
        format!("cannot read location {spec:?}: write sqlite:PATH, dsh:DIR or store:DIR"),
    )
}

fn in_session(name: &str) -> impl Fn(StoreError) -> Failure + '_ {
    move |e| {
        Failure::new(
            crate::exit_code(e.class()),
            format!("session {name:?}: {e}"),
        )
    }
}

/// How a migration reports its progress.
enum Progress {
    /// An indicatif bar on a terminal.
    Bar(ProgressBar),
    /// One plain line per session on stderr otherwise.
    Lines { done: u64, total: u64 },
}

impl Progress {
    fn new(total: u64) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::Lines { done: 0, total };
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} sessions, {msg} events [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress::Bar(bar)
    }

    fn session_done(&mut self, name: &str, events: u64, total_events: u64) {
        match self {
            Progress::Bar(bar) => {
                bar.inc(1);
                bar.set_message(total_events.to_string());
            }
            Progress::Lines { done, total } => {
                *done += 1;
                let _ = writeln!(
                    std::io::stderr(),
                    "[{done}/{total}] {name}: {}",
                    plural(events as usize, "event", "events")
                );
            }
        }
    }

    fn finish(self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Runs the migration; prints what it found, then one count line, on stdout.
pub(crate) fn migrate(
    from: &str,
    to: &str,
    allow_empty: bool,
    dsh_write: Option<ExportOptions>,
) -> Result<u8, Failure> {
    let (from, to) = (Location::parse(from)?, Location::parse(to)?);
    if from.path() == to.path() {
        return Err(Failure::new(2, "--from and --to name the same place"));
    }
    if dsh_write.is_some() && !matches!(to, Location::Dsh(_)) {
        return Err(Failure::new(
            2,
            "--format-version and --compress apply to a dsh: destination only",
        ));
    }
    let source = from.open_source()?;
    let names = source_names(&source)?;
    println!(
        "found {} in {}",
        plural(names.len(), "session", "sessions"),
        source.found
    );
    if names.is_empty() && !allow_empty {
        return Err(Failure::new(
            3,
            format!(
                "{} holds no sessions; nothing was copied (pass --allow-empty to accept an \
                 empty source)",
                from.path().display()
            ),
        ));
    }
    // Refuse before writing anything rather than leave a half-done migration: every source
    // session must load (a DSH or SQLite store validates it whole), and none may exist yet.
    for (store, name) in &names {
        source.stores[*store]
            .next_seq(name)
            .map_err(in_session(name))?;
    }
    let target = to.open()?;
    for (_, name) in &names {
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
    let mut progress = Progress::new(names.len() as u64);
    let mut events = 0u64;
    let rewrite = match (&dsh_write, &to) {
        (Some(options), Location::Dsh(dir)) => Some((options, dir)),
        _ => None,
    };
    let mut copied = Vec::with_capacity(names.len());
    for (store, name) in &names {
        let count = copy_session(source.stores[*store].as_ref(), target.as_ref(), name)?;
        events += count;
        if rewrite.is_none() {
            progress.session_done(name, count, events);
        }
        copied.push(count);
    }
    if let Some((options, dir)) = rewrite {
        // DSH's migration of a parent to V4 lists the parent's children, which are among
        // the sessions just copied.
        let children = if options.format == Some(DshFormat::LATEST) {
            children_in(dir, &names)?
        } else {
            HashMap::new()
        };
        let mut done = 0;
        for ((_, name), count) in names.iter().zip(copied) {
            rewrite_dsh_session(dir, name, options, &children)?;
            done += count;
            progress.session_done(name, count, done);
        }
    }
    progress.finish();
    println!(
        "migrated {}, {}, from {} to {}",
        plural(names.len(), "session", "sessions"),
        plural(events as usize, "event", "events"),
        from.path().display(),
        to.path().display()
    );
    Ok(0)
}

/// Rewrites the file of session `name` that the copy wrote under `dir` in the format and
/// compression asked for, under the name DSH gives it (`session.vN.jsonl[.zstd]`): written
/// beside it as it is made, synced, renamed into place, then the plain copy removed. A format
/// that lacks one of the session's events refuses (exit 3) with the reason, and leaves the
/// copy as it was. A migration to V4 lists the session's `children` (by parent id).
fn rewrite_dsh_session(
    dir: &Path,
    name: &str,
    options: &ExportOptions,
    children: &HashMap<String, Vec<ChildFact>>,
) -> Result<(), Failure> {
    let err = |e: std::io::Error| Failure::new(2, format!("session {name:?}: {e}"));
    let session_dir = dir.join(encode_session_dir(name));
    let written = newest_session_file(&session_dir)
        .map_err(err)?
        .ok_or_else(|| Failure::new(2, format!("session {name:?}: its copy is missing")))?;
    let bytes = std::fs::read(&written).map_err(err)?;
    let refused = |e: sessionlog_session::Error| Failure::new(3, format!("session {name:?}: {e}"));
    let header = file_header(&bytes).map_err(refused)?;
    let options = options
        .clone()
        .with_children(children.get(header.id()).cloned().unwrap_or_default());
    // The file's name depends on the format written, known only once the import has run:
    // the text goes to a temporary file first.
    let temp = session_dir.join("session.writing");
    let mut file = std::fs::File::create(&temp).map_err(err)?;
    let imported = match import_and_export_to(
        &bytes,
        &ImportOptions::default().with_repair(false),
        &options,
        &mut file,
    ) {
        Ok(imported) => imported,
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(&temp);
            return Err(refused(e));
        }
    };
    drop(bytes);
    let target = match options.format {
        Some(format) => format,
        None => export_format(&imported.session).map_err(refused)?,
    };
    drop(imported);
    file.sync_all().map_err(err)?;
    let final_path = session_dir.join(target.file_name(options.zstd));
    std::fs::rename(&temp, &final_path).map_err(err)?;
    if written != final_path {
        std::fs::remove_file(&written).map_err(err)?;
    }
    std::fs::File::open(&session_dir)
        .and_then(|d| d.sync_all())
        .map_err(err)
}

/// The children of every parent among the sessions copied to `dir`, by parent id: each
/// sub-agent session (its header says `origin: "subagent"`) read once.
fn children_in(
    dir: &Path,
    names: &[(usize, String)],
) -> Result<HashMap<String, Vec<ChildFact>>, Failure> {
    let mut children: HashMap<String, Vec<ChildFact>> = HashMap::new();
    for (_, name) in names {
        let err = |e: std::io::Error| Failure::new(2, format!("session {name:?}: {e}"));
        let refused =
            |e: sessionlog_session::Error| Failure::new(3, format!("session {name:?}: {e}"));
        let Some(path) = newest_session_file(&dir.join(encode_session_dir(name))).map_err(err)?
        else {
            continue;
        };
        let bytes = std::fs::read(&path).map_err(err)?;
        let header = file_header(&bytes).map_err(refused)?;
        let Some(parent) = header.parent_session().filter(|_| header.is_subagent()) else {
            continue;
        };
        let imported =
            import_jsonl(&bytes, &ImportOptions::default().with_repair(false)).map_err(refused)?;
        let session = imported.session;
        if let Some(fact) = ChildFact::of(parent, session.header(), session.events()) {
            children.entry(parent.to_owned()).or_default().push(fact);
        }
    }
    Ok(children)
}

/// Every session of the source with the index of the store that holds it, in name order.
/// A name found in two stores (two DSH projects) is refused: the destination has one namespace.
fn source_names(source: &Source) -> Result<Vec<(usize, String)>, Failure> {
    let mut names = Vec::new();
    for (k, store) in source.stores.iter().enumerate() {
        names.extend(all_names(store.as_ref())?.into_iter().map(|n| (k, n)));
    }
    names.sort_by(|a, b| a.1.cmp(&b.1));
    if let Some(pair) = names.windows(2).find(|p| p[0].1 == p[1].1) {
        return Err(Failure::new(
            3,
            format!(
                "session {:?} appears in two projects of the source; nothing was copied \
                 (migrate the projects one at a time, to different destinations)",
                pair[0].1
            ),
        ));
    }
    Ok(names)
}

fn all_names(store: &dyn SessionStore) -> Result<Vec<String>, Failure> {
    let mut names = Vec::new();
    loop {
        let page = store
            .list(names.last().map(String::as_str), LIST_PAGE_NAMES)
            .map_err(Failure::from)?;
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
