//! The public face of the log: [`Log`] and the types its calls take and return.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use sessionlog_format::{RecordHeader, CATALOG_STREAM};

use crate::error::{Error, Result};
use crate::ids::{Lsn, SegmentId, Seq, StreamId};
use crate::options::{Access, Durability, LogOptions};
use crate::segment::TailCut;
use crate::state::State;
use crate::storage::{DirLock, RealStorage, Storage};

/// One record to append: which stream, its kind tag and flags, its payload.
#[derive(Debug, Clone, Copy)]
pub struct Append<'a> {
    /// The stream to append to.
    pub stream: StreamId,
    /// Kind tag (below 0xF0), stored in the record header so readers can filter without
    /// reading payloads.
    pub kind: u8,
    /// Flags, stored as given.
    pub flags: u8,
    /// The payload.
    pub payload: &'a [u8],
    /// When set, the commit fails with [`Error::SeqMismatch`] unless this is the seq the record
    /// would get: protection against a stale writer.
    pub expected_seq: Option<Seq>,
}

impl<'a> Append<'a> {
    /// A record of `kind` with `payload` for `stream`, no flags, no expected seq.
    pub fn new(stream: StreamId, kind: u8, payload: &'a [u8]) -> Self {
        Append {
            stream,
            kind,
            flags: 0,
            payload,
            expected_seq: None,
        }
    }
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Where the batch starts in the log; batches are durable in this order.
    pub lsn: Lsn,
    /// The seq each record got, in input order.
    pub seqs: Vec<Seq>,
}

/// A record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its stream.
    pub stream: StreamId,
    /// Its seq.
    pub seq: Seq,
    /// Its kind tag.
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// Its payload; for sealed segments a view of the mapped file, not a copy.
    pub payload: Bytes,
}

impl Record {
    pub(crate) fn new(h: RecordHeader, payload: Bytes) -> Record {
        Record {
            stream: StreamId(h.stream_id),
            seq: Seq(h.seq),
            kind: h.kind,
            flags: h.flags,
            payload,
        }
    }
}

/// What `open` found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// Segment files opened.
    pub segments: usize,
    /// Sealed segments whose footer failed verification and was rebuilt from their data.
    pub footers_rebuilt: Vec<(SegmentId, String)>,
    /// The torn tail cut off the active segment, if any.
    pub tail_cut: Option<TailCut>,
    /// A last segment whose creation was torn by a crash, removed.
    pub discarded_segment: Option<SegmentId>,
    /// Whether the active segment was described by a clean-close file instead of scanned.
    pub clean_close: bool,
    /// Whether the store was created by this open.
    pub created: bool,
    /// Records found by scanning the active segment.
    pub active_records: u64,
    /// Wall time the open took.
    pub duration: Duration,
    /// Whether the log was opened read-only: then nothing above was done on disk, only
    /// decided, and what it would have removed is left out of what the log returns.
    pub read_only: bool,
    /// Read-only only: the last segment is sealed (or was left out), so no segment is active.
    pub no_active_segment: bool,
}

impl RecoveryReport {
    /// One line per thing the open cut, rebuilt or removed (read-only: would have, and left
    /// out of what it reads instead), for operators; empty when the store was intact.
    pub fn actions(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(id) = self.discarded_segment {
            out.push(if self.read_only {
                format!("segment {id} never got its header (a creation torn by a crash); left it out, nothing was removed")
            } else {
                format!("removed segment {id}: its creation was torn by a crash, it never held a record")
            });
        }
        for (id, why) in &self.footers_rebuilt {
            out.push(if self.read_only {
                format!("the footer of segment {id} does not verify ({why}); indexed its data in memory instead, nothing was rewritten")
            } else {
                format!("rebuilt the footer of segment {id} from its data ({why})")
            });
        }
        if let Some(cut) = &self.tail_cut {
            let what = format!(
                "{} bytes from offset {} of segment {} ({} non-zero, {} verifiable records after the damage; {})",
                cut.bytes, cut.offset, cut.segment, cut.nonzero_bytes, cut.records_dropped, cut.reason
            );
            out.push(if self.read_only {
                format!("did not read a torn tail: {what}; nothing was cut (an open for writing would cut it)")
            } else {
                format!("cut a torn tail: {what}")
            });
        }
        out
    }
}

