//! Rewriting a partly live sealed segment in place. spec: segment.md#rewriting-a-segment
//!
//! The live records of the segment (every record of a stream that is not deleted, and every
//! catalog record) are copied, in their order and with their seqs, into a new file with the
//! same segment number, batch by batch; the file gets its own footer and is made durable
//! under a temporary name, then renamed over the segment. The rename is the one step that
//! switches: before it the old file is the segment, after it the new one, and there is never
//! a moment with both or neither. Records of deleted streams are left behind; the catalog
//! checkpoint at the start of the next segment tells recovery where such a stream stood.
//!
//! Readers never see the old file change: it is never written, only unlinked by the rename,
//! and every record handed out from it holds its mapping, whose blocks the operating system
//! keeps until the mapping is dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sessionlog_format::{
    verify_batch, BatchEncoder, FooterView, RecordHeader, CATALOG_STREAM, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN,
};

use crate::error::{corrupted, io_err, Result};
use crate::ids::SegmentId;
use crate::index::{ActiveStreamIndex, SealedExtent};
use crate::log::Inner;
use crate::segment::{note_record, segment_path, ScanOutcome, SealedSegment};
use crate::state::State;
use crate::storage::{OpenMode, Storage};

/// The suffix of a rewritten segment's file before it is renamed over the segment.
const REWRITE_SUFFIX: &str = ".rewrite";

/// Where the rewrite of segment `id` is written before the rename.
fn rewrite_path(dir: &Path, id: SegmentId) -> PathBuf {
    dir.join(format!("{:020}{REWRITE_SUFFIX}", id.0))
}

