//! Opening a store: lock, read sealed footers, scan only the active segment, decide with the
//! recovery tables, and make the tail safe to append to. spec: recovery.md

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use sessionlog_format::{
    decode_batch_header_in, parse_segment_file_name, verify_batch_in, FooterView, SegmentCrc,
    SegmentHeader, CATALOG_STREAM, SEGMENT_HEADER_LEN,
};

use crate::error::{corrupted, io_err, Error, Result};
use crate::ids::{Lsn, SegmentId};
use crate::index::SealedExtent;
use crate::log::{Inner, Log, RecoveryReport};
use crate::options::{Access, LogOptions};
use crate::recovery::{
    any_valid_batch, decide_segment, is_zero, FooterFact, HeaderFact, LaterBatchFact, PositionFact,
    RoleFact, SegmentDecision,
};
use crate::segment::{scan_segment, segment_path, ScanOutcome, SealedSegment};
use crate::snapshot::{read_copy, read_prefix, PrefixFile, SnapshotFile};
use crate::state::{ActiveSegment, Catalog, Counters, State};
use crate::storage::{OpenMode, Storage, StorageFile};
use crate::writer::create_segment;

/// The name of the lock file in a store directory.
pub const LOCK_FILE: &str = "LOCK";

/// What a directory holds, as far as opening a store is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDir {
    /// Nothing at that path.
    Absent,
    /// A directory with no entries (a lone `LOCK` file counts as none: it holds no data).
    Empty,
    /// A directory with at least one segment file.
    Store,
    /// Something else: a file, or a directory of other files. Says what was found.
    NotAStore(String),
}

/// Looks at `dir` without changing anything: is it a store, empty, absent or something else?
pub fn classify_dir(storage: &dyn Storage, dir: &Path) -> Result<StoreDir> {
    let names = match storage.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StoreDir::Absent),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Ok(StoreDir::NotAStore("it is not a directory".into()))
        }
        Err(e) => return Err(io_err("listing", dir)(e)),
    };
    if names.iter().any(|n| parse_segment_file_name(n).is_some()) {
        return Ok(StoreDir::Store);
    }
    let others: Vec<&String> = names.iter().filter(|n| *n != LOCK_FILE).collect();
    Ok(match others.first() {
        None => StoreDir::Empty,
        Some(first) => StoreDir::NotAStore(format!(
            "it holds no segment file, but other entries such as {first:?}"
        )),
    })
}

impl StoreDir {
    /// Why this is no store to read from (`None` for a store).
    pub fn why_not_a_store(&self) -> Option<String> {
        match self {
            StoreDir::Store => None,
            StoreDir::Absent => Some("it does not exist".into()),
            StoreDir::Empty => Some("it is empty".into()),
            StoreDir::NotAStore(why) => Some(why.clone()),
        }
    }
}

/// Refuses what `access` may not open; creates the directory when it may.
pub(crate) fn prepare_dir(storage: &dyn Storage, dir: &Path, access: Access) -> Result<()> {
    let found = classify_dir(storage, dir)?;
    match (&found, access) {
        (StoreDir::Absent, Access::CreateOrOpen) => storage
            .create_dir_all(dir)
            .map_err(io_err("creating directory", dir)),
        (StoreDir::Empty, Access::CreateOrOpen) => Ok(()),
        _ => match found.why_not_a_store() {
            None => Ok(()),
            Some(why) => Err(Error::NotAStore {
                dir: dir.to_owned(),
                why,
            }),
        },
    }
}

