//! Reclaim: removing sealed segments that nothing live needs, and rewriting the ones that
//! are mostly dead ([`crate::rewrite`]). spec: segment.md#reclaim
//!
//! Only the lowest-numbered sealed segment is ever removed, and only when every record in it
//! is a catalog record or belongs to a deleted stream, and the segment after it begins with a
//! durable catalog checkpoint. Removals go one at a time, each made durable (the directory
//! synced) before the next is considered, so the segment files always form one run of numbers
//! and a crash leaves either the full history or a run that starts at a checkpoint.
//!
//! Readers never see a segment vanish: a sealed segment is held through a shared mapping by
//! the segment table and by every record read from it; reclaim unlinks the file, then takes
//! the segment out of the table, and the operating system keeps an unlinked file's blocks
//! until its last mapping is dropped.

use std::sync::Arc;

use sessionlog_format::{CatalogOp, CATALOG_STREAM, SEGMENT_HEADER_LEN};

use crate::error::{io_err, Result};
use crate::ids::{Lsn, SegmentId};
use crate::log::Inner;
use crate::segment::{segment_path, SealedSegment};
use crate::state::State;

/// Segments a rewrite group looks at: the group shares one directory sync, and its files
/// are synced together. spec: recovery.md#ordering
const REWRITE_GROUP_SEGMENTS: usize = 16;

/// Segments a rewrite group of a background reclaim looks at: fewer, so that the writeback
/// of a group's files, which commits' syncs wait behind, is a short stall.
const BACKGROUND_GROUP_SEGMENTS: usize = 4;

/// Threads at most that a reclaim called by the application builds and writes a group's
/// rewrites on (one per core up to this; a background reclaim uses one). Each holds an image
/// buffer of up to a segment.
pub const RECLAIM_STAGING_THREADS: usize = 4;

/// Who runs a reclaim, which sets how it spends the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The application, waiting for it: a group's rewrites are staged on one thread per
    /// core (at most [`RECLAIM_STAGING_THREADS`]), in groups of [`REWRITE_GROUP_SEGMENTS`].
    Application,
    /// The background thread, which paces itself to leave the CPU and the disk to commits:
    /// one staging thread, groups of [`BACKGROUND_GROUP_SEGMENTS`].
    Background,
}

impl Runner {
    fn staging_threads(self) -> usize {
        match self {
            Runner::Application => std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(RECLAIM_STAGING_THREADS),
            Runner::Background => 1,
        }
    }

    fn group_segments(self) -> usize {
        match self {
            Runner::Application => REWRITE_GROUP_SEGMENTS,
            Runner::Background => BACKGROUND_GROUP_SEGMENTS,
        }
    }
}

/// What [`crate::Log::reclaim`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReclaimReport {
    /// Segments removed, in order.
    pub segments_removed: Vec<SegmentId>,
    /// Bytes of the removed segment files.
    pub bytes_removed: u64,
    /// The first sealed segment kept, and why it could not go.
    pub stopped_at: Option<(SegmentId, &'static str)>,
    /// Segments rewritten without the records of deleted streams, in order.
    pub segments_rewritten: Vec<SegmentId>,
    /// Those of the rewritten segments that were compressed by their rewrite.
    pub segments_compressed: Vec<SegmentId>,
    /// Bytes the rewrites gave back (file sizes before minus after).
    pub bytes_freed_by_rewrites: u64,
    /// Record bytes the rewrites copied (the live data of the rewritten segments).
    pub live_bytes_copied: u64,
}

impl Inner {
    /// See [`Log::reclaim`](crate::Log::reclaim); `runner` sets how many threads stage
    /// rewrites and how many segments a group holds.
    pub(crate) fn reclaim(
        &self,
        progress: &mut dyn FnMut(&ReclaimReport),
        runner: Runner,
    ) -> Result<ReclaimReport> {
        self.check_writable()?;
        // One reclaim at a time: two could otherwise unlink segments out of order.
        let _one = self.reclaim_lock.lock();
        // The checkpoints that make a removal safe must be on disk first.
        self.flush()?;
        let mut report = ReclaimReport::default();
        // Dropping the last hold on a segment that was removed, or replaced by a rewrite,
        // unmaps a file that is no longer linked, and the file system then frees the file's
        // page cache and blocks: about as much time as staging a rewrite of it takes. A thread
        // of its own does that while the next removal syncs the directory or the next rewrite
        // group is staged and synced; reclaim returns when it is done.
        std::thread::scope(|scope| {
            let (retire, retired) = std::sync::mpsc::channel::<Vec<Arc<SealedSegment>>>();
            let dropper = scope.spawn(move || retired.into_iter().for_each(drop));
            let done = self
                .remove_pass(&mut report, progress, &retire)
                .and_then(|()| self.rewrite_pass(&mut report, progress, &retire, runner));
            drop(retire);
            join_exited(dropper);
            done
        })?;
        Ok(report)
    }

