//! The clean-close file: on a clean close the active segment's footer is written beside the
//! segment (`<segment>.clean`) instead of into it, so the next open reads it instead of
//! scanning the segment. The file is removed (durably) by that open before anything is
//! appended, so it can never describe less than the segment holds. spec: recovery.md#clean-close

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sessionlog_format::{FooterView, IndexEntry, CATALOG_STREAM};

use crate::error::{io_err, Result};
use crate::ids::SegmentId;
use crate::index::ActiveStreamIndex;
use crate::recovery::is_zero;
use crate::segment::ScanOutcome;
use crate::state::{Catalog, State};
use crate::storage::{OpenMode, Storage, StorageFile};

/// Bytes past the described data that must be zero for a clean-close file to be used.
pub(crate) const ZERO_CHECK_BYTES: usize = 1 << 16;

/// The clean-close file of segment `id`.
pub(crate) fn clean_path(dir: &Path, id: SegmentId) -> PathBuf {
    dir.join(format!("{:020}.clean", id.0))
}

/// Whether a directory entry is a clean-close file (or a temporary one).
pub(crate) fn is_clean_file(name: &str) -> bool {
    name.ends_with(".clean") || name.ends_with(".clean.tmp")
}

/// Writes the clean-close file for the active segment. The caller has made everything
/// durable and holds the state; nothing may be appended afterwards.
pub(crate) fn write(storage: &dyn Storage, dir: &Path, st: &State) -> Result<()> {
    let footer = crate::writer::build_footer(st, st.active.id);
    let path = clean_path(dir, st.active.id);
    let tmp = path.with_extension("clean.tmp");
    let _ = storage.remove_file(&tmp);
    let file = storage
        .open_file(&tmp, OpenMode::CreateNew)
        .map_err(io_err("creating", &tmp))?;
    file.write_all_at(&footer, 0)
        .map_err(io_err("writing", &tmp))?;
    file.sync_data().map_err(io_err("syncing", &tmp))?;
    drop(file);
    storage
        .rename(&tmp, &path)
        .map_err(io_err("renaming", &tmp))?;
    storage
        .sync_dir(dir)
        .map_err(io_err("syncing directory", dir))
}

/// Reads the clean-close file of the active segment `id` and, when it verifies and matches
/// the segment, returns the scan it stands for, applied to `catalog`. `None` (catalog
/// untouched) when there is no usable file: the caller scans instead. Failing to read a file
/// that is there is an error, like any other read error during recovery.
pub(crate) fn read(
    storage: &dyn Storage,
    dir: &Path,
    id: SegmentId,
    segment: &[u8],
    catalog: &mut Catalog,
) -> Result<Option<ScanOutcome>> {
    read_with(storage, dir, id, catalog, |data_end| {
        let after = segment.get(usize::try_from(data_end).unwrap_or(usize::MAX)..);
        Ok(after.is_some_and(zeros_after))
    })
}

/// [`read`] for a caller that has not read the segment: `matches(data_end)` says whether the
/// segment matches the file past the data it describes (the bytes after it zero, see
/// [`zeros_after`], and whatever else the caller checks). A failed read there is an error.
pub(crate) fn read_with(
    storage: &dyn Storage,
    dir: &Path,
    id: SegmentId,
    catalog: &mut Catalog,
    matches: impl FnOnce(u64) -> std::io::Result<bool>,
) -> Result<Option<ScanOutcome>> {
    let path = clean_path(dir, id);
    let Some(file) = open_clean(storage, &path)? else {
        return Ok(None);
    };
    let len = file.len().map_err(io_err("reading the size of", &path))?;
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
    file.read_exact_at(&mut bytes, 0)
        .map_err(io_err("reading", &path))?;
    let Ok(view) = FooterView::decode_detached(&bytes, id.0) else {
        return Ok(None);
    };
    // Nothing may lie past the described data (the file is removed before any append, so
    // this holds unless the segment was changed behind the log's back).
    if !matches(view.data_end).map_err(io_err("reading", format!("segment {}", id.0)))? {
        return Ok(None);
    }
    Ok(adopt(&view, &bytes, catalog))
}

/// Whether the segment's bytes just past a clean-close file's data (`after`, from there to
/// the end of the file) are zero, as far as the check reaches ([`ZERO_CHECK_BYTES`]).
pub(crate) fn zeros_after(after: &[u8]) -> bool {
    is_zero(after.get(..ZERO_CHECK_BYTES).unwrap_or(after))
}

/// The clean-close file at `path`, if there is one.
fn open_clean(storage: &dyn Storage, path: &Path) -> Result<Option<Arc<dyn StorageFile>>> {
    match storage.open_file(path, OpenMode::ReadOnly) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("opening", path)(e)),
    }
}

/// The end of the data a verifying clean-close file of segment `id` describes, if there is
/// one. Only a hint: whoever uses it still checks the segment against it.
pub(crate) fn data_end_hint(storage: &dyn Storage, dir: &Path, id: SegmentId) -> Option<u64> {
    let file = storage
        .open_file(&clean_path(dir, id), OpenMode::ReadOnly)
        .ok()?;
    let bytes = crate::snapshot::read_copy(&*file).ok()?;
    Some(FooterView::decode_detached(&bytes, id.0).ok()?.data_end)
}

/// The scan the verified clean-close file `bytes` (whose view is `view`) stands for,
/// applied to `catalog`, when its catalog and stream summaries continue the streams.
fn adopt(view: &FooterView, bytes: &[u8], catalog: &mut Catalog) -> Option<ScanOutcome> {
    let mut trial = catalog.clone();
    let mut out = ScanOutcome {
        data_end: view.data_end,
        ..ScanOutcome::default()
    };
    for entry in view.catalog(bytes).ok()? {
        trial.apply_entry(&entry).ok()?;
        out.catalog.push(entry);
    }
    let mut streams = BTreeMap::new();
    for i in 0..view.stream_count {
        let s = view.stream(bytes, i)?;
        let entries: Vec<IndexEntry> = (0..s.index_count)
            .map(|j| view.index_entry(bytes, s.index_start + j))
            .collect::<Option<_>>()?;
        let ix = ActiveStreamIndex::from_summary(&s, &entries)?;
        if s.stream_id != CATALOG_STREAM {
            let st = trial.streams.get_mut(&s.stream_id)?;
            if st.next_seq != s.first_seq {
                return None;
            }
            st.next_seq = s.last_seq + 1;
        } else if trial.catalog_next_seq != s.last_seq + 1 {
            return None;
        }
        out.records += s.last_seq - s.first_seq + 1;
        streams.insert(s.stream_id, ix);
    }
    out.streams = streams;
    *catalog = trial;
    Some(out)
}
