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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use sessionlog_format::{
    frame_batch_in, BatchEncoder, RecordHeader, RecordView, SegmentCrc, StreamSummary,
    BATCH_HEADER_LEN, BATCH_TRAILER_LEN, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};

use crate::compress::BlockCuts;
use crate::error::{corrupted, io_err, Result};
use crate::ids::SegmentId;
use crate::log::Inner;
use crate::open::sealed_segment;
use crate::options::Compression;
use crate::segment::{note_record, segment_path, ScanOutcome, SealedSegment};
use crate::state::State;
use crate::storage::{OpenMode, Storage, StorageFile};

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
    crate::open::remove_files_durably(storage, dir, names, is_rewrite_file)
}

/// What one rewrite did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rewritten {
    pub id: SegmentId,
    /// Whether the rewrite compressed a segment that was not.
    pub compressed: bool,
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

/// A rewrite written under its temporary name, not yet renamed in.
struct Staged {
    plan: Plan,
    temp: PathBuf,
    file: Arc<dyn StorageFile>,
    live_bytes: u64,
}

impl Inner {
    /// Rewrites those of the sealed segments `ids` whose live share is below the options'
    /// threshold and whose next segment starts with a durable catalog checkpoint, without the
    /// records of deleted streams. They go as one group, so the group shares its syncs: every
    /// new file is written, then all are synced together ([`Storage::sync_all_files`]: on a
    /// real disk at once, so their writes and flushes overlap),
    /// then each is renamed over its segment, then the directory is synced once.
    /// Each rename is atomic on its own, so a crash leaves each segment old or new, whole.
    /// The new files are built and written on up to `threads` threads. The caller holds the
    /// reclaim lock. The segments a rewrite replaced are handed to the caller in `replaced`,
    /// to be let go of where their release does not hold up the next group.
    pub(crate) fn rewrite_group(
        &self,
        ids: &[SegmentId],
        replaced: &mut Vec<Arc<SealedSegment>>,
        threads: usize,
    ) -> Result<Vec<Rewritten>> {
        let plans: Vec<Plan> = {
            let st = self.state.lock();
            Self::check_usable(&st)?;
            ids.iter().filter_map(|&id| self.plan(&st, id)).collect()
        };
        if plans.is_empty() {
            return Ok(Vec::new());
        }
        // The deletes that let records go must be durable before a file without those
        // records is: otherwise a crash could revive a stream whose records are gone.
        self.flush()?;
        let mut staged: Vec<Staged> = Vec::with_capacity(plans.len());
        let written = self.stage_all(plans, &mut staged, threads).and_then(|()| {
            let files: Vec<Arc<dyn StorageFile>> = staged.iter().map(|s| s.file.clone()).collect();
            self.storage
                .sync_all_files(&files)
                .map_err(|(i, e)| io_err("syncing", &staged[i].temp)(e))?;
            // A log closed meanwhile (or poisoned) replaces nothing more.
            Self::check_usable(&self.state.lock())
        });
        if let Err(e) = written {
            self.remove_temps(&staged);
            return Err(e);
        }
        // Rename in order; a failed rename leaves its segment and the ones after it as they
        // were, and the ones before it replaced.
        let mut renamed = 0;
        let mut failure = None;
        for s in &staged {
            let path = segment_path(&self.dir, s.plan.segment.id);
            if let Err(e) = self.storage.rename(&s.temp, &path) {
                failure = Some(io_err("renaming", &s.temp)(e));
                break;
            }
            renamed += 1;
        }
        self.remove_temps(&staged[renamed..]);
        let done = self.swap_renamed(&staged[..renamed]);
        replaced.extend(staged.into_iter().map(|s| s.plan.segment));
        let done = done?;
        match failure {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// Builds and writes each planned rewrite under its temporary name, unsynced, on up to
    /// `threads` threads (each with its own image buffer), and hands them over in plan order.
    /// After a failure no further plan is begun; the rewrites staged are handed over all the
    /// same, for the caller to remove, and the first failure in plan order is returned.
    fn stage_all(&self, plans: Vec<Plan>, staged: &mut Vec<Staged>, threads: usize) -> Result<()> {
        let threads = threads.clamp(1, plans.len().max(1));
        let work = Mutex::new(plans.into_iter().enumerate());
        let results = Mutex::new(Vec::new());
        let failed = AtomicBool::new(false);
        let stage_some = || {
            // One buffer per thread for its images: a fresh one per segment would be new
            // pages to fault in and zero each time.
            let mut image = Vec::new();
            while !failed.load(Ordering::Acquire) {
                let Some((i, plan)) = work.lock().next() else {
                    return;
                };
                let result = self.stage(plan, &mut image);
                if result.is_err() {
                    failed.store(true, Ordering::Release);
                }
                results.lock().push((i, result));
            }
        };
        if threads == 1 {
            stage_some();
        } else {
            std::thread::scope(|scope| {
                let stagers: Vec<_> = (0..threads).map(|_| scope.spawn(stage_some)).collect();
                stagers.into_iter().for_each(crate::reclaim::join_exited);
            });
        }
        let mut results = results.into_inner();
        results.sort_unstable_by_key(|&(i, _)| i);
        let mut first_failure = None;
        for (_, result) in results {
            match result {
                Ok(s) => staged.push(s),
                Err(e) => {
                    first_failure.get_or_insert(e);
                }
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// Builds and writes one planned rewrite under its temporary name, unsynced, in `image`.
    fn stage(&self, plan: Plan, image: &mut Vec<u8>) -> Result<Staged> {
        let seg = &plan.segment;
        let (live_bytes, cuts) =
            rewritten_image(seg, &plan.dropped, self.options.index_interval_bytes, image)?;
        let compressed = match self.options.compression.level_for(seg.blocks.is_some()) {
            Some(level) => Some(crate::compress::compress_image(
                image, seg.id, level, &cuts,
            )?),
            None => None,
        };
        let temp = rewrite_path(&self.dir, seg.id);
        let file = self.write_rewrite(&temp, compressed.as_deref().unwrap_or(image))?;
        Ok(Staged {
            plan,
            temp,
            file,
            live_bytes,
        })
    }

    /// Best effort: rewrites that will not be renamed in go (an open removes any left).
    fn remove_temps(&self, staged: &[Staged]) {
        for s in staged {
            let _ = self.storage.remove_file(&s.temp);
        }
    }

    /// After renames: makes them durable and puts the new files in the table. From the first
    /// rename on, the new files may be the segments on disk; failing to say so durably, or to
    /// read one back, leaves memory and disk disagreeing: the store is poisoned.
    fn swap_renamed(&self, renamed: &[Staged]) -> Result<Vec<Rewritten>> {
        if renamed.is_empty() {
            return Ok(Vec::new());
        }
        let mapped: std::result::Result<Vec<Arc<SealedSegment>>, String> = self
            .storage
            .sync_dir(&self.dir)
            .map_err(|e| format!("syncing directory {}: {e}", self.dir.display()))
            .and_then(|()| {
                renamed
                    .iter()
                    .map(|s| {
                        let id = s.plan.segment.id;
                        map_sealed(&*self.storage, &segment_path(&self.dir, id), id)
                            .map_err(|e| e.to_string())
                    })
                    .collect()
            });
        let mut st = self.state.lock();
        let mapped = match mapped {
            Ok(m) => m,
            Err(what) => return Err(self.poison(&mut st, format!("rewriting segments: {what}"))),
        };
        let mut done = Vec::with_capacity(renamed.len());
        for (s, new) in renamed.iter().zip(&mapped) {
            swap_in(&mut st, new, &s.plan.dropped);
            done.push(Rewritten {
                id: new.id,
                compressed: new.blocks.is_some() && s.plan.segment.blocks.is_none(),
                bytes_before: s.plan.segment.bytes.len() as u64,
                bytes_after: new.bytes.len() as u64,
                live_bytes: s.live_bytes,
            });
        }
        Ok(done)
    }

    /// A rewrite of segment `id`: to drop the records of deleted streams when they take most
    /// of it, or to compress it when the options ask for compression and it is not yet. A
    /// rewrite drops deleted streams' records only when the next segment starts with a
    /// durable checkpoint; a rewrite that only compresses drops nothing and needs none.
    fn plan(&self, st: &State, id: SegmentId) -> Option<Plan> {
        let segment = st.sealed.get(&id)?.clone();
        let compress = self.options.compression != Compression::None && segment.blocks.is_none();
        if !crate::reclaim::next_starts_with_checkpoint(st, id) {
            return compress.then(|| Plan {
                segment,
                dropped: Vec::new(),
            });
        }
        let (mut live, mut total) = (0u64, 0u64);
        let mut dropped = Vec::new();
        for i in 0..segment.footer.stream_count {
            let s = segment.footer.stream(&segment.bytes, i)?;
            total += s.data_bytes;
            if crate::reclaim::is_deleted(st, s.stream_id) {
                dropped.push(s.stream_id);
            } else {
                live += s.data_bytes;
            }
        }
        let threshold = u64::from(self.options.rewrite_below_live_percent);
        let mostly_dead = !dropped.is_empty() && live * 100 < threshold * total;
        (mostly_dead || compress).then_some(Plan { segment, dropped })
    }

    /// Writes the rewrite under its temporary name (unsynced) and returns the open file.
    fn write_rewrite(&self, temp: &Path, image: &[u8]) -> Result<Arc<dyn StorageFile>> {
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
            .and_then(|f| f.write_all_at(image, 0).map(|()| f));
        written.map_err(|e| {
            let _ = self.storage.remove_file(temp);
            io_err("writing", temp)(e)
        })
    }
}

/// Maps a sealed segment file and verifies its footer.
fn map_sealed(storage: &dyn Storage, path: &Path, id: SegmentId) -> Result<Arc<SealedSegment>> {
    let file = storage
        .open_file(path, OpenMode::ReadOnly)
        .map_err(io_err("opening", path))?;
    let bytes = file.map_readonly().map_err(io_err("mapping", path))?;
    sealed_segment(id, 0, bytes, "rewritten segment does not verify")
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
    crate::reclaim::drop_extents(st, id, dropped);
    st.sealed.insert(id, new.clone());
}

/// Segment `seg` with the records of `dropped` streams left out: the same header, each batch
/// that keeps a record copied as a new batch of the records it keeps (seqs, kinds, flags and
/// payloads unchanged; offsets, links and checksums of the new place), and a footer, built in
/// `out` (cleared first). Returns the record bytes copied, and where compressed blocks of the
/// file would end.
///
/// Only what is copied is checksummed: every batch header is verified and every batch framed
/// ([`frame_batch_in`]), every kept record's checksum is verified, and the kept records of each
/// stream must be the whole chain its footer summary describes ([`KeptChains`]), so a damaged
/// kept record, or one the framing would skip, is corruption. The payloads of dropped records
/// are never read. spec: segment.md#rewriting-a-segment
fn rewritten_image(
    seg: &SealedSegment,
    dropped: &[u64],
    interval: u32,
    out: &mut Vec<u8>,
) -> Result<(u64, Vec<usize>)> {
    let id = seg.id;
    let image = seg.logical_image()?;
    let bytes = &image[..];
    let data_end = usize::try_from(seg.footer.data_end).unwrap_or(usize::MAX);
    let data = bytes
        .get(..data_end)
        .ok_or_else(|| corrupted(id, seg.footer.data_end, "footer lies past the file", None))?;
    let mut chains = KeptChains::new(seg, dropped)?;
    out.clear();
    out.reserve(SEGMENT_HEADER_LEN + chains.output_bytes_hint());
    out.extend_from_slice(data.get(..SEGMENT_HEADER_LEN).unwrap_or_default());
    let crc = SegmentCrc::new(id.0);
    let mut scan = ScanOutcome::default();
    let mut at = SEGMENT_HEADER_LEN;
    let mut copied = 0u64;
    let mut cuts = BlockCuts::new();
    let mut kept: Vec<RecordView> = Vec::new();
    while at < data_end {
        let batch = frame_batch_in(&data[at..], &crc, at as u64)
            .map_err(|e| corrupted(id, at as u64, "batch of a sealed segment", Some(e)))?;
        at = batch.end_offset() as usize;
        kept.clear();
        for r in batch.records() {
            if chains.keeps(&r)? {
                kept.push(r);
            }
        }
        if kept.is_empty() {
            continue;
        }
        // Everything before this batch is durable by the time the file is renamed in.
        let offset = out.len() as u64;
        cuts.offer(out.len());
        let mut enc = BatchEncoder::begin(out, id.0, offset, offset);
        for r in &kept {
            let payload = batch
                .verify_record(r)
                .map_err(|e| corrupted(id, r.offset, "record of a sealed segment", Some(e)))?;
            chains.follow(r)?;
            // The scan learns each record's new offset as it is placed, so it also holds the
            // previous record of the stream when that one is in this batch.
            let prev_offset = scan
                .streams
                .get(&r.header.stream_id)
                .map_or(0, |ix| ix.last_offset);
            let new_offset = enc.push(
                RecordHeader {
                    prev_offset,
                    ..r.header
                },
                payload,
            );
            copied += (RECORD_HEADER_LEN + sessionlog_format::padded_len(payload.len())) as u64;
            note_record(&mut scan, &r.header, new_offset, payload, interval);
            cuts.offer(new_offset as usize);
        }
        enc.finish();
        cuts.offer(out.len() - BATCH_TRAILER_LEN);
    }
    chains.finish()?;
    scan.data_end = out.len() as u64;
    let cuts = cuts.finish(out.len());
    let footer = scan.footer(id);
    out.extend_from_slice(&footer);
    Ok((copied, cuts))
}

/// The streams a rewrite keeps, each with its footer summary and how far the copy has
/// followed it. A rewrite does not checksum the batches it leaves behind, so this is what
/// proves it copies every kept record: the kept records of a stream, in segment order, must
/// run from the summary's `first_seq` to its `last_seq` with no gap, each naming the one before
/// it as its `prev_offset` (a field its own checksum covers), the last at `last_offset`. A
/// record the framing skipped, or one of a stream the footer does not list, is corruption.
struct KeptChains {
    id: SegmentId,
    /// Sorted by stream.
    kept: Vec<KeptChain>,
    /// Sorted.
    dropped: Vec<u64>,
}

struct KeptChain {
    summary: StreamSummary,
    /// Seq the next kept record of the stream must have.
    next_seq: u64,
    /// Offset of the stream's last record followed, 0 before the first.
    last_offset: u32,
}

impl KeptChains {
    fn new(seg: &SealedSegment, dropped: &[u64]) -> Result<Self> {
        let mut dropped = dropped.to_vec();
        dropped.sort_unstable();
        let mut kept = Vec::new();
        for i in 0..seg.footer.stream_count {
            let summary = seg.footer.stream(&seg.bytes, i).ok_or_else(|| {
                corrupted(seg.id, seg.footer.data_end, "footer stream table", None)
            })?;
            if dropped.binary_search(&summary.stream_id).is_err() {
                kept.push(KeptChain {
                    summary,
                    next_seq: summary.first_seq,
                    last_offset: 0,
                });
            }
        }
        kept.sort_unstable_by_key(|c| c.summary.stream_id);
        Ok(KeptChains {
            id: seg.id,
            kept,
            dropped,
        })
    }

    /// Record bytes of the kept streams plus a batch frame each: room for the copy.
    fn output_bytes_hint(&self) -> usize {
        self.kept
            .iter()
            .map(|c| {
                let records = c.summary.last_seq - c.summary.first_seq + 1;
                c.summary.data_bytes + records * (BATCH_HEADER_LEN + BATCH_TRAILER_LEN) as u64
            })
            .sum::<u64>()
            .try_into()
            .unwrap_or(0)
    }

    /// Whether record `r` is kept; a record of a stream the footer does not list is
    /// corruption.
    fn keeps(&self, r: &RecordView) -> Result<bool> {
        let stream = r.header.stream_id;
        if self.chain(stream).is_ok() {
            return Ok(true);
        }
        if self.dropped.binary_search(&stream).is_ok() {
            return Ok(false);
        }
        Err(corrupted(
            self.id,
            r.offset,
            format!("record of stream {stream}, which the segment's footer does not list"),
            None,
        ))
    }

    fn chain(&self, stream: u64) -> std::result::Result<usize, usize> {
        self.kept
            .binary_search_by_key(&stream, |c| c.summary.stream_id)
    }

    /// Takes kept record `r` (its checksum verified) as the next of its stream's chain.
    fn follow(&mut self, r: &RecordView) -> Result<()> {
        let id = self.id;
        let Ok(i) = self.chain(r.header.stream_id) else {
            return Err(corrupted(
                id,
                r.offset,
                "kept record of no kept stream",
                None,
            ));
        };
        let c = &mut self.kept[i];
        if r.header.seq != c.next_seq || r.header.prev_offset != c.last_offset {
            return Err(corrupted(
                id,
                r.offset,
                format!(
                    "record of stream {} is seq {} after the record at {}, where its chain \
                     expects seq {} after the record at {}: a record of the stream is missing",
                    r.header.stream_id,
                    r.header.seq,
                    r.header.prev_offset,
                    c.next_seq,
                    c.last_offset
                ),
                None,
            ));
        }
        c.next_seq += 1;
        c.last_offset = r.offset as u32;
        Ok(())
    }

    /// Every kept stream's chain must have reached the last record its summary names.
    fn finish(&self) -> Result<()> {
        for c in &self.kept {
            let s = &c.summary;
            if c.next_seq != s.last_seq + 1 || c.last_offset != s.last_offset {
                return Err(corrupted(
                    self.id,
                    u64::from(c.last_offset),
                    format!(
                        "stream {} ends at seq {} at {} in the batches, but at seq {} at {} in \
                         the footer: a record of the stream is missing",
                        s.stream_id,
                        c.next_seq.wrapping_sub(1),
                        c.last_offset,
                        s.last_seq,
                        s.last_offset
                    ),
                    None,
                ));
            }
        }
        Ok(())
    }
}