/// The one open path. With [`Access::ReadOnly`] the same facts are gathered and the same
/// decision table rows chosen as for writing, but every decision is applied to the in-memory
/// view only: nothing is locked, cut, rewritten, removed, created or synced.
pub(crate) fn open(
    storage: Arc<dyn Storage>,
    dir: &Path,
    options: LogOptions,
    access: Access,
) -> Result<Log> {
    let started = Instant::now();
    options.check().map_err(Error::InvalidOptions)?;
    let read_only = access == Access::ReadOnly;
    prepare_dir(&*storage, dir, access)?;
    let lock = if read_only {
        None
    } else {
        let lock = storage
            .try_lock(&dir.join(LOCK_FILE))
            .map_err(io_err("locking", dir.join(LOCK_FILE)))?
            .ok_or_else(|| Error::Locked {
                dir: dir.to_owned(),
            })?;
        Some(lock)
    };
    // One listing serves open: segment files, and clean-close files to remove (open itself
    // creates or removes segments, never clean-close files, before it removes those).
    let names = storage.list_dir(dir).map_err(io_err("listing", dir))?;
    let ids = segment_ids(&names)?;
    let mut report = RecoveryReport {
        segments: ids.len(),
        read_only,
        ..Default::default()
    };
    let mut catalog = Catalog::new();
    // Older segments were reclaimed: the first one present starts with a checkpoint.
    catalog.starts_at_checkpoint = ids.first().is_some_and(|first| first.0 > 1);
    let mut sealed: BTreeMap<SegmentId, Arc<SealedSegment>> = BTreeMap::new();
    let mut store_id: Option<[u8; 16]> = None;
    let mut active: Option<(ActiveSegment, ScanOutcome)> = None;
    let mut next_id = ids.last().map_or(SegmentId(1), |l| SegmentId(l.0 + 1));

    for (i, &id) in ids.iter().enumerate() {
        let last = i + 1 == ids.len();
        let path = segment_path(dir, id);
        let file = storage
            .open_file(
                &path,
                if last && !read_only {
                    OpenMode::ReadWrite
                } else {
                    OpenMode::ReadOnly
                },
            )
            .map_err(io_err("opening", &path))?;
        if last && read_only {
            // After a clean close the last segment is read in place, neither copied nor
            // scanned, as an open for writing trusts the same file.
            if let Some((seg, outcome)) = clean_in_place(
                &*storage,
                dir,
                id,
                (&file, &path),
                &mut store_id,
                &mut catalog,
            )? {
                report.clean_close = true;
                report.active_records = outcome.records;
                active = Some((seg, outcome));
                continue;
            }
        }
        // Mapped, not copied. The last segment may be cut below; its mapping is dropped at
        // the end of this iteration, before anything writes to or truncates the file. A
        // read-only open copies the last segment instead (when no clean close let it read
        // the segment in place): a live writer may still append to it, seal it or cut it,
        // and a mapping must never see a file shrink.
        let bytes = if last && read_only {
            Bytes::from(
                read_last_segment(&*storage, dir, id, &*file).map_err(io_err("reading", &path))?,
            )
        } else {
            file.map_readonly().map_err(io_err("mapping", &path))?
        };
        let header = header_fact(&bytes, id, &mut store_id);
        if header == HeaderFact::Valid && crate::compress::is_compressed(&bytes) {
            // Written whole and synced before its rename, so never torn and never rebuilt:
            // damage is corruption wherever it is. spec: segment.md#compressed-segments
            let seg = sealed_segment(id, 0, bytes, "compressed segment")?;
            load_sealed(&mut catalog, &seg)?;
            sealed.insert(id, seg);
            continue;
        }
        // Where the data of the segment a writer takes over ends, as the file system says
        // before anything but its header was read: the unwritten rest after it reads as
        // zeros by definition (the scan takes it so), so a trailer lying there is no footer.
        // Read through the mapping, it would fault in pages of zeros around it, which the
        // file system then reports as data: the scan would compare the whole unwritten rest
        // of a preallocated segment.
        let data_end = if last && !read_only {
            Some(file.data_end().map_err(io_err("reading", &path))?)
        } else {
            None
        };
        let unwritten_trailer = data_end.is_some_and(|end| {
            end + sessionlog_format::FOOTER_TRAILER_LEN as u64 <= bytes.len() as u64
        });
        let footer = if unwritten_trailer {
            Err(sessionlog_format::FormatError::Zeroed {
                structure: sessionlog_format::Structure::FooterTrailer,
            })
        } else {
            FooterView::decode(&bytes, id.0)
        };
        let footer_fact = if footer.is_ok() {
            FooterFact::Valid
        } else {
            FooterFact::Invalid
        };
        let later =
            if header == HeaderFact::Valid || !any_valid_batch(&bytes, id.0, SEGMENT_HEADER_LEN) {
                LaterBatchFact::None
            } else {
                LaterBatchFact::Some
            };
        let position = if last {
            PositionFact::Last
        } else {
            PositionFact::NotLast
        };
        let row = decide_segment(header, position, footer_fact, later, options.recovery_mode);
        match row.decision {
            SegmentDecision::UseSealed => {
                let view = footer.map_err(|e| corrupted(id, 0, "footer", Some(e)))?;
                if last && !read_only {
                    // The crash may have come between writing this footer and syncing it;
                    // make it durable before a next segment exists (spec: recovery.md#ordering).
                    file.sync_all().map_err(io_err("syncing", &path))?;
                }
                let seg = Arc::new(SealedSegment::new(id, bytes, view, None));
                load_sealed(&mut catalog, &seg)?;
                sealed.insert(id, seg);
            }
            SegmentDecision::RebuildFooter => {
                let why = footer.err().map(|e| e.to_string()).unwrap_or_default();
                let scan = scan_segment(
                    &bytes,
                    id,
                    RoleFact::Sealed,
                    options.recovery_mode,
                    &mut catalog,
                    options.index_interval_bytes,
                )?;
                let footer = scan.footer(id);
                let seg = if read_only {
                    // The segment as the rebuild would leave it, in memory only.
                    let data_end = usize::try_from(scan.data_end).unwrap_or(usize::MAX);
                    let mut image = bytes.get(..data_end).unwrap_or(&bytes).to_vec();
                    image.extend_from_slice(&footer);
                    sealed_segment(
                        id,
                        scan.data_end,
                        Bytes::from(image),
                        "rebuilt footer does not verify",
                    )?
                } else {
                    drop(bytes);
                    rewrite_footer(&*storage, &path, id, scan.data_end, &footer)?
                };
                attach_extents(&mut catalog, &seg);
                report.footers_rebuilt.push((id, why));
                sealed.insert(id, seg);
            }
            SegmentDecision::ScanActive => {
                let (bytes, scan) = if read_only {
                    scan_copy(&*file, &path, bytes, id, &options, &mut catalog)?
                } else {
                    let scan = scan_active(
                        &*storage,
                        dir,
                        (&*file, &path),
                        (&bytes, data_end.unwrap_or(bytes.len() as u64)),
                        id,
                        &options,
                        &mut catalog,
                    )?;
                    (bytes, scan)
                };
                report.clean_close = scan.clean_close;
                report.active_records = scan.outcome.records;
                let file = if read_only {
                    // Reads are served from the copy, up to where its valid data ends. A
                    // copy that is mostly empty (a preallocated segment read whole) is copied
                    // again into a fresh allocation of its data only; one that is mostly data
                    // (read up to a clean close's end, or a full segment) is kept as it is.
                    let end = usize::try_from(scan.outcome.data_end)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    let kept = if end >= bytes.len() / 2 {
                        bytes.slice(..end)
                    } else {
                        Bytes::copy_from_slice(&bytes[..end])
                    };
                    Arc::new(SnapshotFile::new(kept)) as Arc<dyn StorageFile>
                } else {
                    file
                };
                active = Some((
                    ActiveSegment {
                        id,
                        file,
                        path,
                        catalog: Vec::new(),
                        catalog_index: None,
                        allocated: bytes.len() as u64,
                        zeroed: 0,
                    },
                    scan.outcome,
                ));
            }
            SegmentDecision::DiscardTornSegment => {
                drop(file);
                if !read_only {
                    storage
                        .remove_file(&path)
                        .map_err(io_err("removing", &path))?;
                    storage
                        .sync_dir(dir)
                        .map_err(io_err("syncing directory", dir))?;
                }
                report.discarded_segment = Some(id);
                next_id = id;
            }
            SegmentDecision::Corrupt => {
                return Err(corrupted(
                    id,
                    0,
                    format!("segment header is {header}: {}", row.why),
                    None,
                ));
            }
        }
    }

    // Every catalog record is applied now: a stream that lost records to a rewrite must be
    // deleted. spec: segment.md#rewriting-a-segment
    catalog
        .check_holes()
        .map_err(|e| corrupted(ids.last().copied().unwrap_or(SegmentId(0)), 0, e, None))?;
    if !read_only {
        remove_clean_files(&*storage, dir, &names)?;
        crate::rewrite::remove_stale(&*storage, dir, &names)?;
    }
    let store_id = match store_id {
        Some(s) => s,
        None => {
            report.created = ids.is_empty();
            // A read-only view of a store whose only segment never got its header holds
            // nothing; it has no identity to report.
            if read_only {
                [0; 16]
            } else {
                new_store_id()
            }
        }
    };
    let (active, end) = match active {
        Some((mut seg, scan)) => {
            let end = scan.data_end;
            if let Some(cut) = &scan.cut {
                if !read_only {
                    seg.allocated =
                        erase_tail(&*seg.file, &seg.path, seg.id, cut.offset, &options)?;
                }
                report.tail_cut = Some(cut.clone());
            }
            adopt_active(&mut catalog, &mut seg, scan);
            (seg, end)
        }
        None if read_only => {
            // Every segment is sealed (or none was usable): an empty stand-in for the active
            // segment a writer would create next; it holds no record and no file.
            let seg = ActiveSegment {
                id: next_id,
                file: Arc::new(SnapshotFile::new(Bytes::new())),
                path: segment_path(dir, next_id),
                catalog: Vec::new(),
                catalog_index: None,
                allocated: 0,
                zeroed: 0,
            };
            report.no_active_segment = true;
            (seg, SEGMENT_HEADER_LEN as u64)
        }
        None => {
            let seg = create_segment(&*storage, dir, store_id, next_id, &options, false)?;
            (seg, SEGMENT_HEADER_LEN as u64)
        }
    };
    let durable = Lsn::new(active.id, end);
    report.duration = started.elapsed();
    let state = State {
        catalog,
        sealed,
        active,
        buf: Vec::with_capacity(if read_only {
            0
        } else {
            options.write_buffer_bytes.min(8 << 20)
        }),
        spare: Vec::new(),
        buf_offset: end,
        end,
        written: durable,
        synced: durable,
        in_flight: None,
        syncs_in_flight: 0,
        sync_started: durable,
        forming: 0,
        poisoned: None,
        closed: false,
        counters: Counters::default(),
    };
    let inner = Inner {
        storage,
        dir: dir.to_owned(),
        options,
        store_id,
        state: Mutex::new(state),
        group: Default::default(),
        durable_epoch: std::sync::atomic::AtomicU64::new(0),
        idle: Condvar::new(),
        report,
        reclaim_lock: Mutex::new(()),
        _lock: lock,
    };
    Ok(Log {
        inner: Arc::new(inner),
    })
}

