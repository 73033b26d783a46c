//! The DeepSeek Harness JSONL directory store: `<root>/<session dir>/session.jsonl`, header
//! line first, then one line per event (runs of chunk deltas packed into rows per append, as
//! DSH's writer packs per write batch). The files are read and written in place, so a DSH
//! session tree can be served, appended to and migrated without conversion.
//!
//! The session directory is the session name escaped as DSH escapes ids (each UTF-16 unit
//! outside `[A-Za-z0-9._-]` becomes `~XXXX`; `.` and `..` are escaped whole). DSH itself puts
//! a project directory between the root and the session directory; this store serves one
//! project directory, so point it at `<root>/<projectDir>` to serve a DSH tree.
//!
//! Appends are written to the file at once and made durable by `fdatasync` at commit. On
//! load, a torn tail (a partial or damaged last record, as the session crate's DSH import
//! defines it) is cut off the file, which is then synced; damage followed by a later
//! `turn/end` is reported as corruption and nothing is changed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sessionlog_session::store_trait::{
    append_validated, check_name, pack_jsonl_lines, SessionCache,
};
use sessionlog_session::{
    import_jsonl, Error, Event, FormatVersion, ImportOptions, NewEvent, Session, SessionHeader,
    SessionStore, StoreError, StoreResult,
};

/// The file name of a session's log inside its directory.
pub const SESSION_FILE: &str = "session.jsonl";

/// Longest directory name most file systems allow.
const MAX_DIR_NAME_BYTES: usize = 255;

/// Prefix of a directory being deleted; no escaped name can start with it (`~` is always
/// followed by four hex digits in an escaped name).
const DELETING_PREFIX: &str = "~deleting~";

/// Idle sessions kept folded in memory.
const CACHE_SESSIONS: usize = 1024;

/// The directory name DSH uses for session id `name`.
pub fn encode_session_dir(name: &str) -> String {
    match name {
        "." => return "~002E".to_owned(),
        ".." => return "~002E~002E".to_owned(),
        _ => {}
    }
    let mut out = String::with_capacity(name.len());
    for unit in name.encode_utf16() {
        match char::from_u32(u32::from(unit)) {
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => out.push(c),
            _ => out.push_str(&format!("~{unit:04X}")),
        }
    }
    out
}

/// The session name of a directory written by [`encode_session_dir`]; `None` for any other
/// directory name.
pub fn decode_session_dir(dir: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(dir.len());
    let mut rest = dir;
    while let Some(c) = rest.chars().next() {
        if c == '~' {
            let hex = rest.get(1..5)?;
            if !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
            {
                return None;
            }
            units.push(u16::from_str_radix(hex, 16).ok()?);
            rest = &rest[5..];
        } else {
            units.push(u16::try_from(u32::from(c)).ok()?);
            rest = &rest[c.len_utf8()..];
        }
    }
    let name = String::from_utf16(&units).ok()?;
    (encode_session_dir(&name) == dir).then_some(name)
}

/// The session file DSH reads in a session directory: the newest format generation
/// (`session.vN.jsonl` with the highest N, else `session.jsonl`), plain or `.zstd`; a plain
/// file wins over a compressed one of the same generation. `None` when there is none.
pub fn newest_session_file(dir: &Path) -> io::Result<Option<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut best: Option<((u64, bool), PathBuf)> = None;
    for entry in entries {
        let entry = entry?;
        let Some(rank) = entry.file_name().to_str().and_then(generation_of) else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| rank > *b) {
            best = Some((rank, entry.path()));
        }
    }
    Ok(best.map(|(_, path)| path))
}

/// `(N, plain)` for a DSH session file name: `session.jsonl` is generation 0,
/// `session.vN.jsonl` (N >= 1, no leading zero) generation N, each optionally `.zstd`.
fn generation_of(file_name: &str) -> Option<(u64, bool)> {
    let (stem, plain) = match file_name.strip_suffix(".zstd") {
        Some(stem) => (stem, false),
        None => (file_name, true),
    };
    let middle = stem.strip_prefix("session.")?.strip_suffix("jsonl")?;
    if middle.is_empty() {
        return Some((0, plain));
    }
    let digits = middle.strip_prefix('v')?.strip_suffix('.')?;
    if digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n >= 1).then_some((n, plain))
}