/// Whether `name` is a rewrite left behind by a crash before its rename.
fn is_rewrite_file(name: &str) -> bool {
    name.strip_suffix(REWRITE_SUFFIX)
        .is_some_and(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Removes every rewrite a crash left behind (the segment it was meant to replace is intact),
/// durably. Called by an open for writing.
pub(crate) fn remove_stale(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<()> {
    let stale: Vec<&String> = names.iter().filter(|n| is_rewrite_file(n)).collect();
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

/// What one rewrite did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rewritten {
    /// Bytes of the segment file before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Record bytes copied (headers and padded payloads).
    pub live_bytes: u64,
}

/// A rewrite worth doing: the streams it drops, and the segment as it is now.
struct Plan {
    segment: Arc<SealedSegment>,
    dropped: Vec<u64>,
}

impl Inner {
    /// Rewrites sealed segment `id` without the records of deleted streams, when its live
    /// share is below the options' threshold and the segment after it starts with a durable
    /// catalog checkpoint. `None` when it is not worth it or not allowed. The caller holds the
    /// reclaim lock.
    pub(crate) fn rewrite_segment(&self, id: SegmentId) -> Result<Option<Rewritten>> {
        let plan = {
            let st = self.state.lock();
            Self::check_usable(&st)?;
            match self.plan(&st, id) {
                Some(plan) => plan,
                None => return Ok(None),
            }
        };
        // The deletes that let records go must be durable before a file without those
        // records is: otherwise a crash could revive a stream whose records are gone.
        self.flush()?;
        let seg = &plan.segment;
        let (image, live_bytes) =
            rewritten_image(seg, &plan.dropped, self.options.index_interval_bytes)?;
        let path = segment_path(&self.dir, id);
        let temp = rewrite_path(&self.dir, id);
        self.write_rewrite(&temp, &image)?;
        if let Err(e) = self.storage.rename(&temp, &path) {
            let _ = self.storage.remove_file(&temp);
            return Err(io_err("renaming", &temp)(e));
        }
        // From here the new file may be the segment on disk; failing to say so durably, or to
        // read it back, leaves memory and disk disagreeing: the store is poisoned.
        let new = self
            .storage
            .sync_dir(&self.dir)
            .map_err(|e| format!("syncing directory {}: {e}", self.dir.display()))
            .and_then(|()| map_sealed(&*self.storage, &path, id).map_err(|e| e.to_string()));
        let new = match new {
            Ok(new) => new,
            Err(what) => {
                let mut st = self.state.lock();
                let what = format!("rewriting segment {id}: {what}");
                return Err(self.poison(&mut st, what));
            }
        };
        let done = Rewritten {
            bytes_before: seg.bytes.len() as u64,
            bytes_after: new.bytes.len() as u64,
            live_bytes,
        };
        swap_in(&mut self.state.lock(), &new, &plan.dropped);
        Ok(Some(done))
    }

    fn plan(&self, st: &State, id: SegmentId) -> Option<Plan> {
        let segment = st.sealed.get(&id)?.clone();
        if !crate::reclaim::next_starts_with_checkpoint(st, id) {
            return None;
        }
        let (mut live, mut total) = (0u64, 0u64);
        let mut dropped = Vec::new();
        for i in 0..segment.footer.stream_count {
            let s = segment.footer.stream(&segment.bytes, i)?;
            total += s.data_bytes;
            let deleted = s.stream_id != CATALOG_STREAM
                && st
                    .catalog
                    .streams
                    .get(&s.stream_id)
                    .is_some_and(|x| x.deleted);
            if deleted {
                dropped.push(s.stream_id);
            } else {
                live += s.data_bytes;
            }
        }
        let threshold = u64::from(self.options.rewrite_below_live_percent);
        (!dropped.is_empty() && live * 100 < threshold * total).then_some(Plan { segment, dropped })
    }

    /// Writes the rewrite under its temporary name and makes it durable.
    fn write_rewrite(&self, temp: &Path, image: &[u8]) -> Result<()> {
        // A rewrite left by an earlier failure is stale: its segment was never replaced.
        match self.storage.remove_file(temp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err("removing", temp)(e))
            }
            _ => {}
        }
        let written = self
            .storage
            .open_file(temp, OpenMode::CreateNew)
            .and_then(|f| {
                f.write_all_at(image, 0)?;
                f.sync_all()
            });
        if let Err(e) = written {
            let _ = self.storage.remove_file(temp);
            return Err(io_err("writing", temp)(e));
        }
        Ok(())
    }
}

/// Maps a sealed segment file and verifies its footer.
fn map_sealed(storage: &dyn Storage, path: &Path, id: SegmentId) -> Result<Arc<SealedSegment>> {
    let file = storage
        .open_file(path, OpenMode::ReadOnly)
        .map_err(io_err("opening", path))?;
    let bytes = file.map_readonly().map_err(io_err("mapping", path))?;
    let footer = FooterView::decode(&bytes, id.0)
        .map_err(|e| corrupted(id, 0, "rewritten footer does not verify", Some(e)))?;
    Ok(Arc::new(SealedSegment { id, bytes, footer }))
}

/// Puts the rewritten segment in the table and points the streams' extents at its footer;
/// the dropped streams lose their extent in it.
fn swap_in(st: &mut State, new: &Arc<SealedSegment>, dropped: &[u64]) {
    let id = new.id;
    for i in 0..new.footer.stream_count {
        let Some(summary) = new.footer.stream(&new.bytes, i) else {
            continue;
        };
        if let Some(s) = st.catalog.streams.get_mut(&summary.stream_id) {
            if let Some(e) = s.sealed.iter_mut().find(|e| u64::from(e.segment) == id.0) {
                e.summary_index = i;
            }
        }
    }
    for stream in dropped {
        if let Some(s) = st.catalog.streams.get_mut(stream) {
            s.sealed
                .retain(|e: &SealedExtent| u64::from(e.segment) != id.0);
        }
    }
    st.sealed.insert(id, new.clone());
}

/// Segment `seg` with the records of `dropped` streams left out: the same header, each batch
/// that keeps a record copied as a new batch of the records it keeps (seqs, kinds, flags and
/// payloads unchanged; offsets, links and checksums of the new place), and a footer. Returns
/// the file's bytes and the record bytes copied.
fn rewritten_image(seg: &SealedSegment, dropped: &[u64], interval: u32) -> Result<(Vec<u8>, u64)> {
    let id = seg.id;
    let bytes = &seg.bytes[..];
    let data_end = usize::try_from(seg.footer.data_end).unwrap_or(usize::MAX);
    let data = bytes
        .get(..data_end)
        .ok_or_else(|| corrupted(id, seg.footer.data_end, "footer lies past the file", None))?;
    let mut out = data.get(..SEGMENT_HEADER_LEN).unwrap_or_default().to_vec();
    let mut scan = ScanOutcome::default();
    let mut at = SEGMENT_HEADER_LEN;
    let mut copied = 0u64;
    while at < data_end {
        let batch = verify_batch(&data[at..], id.0, at as u64)
            .map_err(|e| corrupted(id, at as u64, "batch of a sealed segment", Some(e)))?;
        at = batch.end_offset() as usize;
        let kept: Vec<_> = batch
            .records()
            .filter(|r| !dropped.contains(&r.header.stream_id))
            .collect();
        if kept.is_empty() {
            continue;
        }
        // Everything before this batch is durable by the time the file is renamed in.
        let offset = out.len() as u64;
        let mut enc = BatchEncoder::begin(&mut out, id.0, offset, offset);
        let mut placed = Vec::with_capacity(kept.len());
        for r in &kept {
            let payload = batch.payload(r);
            let prev_offset = last_offset(&scan, &placed, r.header.stream_id);
            let new_offset = enc.push(
                RecordHeader {
                    prev_offset,
                    ..r.header
                },
                payload,
            );
            placed.push((r.header, new_offset));
        }
        enc.finish();
        for (r, (h, offset)) in kept.iter().zip(placed) {
            let payload = batch.payload(r);
            copied += (RECORD_HEADER_LEN + sessionlog_format::padded_len(payload.len())) as u64;
            note_record(&mut scan, &h, offset, payload, interval);
        }
    }
    scan.data_end = out.len() as u64;
    let footer = scan.footer(id);
    out.extend_from_slice(&footer);
    Ok((out, copied))
}

/// The offset of the latest record of `stream` placed so far: in this batch, else before it.
fn last_offset(scan: &ScanOutcome, placed: &[(RecordHeader, u64)], stream: u64) -> u32 {
    placed
        .iter()
        .rev()
        .find(|(h, _)| h.stream_id == stream)
        .map(|(_, o)| *o as u32)
        .or_else(|| {
            scan.streams
                .get(&stream)
                .map(|ix: &ActiveStreamIndex| ix.last_offset)
        })
        .unwrap_or(0)
}