/// A read-only copy of the last segment. After a clean close, the clean-close file says where
/// the data ends: then only that much and the zeros after it that a clean open checks are
/// read, not the whole preallocated file. When those bytes are not zero (a writer has
/// appended since), or without such a file, the whole file is copied.
fn read_last_segment(
    storage: &dyn Storage,
    dir: &Path,
    id: SegmentId,
    file: &dyn StorageFile,
) -> std::io::Result<Vec<u8>> {
    if let Some(end) = crate::clean::data_end_hint(storage, dir, id) {
        let want = end.saturating_add(crate::clean::ZERO_CHECK_BYTES as u64);
        if want < file.len()? {
            let prefix = read_prefix(file, want)?;
            let rest = usize::try_from(end).ok().and_then(|e| prefix.get(e..));
            if prefix.len() as u64 == want && rest.is_some_and(is_zero) {
                return Ok(prefix);
            }
        }
    }
    read_copy(file)
}

/// A read-only open's last segment after a clean close, read in place: when its header is
/// valid and its clean-close file verifies and matches it (the check an open for writing
/// makes before trusting that file), the scan the file stands for, applied to `catalog`, and
/// the segment served by positional reads up to the end of its data. `None` (nothing
/// changed) otherwise: the segment is then copied and scanned. spec: recovery.md#read-only-open
fn clean_in_place(
    storage: &dyn Storage,
    dir: &Path,
    id: SegmentId,
    (file, path): (&Arc<dyn StorageFile>, &Path),
    store_id: &mut Option<[u8; 16]>,
    catalog: &mut Catalog,
) -> Result<Option<(ActiveSegment, ScanOutcome)>> {
    let head = crate::snapshot::read_span(&**file, 0, SEGMENT_HEADER_LEN)
        .map_err(io_err("reading", path))?;
    let mut header_store = *store_id;
    if header_fact(&head, id, &mut header_store) != HeaderFact::Valid
        || crate::compress::is_compressed(&head)
    {
        return Ok(None);
    }
    // Only the bytes just past the data are read for the zero check. Every batch is still
    // checked, as the scan checks it, so that damage to acknowledged data is found at open
    // here too; anything that does not verify is left to the copy and its scan, which decide
    // what it is exactly as before.
    let matches = |data_end| {
        let after = crate::snapshot::read_span(&**file, data_end, crate::clean::ZERO_CHECK_BYTES)?;
        Ok(crate::clean::zeros_after(&after) && batches_verify(&**file, id, data_end)?)
    };
    let Some(outcome) = crate::clean::read_with(storage, dir, id, catalog, matches)? else {
        return Ok(None);
    };
    *store_id = header_store;
    let seg = ActiveSegment {
        id,
        file: Arc::new(PrefixFile::new(file.clone(), outcome.data_end)),
        path: path.to_owned(),
        catalog: Vec::new(),
        catalog_index: None,
        allocated: outcome.data_end,
        zeroed: 0,
    };
    Ok(Some((seg, outcome)))
}