/// A stream as listed by [`Log::streams`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Its id.
    pub id: StreamId,
    /// Its name.
    pub name: String,
    /// The seq its next record will get (= its record count).
    pub next_seq: Seq,
}

/// Sizes and counts for operators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segment files (sealed plus the active one).
    pub segments: usize,
    /// Live streams.
    pub streams: usize,
    /// Records in live streams.
    pub records: u64,
    /// Bytes of segment files (the active one up to its last batch).
    pub bytes: u64,
    /// Memory the index takes: per-segment stream extents and active-segment entries.
    pub index_memory_bytes: u64,
    /// `fdatasync` calls made since open.
    pub syncs: u64,
    /// Commits since open.
    pub commits: u64,
}

pub(crate) struct Inner {
    pub storage: Arc<dyn Storage>,
    pub dir: PathBuf,
    pub options: LogOptions,
    pub store_id: [u8; 16],
    pub state: Mutex<State>,
    /// Committers of each group (by number modulo `GROUPS`) wait here until their group is
    /// durable.
    pub group: [crate::wake::GroupWaiters; crate::writer::GROUPS as usize],
    /// Every group below this number has been made durable and its committers woken. Written
    /// under the log's lock (`made_durable`), read without it by a woken committer.
    pub durable_epoch: std::sync::atomic::AtomicU64,
    /// Threads that need no I/O cycle to be running (roll, readers) wait here.
    pub idle: Condvar,
    pub report: RecoveryReport,
    /// Held by a running reclaim, so segments are removed one at a time and in order.
    pub reclaim_lock: Mutex<()>,
    /// The exclusive lock of the store; a read-only log takes none.
    pub _lock: Option<Box<dyn DirLock>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A segmented log of many streams in one directory. Cheap to clone; all clones share the
/// same log. `Send + Sync`: commit from any number of threads and they share syncs.
#[derive(Debug, Clone)]
pub struct Log {
    pub(crate) inner: Arc<Inner>,
}

impl Log {
    /// Opens (creating if needed) the store in `dir` on the real file system. A directory
    /// that holds other files and no store is refused with [`Error::NotAStore`].
    pub fn open(dir: impl AsRef<Path>, options: LogOptions) -> Result<Log> {
        Self::open_with(Arc::new(RealStorage), dir.as_ref(), options)
    }

    /// Opens the existing store in `dir` read-only: no lock, no write of any kind, so it
    /// works beside a live writer in another process and without write permission. It reads
    /// a snapshot as of the open; damage is reported in [`Log::recovery_report`] and left out
    /// of what it reads, never repaired. spec: recovery.md#read-only-open
    pub fn open_read_only(dir: impl AsRef<Path>, options: LogOptions) -> Result<Log> {
        Self::open_with_access(
            Arc::new(RealStorage),
            dir.as_ref(),
            options,
            Access::ReadOnly,
        )
    }

    /// Opens the store in `dir` through `storage`, creating it if the directory is absent or
    /// empty. Recovery happens here; see [`Log::recovery_report`] for what it did.
    pub fn open_with(storage: Arc<dyn Storage>, dir: &Path, options: LogOptions) -> Result<Log> {
        Self::open_with_access(storage, dir, options, Access::CreateOrOpen)
    }

    /// Opens the store in `dir` through `storage` as `access` allows.
    pub fn open_with_access(
        storage: Arc<dyn Storage>,
        dir: &Path,
        options: LogOptions,
        access: Access,
    ) -> Result<Log> {
        crate::open::open(storage, dir, options, access)
    }

    /// Whether this log was opened read-only (every write fails with [`Error::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.report.read_only
    }