struct Open {
    session: Session,
    /// The file is zstd-compressed: read, never appended to.
    compressed: bool,
    file: File,
    /// Bytes of the file that hold whole lines.
    len: u64,
    /// Appended since the last sync.
    dirty: bool,
}

/// Sessions as DSH `session.jsonl` files under one root directory.
#[derive(Debug)]
pub struct DshDirStore {
    root: PathBuf,
    version: FormatVersion,
    /// Opened by [`DshDirStore::open_read_only`]: nothing on disk is ever changed.
    read_only: bool,
    cache: SessionCache<Open>,
}

fn io(e: io::Error) -> StoreError {
    StoreError::io(e)
}

fn sync_dir(path: &Path) -> StoreResult<()> {
    File::open(path).and_then(|d| d.sync_all()).map_err(io)
}

impl DshDirStore {
    /// Opens (creating if needed) the tree at `root`, validating with the current format.
    pub fn open(root: impl AsRef<Path>) -> StoreResult<DshDirStore> {
        DshDirStore::open_with(root, FormatVersion::current())
    }

    /// Opens the tree at `root`, validating appends with `version`. Directories left by a
    /// delete that a crash interrupted are removed.
    pub fn open_with(root: impl AsRef<Path>, version: FormatVersion) -> StoreResult<DshDirStore> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(io)?;
        for entry in fs::read_dir(&root).map_err(io)? {
            let entry = entry.map_err(io)?;
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(DELETING_PREFIX)
            {
                fs::remove_dir_all(entry.path()).map_err(io)?;
            }
        }
        Ok(DshDirStore {
            root,
            version,
            read_only: false,
            cache: SessionCache::new(CACHE_SESSIONS),
        })
    }

    /// Opens an existing tree at `root` for reading only: nothing is created, removed or cut
    /// (a torn tail is left in the file and skipped in what is read), and every write is
    /// refused. Fails when `root` is not a directory.
    pub fn open_read_only(root: impl AsRef<Path>) -> StoreResult<DshDirStore> {
        let root = root.as_ref().to_path_buf();
        if !fs::metadata(&root).map_err(io)?.is_dir() {
            return Err(io(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            )));
        }
        Ok(DshDirStore {
            root,
            version: FormatVersion::current(),
            read_only: true,
            cache: SessionCache::new(CACHE_SESSIONS),
        })
    }

    /// Refuses a write to a tree opened read-only.
    fn writable(&self) -> StoreResult<()> {
        if self.read_only {
            return Err(io(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} was opened read-only; open it with DshDirStore::open to write",
                    self.root.display()
                ),
            )));
        }
        Ok(())
    }

    /// The file of session `name`: the newest generation present, else where `session.jsonl`
    /// would be.
    pub fn session_path(&self, name: &str) -> PathBuf {
        let dir = self.root.join(encode_session_dir(name));
        newest_session_file(&dir)
            .ok()
            .flatten()
            .unwrap_or_else(|| dir.join(SESSION_FILE))
    }

    fn dir_name(name: &str) -> StoreResult<String> {
        check_name(name)?;
        let dir = encode_session_dir(name);
        if dir.len() > MAX_DIR_NAME_BYTES {
            return Err(StoreError::BadName {
                name: name.to_owned(),
                reason: format!(
                    "its escaped directory name has {} bytes, more than {MAX_DIR_NAME_BYTES}",
                    dir.len()
                ),
            });
        }
        Ok(dir)
    }

    fn load(&self, name: &str) -> StoreResult<Open> {
        let dir = self.root.join(Self::dir_name(name)?);
        let path = newest_session_file(&dir)
            .map_err(io)?
            .ok_or_else(|| StoreError::NoSuchSession(name.to_owned()))?;
        let mut bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NoSuchSession(name.to_owned()))
            }
            Err(e) => return Err(io(e)),
        };
        let options = ImportOptions::default()
            .with_version(self.version.clone())
            .with_repair(false)
            .with_strict_header(false);
        let imported = import_jsonl(&bytes, &options).map_err(|e| StoreError::Corrupt {
            session: name.to_owned(),
            detail: format!("{}: {e}", path.display()),
        })?;
        if self.read_only || imported.zstd {
            // The read side never writes: a torn tail stays in the file, skipped here. A
            // compressed file is only read (appending to one is refused).
            let file = File::open(&path).map_err(io)?;
            let len = imported
                .tail
                .as_ref()
                .map_or(bytes.len(), |tail| tail.committed_bytes);
            return Ok(Open {
                session: imported.session,
                compressed: imported.zstd,
                file,
                len: len as u64,
                dirty: false,
            });
        }
        let file = OpenOptions::new().append(true).open(&path).map_err(io)?;
        if let Some(tail) = &imported.tail {
            // Physical repair, as DSH's load does: cut the never-committed tail, durably.
            file.set_len(tail.committed_bytes as u64).map_err(io)?;
            file.sync_data().map_err(io)?;
            bytes.truncate(tail.committed_bytes);
        }
        let mut open = Open {
            session: imported.session,
            compressed: false,
            file,
            len: bytes.len() as u64,
            dirty: false,
        };
        if !bytes.ends_with(b"\n") {
            // A header line without its line feed: complete it before the first event.
            open.file.write_all(b"\n").map_err(io)?;
            open.len += 1;
            open.dirty = true;
        }
        Ok(open)
    }

    fn with_open<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Open) -> StoreResult<R>,
    ) -> StoreResult<R> {
        self.cache.with(
            name,
            || self.load(name),
            |entry| match entry.as_mut() {
                Some(open) => f(open),
                None => Err(StoreError::NoSuchSession(name.to_owned())),
            },
        )
    }
}