/// Whether the data of segment `id` up to `data_end` is a run of batches that all verify
/// (header, frame and every record checksummed), read from `file` a piece at a time into one
/// buffer: the checks of a scan, without a copy of the segment.
fn batches_verify(file: &dyn StorageFile, id: SegmentId, data_end: u64) -> std::io::Result<bool> {
    /// Bytes read at a time (more when one batch is larger).
    const PIECE: usize = 1 << 20;
    let seeded = SegmentCrc::new(id.0);
    let mut window = Window {
        buf: Vec::with_capacity(PIECE),
        base: SEGMENT_HEADER_LEN as u64,
        at: 0,
    };
    loop {
        let offset = window.base + window.at as u64;
        if offset >= data_end {
            return Ok(offset == data_end);
        }
        if !window.fill(file, sessionlog_format::BATCH_HEADER_LEN, PIECE, data_end)? {
            return Ok(false);
        }
        let Ok(header) = decode_batch_header_in(window.rest(), &seeded, offset) else {
            return Ok(false);
        };
        let len = header.batch_len as usize;
        if !window.fill(file, len, PIECE, data_end)? {
            return Ok(false);
        }
        let Some(batch) = window.rest().get(..len) else {
            return Ok(false);
        };
        if verify_batch_in(batch, &seeded, offset).is_err() {
            return Ok(false);
        }
        window.at += len;
    }
}