    /// Removes sealed segments from the lowest up while nothing live needs them.
    /// spec: segment.md#reclaim
    fn remove_pass(
        &self,
        report: &mut ReclaimReport,
        progress: &mut dyn FnMut(&ReclaimReport),
        retire: &Retire,
    ) -> Result<()> {
        loop {
            let seg = {
                let st = self.state.lock();
                Self::check_usable(&st)?;
                let Some(seg) = st.sealed.values().next().cloned() else {
                    return Ok(());
                };
                if let Err(why) = removable(&st, &seg) {
                    report.stopped_at = Some((seg.id, why));
                    return Ok(());
                }
                seg
            };
            // The file goes first, with the state unlocked so commits go on; the table keeps
            // the mapping until the removal is durable. Only this reclaim removes segments,
            // so the segment is still the lowest when the lock is taken again.
            let path = segment_path(&self.dir, seg.id);
            self.storage
                .remove_file(&path)
                .map_err(io_err("removing", &path))?;
            if let Err(e) = self.storage.sync_dir(&self.dir) {
                let mut st = self.state.lock();
                let what = format!(
                    "syncing directory {} after removing {}: {e}",
                    self.dir.display(),
                    path.display()
                );
                return Err(self.poison(&mut st, what));
            }
            take_out(&mut self.state.lock(), seg.id);
            report.segments_removed.push(seg.id);
            report.bytes_removed += seg.bytes.len() as u64;
            progress(report);
            // Dropped here instead if the thread has gone.
            let _ = retire.send(vec![seg]);
        }
    }

    /// Rewrites every sealed segment whose live share is below the threshold, lowest first.
    /// spec: segment.md#rewriting-a-segment
    fn rewrite_pass(
        &self,
        report: &mut ReclaimReport,
        progress: &mut dyn FnMut(&ReclaimReport),
        retire: &Retire,
        runner: Runner,
    ) -> Result<()> {
        if self.options.rewrite_below_live_percent == 0
            && self.options.compression == crate::Compression::None
        {
            return Ok(());
        }
        let ids: Vec<SegmentId> = self.state.lock().sealed.keys().copied().collect();
        let threads = runner.staging_threads();
        for group in ids.chunks(runner.group_segments()) {
            let mut replaced = Vec::new();
            let done = self.rewrite_group(group, &mut replaced, threads);
            // Dropped here instead if the thread has gone.
            let _ = retire.send(replaced);
            for done in done? {
                report.segments_rewritten.push(done.id);
                if done.compressed {
                    report.segments_compressed.push(done.id);
                }
                report.bytes_freed_by_rewrites +=
                    done.bytes_before.saturating_sub(done.bytes_after);
                report.live_bytes_copied += done.live_bytes;
            }
            progress(report);
        }
        Ok(())
    }
}

/// Where reclaim sends the segments it is done with, to be dropped off its own thread.
type Retire = std::sync::mpsc::Sender<Vec<Arc<SealedSegment>>>;

/// Whether `seg` (the lowest sealed segment) may be removed, or why not.
fn removable(st: &State, seg: &SealedSegment) -> std::result::Result<(), &'static str> {
    for i in 0..seg.footer.stream_count {
        let s = seg
            .footer
            .stream(&seg.bytes, i)
            .ok_or("its footer's stream table does not decode")?;
        if s.stream_id == CATALOG_STREAM {
            continue;
        }
        if !is_deleted(st, s.stream_id) {
            return Err("it holds records of a live stream");
        }
    }
    if !next_starts_with_checkpoint(st, seg.id) {
        return Err("the segment after it does not start with a durable catalog checkpoint");
    }
    Ok(())
}

/// Whether the segment after `id` starts with a durable catalog checkpoint, so that it and the
/// segments after it tell where every stream stands without segment `id`.
pub(crate) fn next_starts_with_checkpoint(st: &State, id: SegmentId) -> bool {
    let next = SegmentId(id.0 + 1);
    if let Some(n) = st.sealed.get(&next) {
        n.footer
            .catalog(&n.bytes)
            .ok()
            .and_then(|c| c.first().map(|e| e.op == CatalogOp::Checkpoint))
            .unwrap_or(false)
    } else if st.active.id == next {
        // The checkpoint is the segment's first batch: durable once anything after the
        // header is.
        st.active
            .catalog
            .first()
            .is_some_and(|e| e.op == CatalogOp::Checkpoint)
            && st.synced > Lsn::new(next, SEGMENT_HEADER_LEN as u64)
    } else {
        false
    }
}

/// Drops a removed segment from the table, and the extents deleted streams had in it.
fn take_out(st: &mut State, id: SegmentId) {
    st.sealed.remove(&id);
    for s in st.catalog.streams.values_mut().filter(|s| s.deleted) {
        s.sealed.retain(|e| u64::from(e.segment) != id.0);
    }
}

/// Whether `stream` is a deleted stream (the catalog stream never is).
pub(crate) fn is_deleted(st: &State, stream: u64) -> bool {
    stream != CATALOG_STREAM && st.catalog.streams.get(&stream).is_some_and(|s| s.deleted)
}

/// Drops the extents `streams` have in segment `id`.
pub(crate) fn drop_extents(st: &mut State, id: SegmentId, streams: &[u64]) {
    for stream in streams {
        if let Some(s) = st.catalog.streams.get_mut(stream) {
            s.sealed.retain(|e| u64::from(e.segment) != id.0);
        }
    }
}

/// Waits for a scoped thread to exit, passing its panic on. A scope's own wait ends when its
/// threads' work does, before they have exited and run their thread-locals' destructors (a
/// zstd context, when one compressed or decompressed), so reclaim joins each of its threads
/// itself.
pub(crate) fn join_exited<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