    /// Refuses with [`Error::ReadOnly`] when this log was opened read-only: what every write
    /// call checks first, for layers that must refuse before they prepare a write.
    pub fn check_writable(&self) -> Result<()> {
        self.inner.check_writable()
    }

    /// Whether every record of `stream` committed so far is durable (for a read-only log:
    /// every record it holds). Derived state written beside the log, such as a cache, may
    /// only cover durable records.
    pub fn is_stream_durable(&self, stream: StreamId) -> bool {
        let st = self.inner.state.lock();
        let Some(s) = st.catalog.streams.get(&stream.0) else {
            return false;
        };
        match &s.active {
            None => true,
            Some(a) => st.synced_offset_in_active() > u64::from(a.last_offset),
        }
    }

    /// What recovery found and did when this log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Creates a stream named `name`. The catalog record is buffered: it becomes durable with
    /// the next sync, and always before any record of the stream does.
    pub fn create_stream(&self, name: &str) -> Result<StreamId> {
        self.inner
            .create_stream_with(name, &[], Durability::Buffered)
            .map(|(stream, _)| stream)
    }

    /// Creates a stream named `name` whose first records are `records` (kind, payload; seqs
    /// 0, 1, …), in one atomic batch: after a crash the stream exists with all of them or not
    /// at all, so no name is ever bound without its first records. With
    /// [`Durability::Sync`] it returns once the batch is durable.
    pub fn create_stream_with(
        &self,
        name: &str,
        records: &[(u8, &[u8])],
        durability: Durability,
    ) -> Result<(StreamId, Receipt)> {
        self.inner.create_stream_with(name, records, durability)
    }

    /// Binds live `stream` to `name`, which no live stream holds, and frees its old name, in
    /// one catalog record: after a crash the stream has its old name or its new one. Used to
    /// publish a stream written under a temporary name once it is complete.
    pub fn rename_stream(
        &self,
        stream: StreamId,
        name: &str,
        durability: Durability,
    ) -> Result<()> {
        self.inner.rename_stream(stream, name, durability)
    }

    /// The largest batch [`Log::commit`] accepts, in encoded bytes (see
    /// [`sessionlog_format::encoded_batch_len`]).
    pub fn max_batch_bytes(&self) -> usize {
        self.inner.max_batch_len()
    }

    /// Deletes a stream: writes a tombstone; its name becomes free. Its records stay in their
    /// segments until reclaimed.
    pub fn delete_stream(&self, stream: StreamId, durability: Durability) -> Result<()> {
        self.inner.delete_stream(stream, durability)
    }

    /// The id bound to `name`.
    pub fn stream_id(&self, name: &str) -> Option<StreamId> {
        self.inner
            .state
            .lock()
            .catalog
            .names
            .get(name)
            .map(|&id| StreamId(id))
    }

    /// The live stream with this id.
    pub fn stream_info(&self, stream: StreamId) -> Option<StreamInfo> {
        let st = self.inner.state.lock();
        st.catalog
            .streams
            .get(&stream.0)
            .filter(|s| !s.deleted)
            .map(|s| StreamInfo {
                id: stream,
                name: s.name.clone(),
                next_seq: Seq(s.next_seq),
            })
    }

    /// Up to `limit` live streams in name order, starting after `after` (exclusive). Costs
    /// O(log streams + limit), so listing page by page never scans the store.
    pub fn streams_page(&self, after: Option<&str>, limit: usize) -> Vec<StreamInfo> {
        use std::ops::Bound;
        let st = self.inner.state.lock();
        let lower = match after {
            Some(a) => Bound::Excluded(a.to_owned()),
            None => Bound::Unbounded,
        };
        st.catalog
            .names
            .range::<String, _>((lower, Bound::Unbounded))
            .take(limit)
            .filter_map(|(name, &id)| {
                let s = st.catalog.streams.get(&id)?;
                Some(StreamInfo {
                    id: StreamId(id),
                    name: name.clone(),
                    next_seq: Seq(s.next_seq),
                })
            })
            .collect()
    }