/// A piece of a file read into a buffer: `buf` holds the file's bytes from `base`, and the
/// reader is at `buf[at]`.
struct Window {
    buf: Vec<u8>,
    base: u64,
    at: usize,
}

impl Window {
    fn rest(&self) -> &[u8] {
        self.buf.get(self.at..).unwrap_or_default()
    }

    /// Makes the buffer hold at least `need` bytes from the reader on (reading `piece` or
    /// more, never past `end`); whether it does (the file may end first).
    fn fill(
        &mut self,
        file: &dyn StorageFile,
        need: usize,
        piece: usize,
        end: u64,
    ) -> std::io::Result<bool> {
        if self.rest().len() >= need {
            return Ok(true);
        }
        // What was read is kept from the reader on, at the buffer's start.
        self.buf.drain(..self.at.min(self.buf.len()));
        self.base += self.at as u64;
        self.at = 0;
        let have = self.buf.len();
        let want = usize::try_from(end.saturating_sub(self.base))
            .unwrap_or(usize::MAX)
            .min(need.max(piece));
        if want > have {
            self.buf.resize(want, 0);
            let got =
                crate::snapshot::read_full(file, &mut self.buf[have..], self.base + have as u64)?;
            self.buf.truncate(have + got);
        }
        Ok(self.buf.len() >= need)
    }
}