/// A DSH line cannot hold a line feed, and a trailing carriage return would be read as
/// whitespace; refuse both before anything changes.
fn check_single_line(events: &[NewEvent<'_>]) -> StoreResult<()> {
    for (k, event) in events.iter().enumerate() {
        let has_break = match event {
            NewEvent::Raw(bytes) => bytes.iter().any(|b| matches!(b, b'\n' | b'\r')),
            NewEvent::Input(input) => input.data.contains(['\n', '\r']),
        };
        if has_break {
            return Err(StoreError::Invalid(Error::Decode {
                what: "event",
                detail: format!(
                    "event {k} of the batch contains a line break; a JSONL line cannot hold \
                     one (write the JSON without whitespace)"
                ),
            }));
        }
    }
    Ok(())
}

impl SessionStore for DshDirStore {
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()> {
        self.writable()?;
        let dir_name = Self::dir_name(name)?;
        if header.raw().contains(['\n', '\r']) {
            return Err(StoreError::Invalid(Error::Header {
                detail: "a DSH header line cannot hold a line break".into(),
            }));
        }
        self.cache.with_slot(name, |entry| {
            let dir = self.root.join(&dir_name);
            if newest_session_file(&dir).map_err(io)?.is_some() {
                return Err(StoreError::Exists(name.to_owned()));
            }
            // The file is named for the format its header declares, as DSH names it.
            let file_name = header.format().file_name(false);
            let path = dir.join(&file_name);
            // A directory without its file is a create a crash interrupted: reuse it.
            fs::create_dir_all(&dir).map_err(io)?;
            let temp = dir.join(format!("{file_name}.creating"));
            let mut file = File::create(&temp).map_err(io)?;
            file.write_all(header.raw().as_bytes()).map_err(io)?;
            file.write_all(b"\n").map_err(io)?;
            file.sync_all().map_err(io)?;
            fs::rename(&temp, &path).map_err(io)?;
            sync_dir(&dir)?;
            sync_dir(&self.root)?;
            let file = OpenOptions::new().append(true).open(&path).map_err(io)?;
            **entry = Some(Open {
                compressed: false,
                session: Session::new(header.clone(), self.version.clone()),
                file,
                len: header.raw().len() as u64 + 1,
                dirty: false,
            });
            Ok(())
        })
    }

    fn append(&self, name: &str, events: &[NewEvent<'_>], expected: u64) -> StoreResult<u64> {
        self.writable()?;
        check_single_line(events)?;
        self.cache.with(
            name,
            || self.load(name),
            |entry| {
                let Some(open) = entry.as_mut() else {
                    return Err(StoreError::NoSuchSession(name.to_owned()));
                };
                if open.compressed {
                    return Err(io(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!(
                            "session {name:?} is stored zstd-compressed, which this store only \
                             reads; export it plain (sessionlog export) to append to it"
                        ),
                    )));
                }
                let from = append_validated(name, &mut open.session, events, expected)?;
                let lines = pack_jsonl_lines(open.session.events().get(from..).unwrap_or_default());
                if let Err(e) = open.file.write_all(lines.as_bytes()) {
                    // Take back what may have been written, then forget the folded session
                    // (it ran ahead of the file); the next access reloads it from the file.
                    let _ = open.file.set_len(open.len);
                    **entry = None;
                    return Err(io(e));
                }
                open.len += lines.len() as u64;
                open.dirty = true;
                Ok(open.session.next_seq().get())
            },
        )
    }

    fn commit(&self, name: &str) -> StoreResult<()> {
        self.cache.with(
            name,
            || self.load(name),
            |entry| {
                let Some(open) = entry.as_mut() else {
                    return Err(StoreError::NoSuchSession(name.to_owned()));
                };
                if open.dirty {
                    if let Err(e) = open.file.sync_data() {
                        // After a failed fsync the page cache no longer tells what is on
                        // disk: never retry, forget the session and let a reload decide.
                        **entry = None;
                        return Err(io(e));
                    }
                    open.dirty = false;
                }
                Ok(())
            },
        )
    }

    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        self.with_open(name, |open| {
            let start = usize::try_from(from).unwrap_or(usize::MAX);
            Ok(open
                .session
                .events()
                .get(start..)
                .unwrap_or_default()
                .iter()
                .take(limit)
                .cloned()
                .collect())
        })
    }

    fn load_header(&self, name: &str) -> StoreResult<SessionHeader> {
        self.with_open(name, |open| Ok(open.session.header().clone()))
    }

    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        self.with_open(name, |open| Ok(open.session.next_seq().get()))
    }

    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        // The file system keeps no order: read every directory name, then sort.
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Some(name) = entry.file_name().to_str().and_then(decode_session_dir) else {
                continue;
            };
            if after.is_some_and(|a| name.as_str() <= a) {
                continue;
            }
            if newest_session_file(&entry.path()).ok().flatten().is_some() {
                names.push(name);
            }
        }
        names.sort_unstable();
        names.truncate(limit);
        Ok(names)
    }

    fn delete(&self, name: &str) -> StoreResult<()> {
        self.writable()?;
        let dir_name = Self::dir_name(name)?;
        self.cache.with_slot(name, |entry| {
            **entry = None;
            let dir = self.root.join(&dir_name);
            if newest_session_file(&dir).map_err(io)?.is_none() {
                return Err(StoreError::NoSuchSession(name.to_owned()));
            }
            // Rename first so a crash leaves either the session or a directory that the
            // next open removes, never a half-deleted session.
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let doomed = self
                .root
                .join(format!("{DELETING_PREFIX}{}-{nanos}", std::process::id()));
            fs::rename(&dir, &doomed).map_err(io)?;
            sync_dir(&self.root)?;
            fs::remove_dir_all(&doomed).map_err(io)
        })
    }
}