    /// The store's identity, written in every segment header; caches derived from this log
    /// record it to prove which log they belong to.
    pub fn store_id(&self) -> [u8; 16] {
        self.inner.store_id
    }

    /// The storage this log does its I/O through (for files kept beside the log).
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.inner.storage.clone()
    }

    /// Every live stream, by id.
    pub fn streams(&self) -> Vec<StreamInfo> {
        let st = self.inner.state.lock();
        let mut out: Vec<StreamInfo> = st
            .catalog
            .streams
            .iter()
            .filter(|(_, s)| !s.deleted)
            .map(|(&id, s)| StreamInfo {
                id: StreamId(id),
                name: s.name.clone(),
                next_seq: Seq(s.next_seq),
            })
            .collect();
        out.sort_by_key(|s| s.id);
        out
    }

    /// Appends one batch atomically: after a crash it is present whole or not at all, and
    /// batches survive in commit order. With [`Durability::Sync`] it returns once the batch is
    /// durable.
    pub fn commit(&self, records: &[Append<'_>], durability: Durability) -> Result<Receipt> {
        self.inner.commit(records, durability)
    }

    /// Removes the sealed segments that nothing live needs: from the lowest up, each one that
    /// holds only catalog records and records of deleted streams, as long as the segment
    /// after it starts with a catalog checkpoint (spec: segment.md#reclaim). Then rewrites
    /// every sealed segment whose live share is below
    /// [`LogOptions::rewrite_below_live_percent`] without the records of deleted streams
    /// (spec: segment.md#rewriting-a-segment). Every record of a live stream stays, with its
    /// seq. Commits go on meanwhile; records already read from a removed or rewritten
    /// segment stay readable (the mapping outlives the file's name). Syncs first. The new
    /// files of a group of rewrites are built and written on as many threads as the machine
    /// has cores, at most [`RECLAIM_STAGING_THREADS`](crate::RECLAIM_STAGING_THREADS) (a
    /// background reclaim, which paces itself to leave the CPU to commits, uses one, and
    /// smaller groups).
    pub fn reclaim(&self) -> Result<crate::ReclaimReport> {
        self.inner
            .reclaim(&mut |_| {}, crate::reclaim::Runner::Application)
    }

    /// [`reclaim`](Self::reclaim), calling `progress` after each segment removed or rewritten.
    pub fn reclaim_with_progress(
        &self,
        progress: &mut dyn FnMut(&crate::ReclaimReport),
    ) -> Result<crate::ReclaimReport> {
        self.inner
            .reclaim(progress, crate::reclaim::Runner::Application)
    }

    /// Runs [`reclaim`](Self::reclaim) on a thread of its own: once now, then every
    /// `interval` (or at [`BackgroundReclaim::nudge`](crate::BackgroundReclaim::nudge)) until
    /// the returned handle is stopped or dropped, or the log is closed. Commits go on while it
    /// runs; it holds the log's lock only for short steps. The thread keeps the store open
    /// (and locked) until it ends: stop it before closing the log to reopen the store at once.
    /// It works at most [`DEFAULT_WORK_SHARE`](crate::DEFAULT_WORK_SHARE) of the
    /// time while a run lasts, resting the rest (see
    /// [`start_background_reclaim_paced`](Self::start_background_reclaim_paced)).
    pub fn start_background_reclaim(&self, interval: Duration) -> Result<crate::BackgroundReclaim> {
        self.start_background_reclaim_paced(interval, crate::DEFAULT_WORK_SHARE)
    }

    /// [`start_background_reclaim`](Self::start_background_reclaim), working at most
    /// `work_share` of the time while a run lasts (above 0, at most 1; 1 never rests): after
    /// each step (a segment removed, a group of segments rewritten) the thread rests
    /// `(1 - work_share) / work_share` times as long as the step took, so commits get the CPU
    /// and the disk between steps. A smaller share makes a run take longer.
    pub fn start_background_reclaim_paced(
        &self,
        interval: Duration,
        work_share: f64,
    ) -> Result<crate::BackgroundReclaim> {
        crate::BackgroundReclaim::start(self.clone(), interval, work_share)
    }

    /// Seals the active segment, durably, and starts the next one, when the active segment
    /// holds a record of any stream (returns whether it did). The active segment is never
    /// compressed or rewritten; once sealed, the next [`reclaim`](Self::reclaim) compresses it
    /// (with [`LogOptions::compression`](crate::LogOptions::compression) on) or rewrites it
    /// like any sealed segment. For a store at rest (`sessionlog gc --compress`): sealing on
    /// every reclaim of a busy store would leave many small segments.
    pub fn seal_active(&self) -> Result<bool> {
        self.inner.seal_active()
    }

    /// Makes everything committed so far durable.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// The record `seq` of `stream`, verified against its checksum (in a compressed segment,
    /// with its block: spec: segment.md#reading-a-compressed-block).
    pub fn read(&self, stream: StreamId, seq: Seq) -> Result<Record> {
        self.inner.read(stream, seq)
    }

    /// The records of `stream` with seqs in `from..to`, in order.
    pub fn iter(&self, stream: StreamId, from: Seq, to: Seq) -> crate::read::RecordIter {
        crate::read::RecordIter::new(self.inner.clone(), stream, from, to)
    }

    /// Log position up to which everything is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.inner.state.lock().synced
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Flushes and closes, returning the error that dropping would swallow. Other clones of
    /// this log fail with [`Error::Closed`] afterwards.
    pub fn close(self) -> Result<()> {
        let result = self.inner.flush();
        let mut st = self.inner.state.lock();
        if result.is_ok() && !st.closed && !self.inner.report.read_only {
            // With everything durable, describe the active segment for a fast next open.
            // Best effort: without the file the next open scans the segment instead.
            self.inner.wait_idle(&mut st);
            if st.buf.is_empty() && st.synced == crate::ids::Lsn::new(st.active.id, st.end) {
                let _ = crate::clean::write(&*self.inner.storage, &self.inner.dir, &st);
            }
        }
        st.closed = true;
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Best effort: a log dropped without `close` still makes its buffered records durable.
        let st = self.state.get_mut();
        if st.closed || st.poisoned.is_some() || self.report.read_only {
            return;
        }
        if !st.buf.is_empty() {
            if st.active.file.write_all_at(&st.buf, st.buf_offset).is_err() {
                return;
            }
            st.buf.clear();
        }
        if st.active.file.sync_data().is_ok() && !st.writing() && st.syncs_in_flight == 0 {
            let _ = crate::clean::write(&*self.storage, &self.dir, st);
        }
    }
}

impl Inner {
    fn stats(&self) -> Stats {
        let st = self.state.lock();
        let live = st.catalog.streams.values().filter(|s| !s.deleted);
        let mut index = 0usize;
        let mut records = 0u64;
        let mut streams = 0usize;
        for s in live {
            streams += 1;
            records += s.next_seq;
            index += s.sealed.capacity() * std::mem::size_of::<crate::index::SealedExtent>();
            index += s.active.as_ref().map_or(0, |a| a.memory_bytes());
        }
        let sealed_bytes: u64 = st.sealed.values().map(|s| s.bytes.len() as u64).sum();
        Stats {
            segments: st.sealed.len() + usize::from(!self.report.no_active_segment),
            streams,
            records,
            bytes: sealed_bytes
                + if self.report.no_active_segment {
                    0
                } else {
                    st.end
                },
            index_memory_bytes: index as u64,
            syncs: st.counters.syncs,
            commits: st.counters.commits,
        }
    }
}

pub(crate) fn is_catalog(stream: StreamId) -> bool {
    stream.0 == CATALOG_STREAM
}

pub(crate) fn unknown(stream: StreamId) -> Error {
    Error::UnknownStream(stream.to_string())
}