/// The scan of the active segment, and whether a clean-close file stood in for it.
struct ActiveScan {
    outcome: ScanOutcome,
    clean_close: bool,
}

/// Scans the active segment after a crash, and makes what it holds durable: bytes found on
/// disk may still sit only in the page cache (the last process was killed, not the machine),
/// and must be durable before any new batch's `synced_through` vouches for them. Data (and the
/// size needed to read it) is what must be durable: `fdatasync`. spec: recovery.md#ordering
/// Only the part that holds data, up to `data_end` (the file system's answer, asked before
/// the open read anything past the header), is looked at: the
/// file system's holes and unwritten extents past it read as zeros by definition, so the scan
/// takes them as the zeros it would have found, without faulting in (and comparing) the
/// unwritten rest of a preallocated segment. spec: recovery.md#tail-table
fn scan_active(
    storage: &dyn Storage,
    dir: &Path,
    (file, path): (&dyn StorageFile, &Path),
    (bytes, data_end): (&[u8], u64),
    id: SegmentId,
    options: &LogOptions,
    catalog: &mut Catalog,
) -> Result<ActiveScan> {
    let sync = || file.sync_data().map_err(io_err("syncing", path));
    if let Some(outcome) = crate::clean::read(storage, dir, id, bytes, catalog)? {
        sync()?;
        return Ok(ActiveScan {
            outcome,
            clean_close: true,
        });
    }
    let with_data = usize::try_from(data_end)
        .ok()
        .and_then(|end| bytes.get(..end))
        .unwrap_or(bytes);
    let mut scan = || {
        scan_segment(
            with_data,
            id,
            RoleFact::Active,
            options.recovery_mode,
            catalog,
            options.index_interval_bytes,
        )
    };
    // The scan reads only the mapping and does no storage call, so the sync runs beside it
    // (its wait on the disk overlaps the scan's CPU work) and storage calls keep their order.
    let (synced, scanned) = std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("sessionlog-open-sync".into())
            .spawn_scoped(s, sync)
        {
            Ok(handle) => {
                let scanned = scan();
                let synced = handle.join().unwrap_or_else(|_| {
                    Err(io_err("syncing", path)(std::io::Error::other(
                        "the syncing thread panicked",
                    )))
                });
                (synced, scanned)
            }
            Err(_) => (sync(), scan()),
        }
    });
    synced?;
    let mut outcome = scanned?;
    if let Some(cut) = &mut outcome.cut {
        // What is cut runs to the end of the file, holes included.
        cut.bytes = (bytes.len() as u64).saturating_sub(cut.offset);
    }
    Ok(ActiveScan {
        outcome,
        clean_close: false,
    })
}

/// Copies a live writer may change the file under: read twice before calling it damage.
const READ_ONLY_SCAN_ATTEMPTS: usize = 4;

/// Scans a read-only copy of the active segment. A live writer appends while the copy is
/// read, so a copy can hold a later batch next to an earlier one that was still being
/// written: it looks like damage behind an attested batch. Damage counts only when a fresh
/// copy shows the same bytes; otherwise the scan is repeated on the fresh copy.
fn scan_copy(
    file: &dyn StorageFile,
    path: &Path,
    mut bytes: Bytes,
    id: SegmentId,
    options: &LogOptions,
    catalog: &mut Catalog,
) -> Result<(Bytes, ActiveScan)> {
    let mut attempt = 1;
    loop {
        let mut trial = catalog.clone();
        let scanned = scan_segment(
            &bytes,
            id,
            RoleFact::Active,
            options.recovery_mode,
            &mut trial,
            options.index_interval_bytes,
        );
        match scanned {
            Ok(outcome) => {
                *catalog = trial;
                let scan = ActiveScan {
                    outcome,
                    clean_close: false,
                };
                return Ok((bytes, scan));
            }
            Err(e @ Error::Corrupted { .. }) => {
                let fresh = read_copy(file).map_err(io_err("reading", path))?;
                if attempt >= READ_ONLY_SCAN_ATTEMPTS || fresh[..] == bytes[..] {
                    return Err(e);
                }
                bytes = Bytes::from(fresh);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Removes every clean-close file, durably: one describes the active segment only until
/// something is appended, so none may survive an open for writing.
fn remove_clean_files(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<()> {
    remove_files_durably(storage, dir, names, crate::clean::is_clean_file)
}

/// Removes every file of `names` that `is` picks, then syncs the directory once if any went.
pub(crate) fn remove_files_durably(
    storage: &dyn Storage,
    dir: &Path,
    names: &[String],
    is: fn(&str) -> bool,
) -> Result<()> {
    let stale: Vec<&String> = names.iter().filter(|n| is(n)).collect();
    for name in &stale {
        let path = dir.join(name);
        storage
            .remove_file(&path)
            .map_err(io_err("removing", &path))?;
    }
    if !stale.is_empty() {
        storage
            .sync_dir(dir)
            .map_err(io_err("syncing directory", dir))?;
    }
    Ok(())
}

fn segment_ids(names: &[String]) -> Result<Vec<SegmentId>> {
    let mut ids: Vec<SegmentId> = names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .map(SegmentId)
        .collect();
    ids.sort();
    for w in ids.windows(2) {
        if w[1].0 != w[0].0 + 1 {
            return Err(corrupted(
                SegmentId(w[0].0 + 1),
                0,
                "segment file is missing",
                None,
            ));
        }
    }
    Ok(ids)
}

fn header_fact(bytes: &[u8], id: SegmentId, store_id: &mut Option<[u8; 16]>) -> HeaderFact {
    match SegmentHeader::decode(bytes) {
        Ok(h) if h.segment_id == id.0 && store_id.is_none_or(|s| s == h.store_id) => {
            *store_id = Some(h.store_id);
            HeaderFact::Valid
        }
        Ok(_) => HeaderFact::Damaged,
        Err(
            sessionlog_format::FormatError::Zeroed { .. }
            | sessionlog_format::FormatError::Truncated { .. },
        ) => HeaderFact::Missing,
        Err(_) => HeaderFact::Damaged,
    }
}

/// Applies a sealed segment's footer: catalog entries first, then stream extents.
fn load_sealed(catalog: &mut Catalog, seg: &Arc<SealedSegment>) -> Result<()> {
    let bytes = &seg.bytes[..];
    for entry in seg
        .footer
        .catalog(bytes)
        .map_err(|e| corrupted(seg.id, seg.footer.data_end, "footer catalog", Some(e)))?
    {
        catalog
            .apply_entry(&entry)
            .map_err(|e| corrupted(seg.id, seg.footer.data_end, e, None))?;
    }
    for i in 0..seg.footer.stream_count {
        let s = seg
            .footer
            .stream(bytes, i)
            .ok_or_else(|| corrupted(seg.id, seg.footer.data_end, "footer stream table", None))?;
        if s.stream_id == CATALOG_STREAM {
            continue;
        }
        let st = catalog.streams.get_mut(&s.stream_id).ok_or_else(|| {
            corrupted(
                seg.id,
                u64::from(s.first_offset),
                format!("records of stream {} that was never created", s.stream_id),
                None,
            )
        })?;
        if s.first_seq != st.next_seq {
            return Err(corrupted(
                seg.id,
                u64::from(s.first_offset),
                format!(
                    "stream {} continues at seq {} where {} was expected",
                    s.stream_id, s.first_seq, st.next_seq
                ),
                None,
            ));
        }
        st.next_seq = s.last_seq + 1;
        st.sealed.push(SealedExtent {
            first_seq: s.first_seq,
            segment: seg.id.0 as u32,
            summary_index: i,
        });
    }
    Ok(())
}

/// Adds the extents of a segment whose records the scan already applied to the catalog.
fn attach_extents(catalog: &mut Catalog, seg: &Arc<SealedSegment>) {
    for i in 0..seg.footer.stream_count {
        let Some(s) = seg.footer.stream(&seg.bytes, i) else {
            continue;
        };
        if let Some(st) = catalog.streams.get_mut(&s.stream_id) {
            st.sealed.push(SealedExtent {
                first_seq: s.first_seq,
                segment: seg.id.0 as u32,
                summary_index: i,
            });
        }
    }
}

/// A sealed segment over `bytes`, whose footer must verify; when it does not, the error names
/// `offset` and says `what`.
pub(crate) fn sealed_segment(
    id: SegmentId,
    offset: u64,
    bytes: Bytes,
    what: &str,
) -> Result<Arc<SealedSegment>> {
    match SealedSegment::decode(id, bytes) {
        Ok(seg) => Ok(Arc::new(seg)),
        Err(crate::Error::Corrupted { detail, format, .. }) => {
            Err(corrupted(id, offset, format!("{what}: {detail}"), format))
        }
        Err(e) => Err(e),
    }
}

/// Writes a rebuilt footer over the damaged one at `data_end`, then maps the segment.
fn rewrite_footer(
    storage: &dyn Storage,
    path: &Path,
    id: SegmentId,
    data_end: u64,
    footer: &[u8],
) -> Result<Arc<SealedSegment>> {
    let file = storage
        .open_file(path, OpenMode::ReadWrite)
        .map_err(io_err("opening", path))?;
    file.write_all_at(footer, data_end)
        .map_err(io_err("writing the footer of", path))?;
    file.set_len(data_end + footer.len() as u64)
        .map_err(io_err("truncating", path))?;
    file.sync_all().map_err(io_err("syncing", path))?;
    let bytes = file.map_readonly().map_err(io_err("mapping", path))?;
    sealed_segment(id, data_end, bytes, "rebuilt footer does not verify")
}

/// Zeroes everything from `offset` on, durably, so no byte of the cut tail (in particular no
/// valid-looking stale batch) can ever be read back as data. Returns the file's length after
/// (what is preallocated again).
fn erase_tail(
    file: &dyn StorageFile,
    path: &Path,
    id: SegmentId,
    offset: u64,
    options: &LogOptions,
) -> Result<u64> {
    file.set_len(offset)
        .map_err(io_err("cutting the torn tail of", path))?;
    let mut allocated = offset;
    if options.preallocate {
        if let Some(len) = crate::writer::next_allocation(id, 0, offset, options) {
            file.allocate(len).map_err(io_err("preallocating", path))?;
            allocated = len;
        }
    }
    file.sync_all().map_err(io_err("syncing", path))?;
    Ok(allocated)
}

/// Turns the scan of the active segment into the in-memory index of the active segment.
fn adopt_active(catalog: &mut Catalog, seg: &mut ActiveSegment, scan: ScanOutcome) {
    for (k, ix) in scan.streams {
        if k == CATALOG_STREAM {
            seg.catalog_index = Some(ix);
        } else if let Some(st) = catalog.streams.get_mut(&k) {
            st.active = Some(ix);
        }
    }
    seg.catalog = scan.catalog;
}

fn new_store_id() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(crate::writer::now_unix_ms());
        h.write_u32(std::process::id());
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}
