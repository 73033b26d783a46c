//! The write path: encoding batches, pipelined group commit, segment roll, poisoning.
//!
//! Committers encode their batch into the shared buffer under the mutex. A committer that
//! needs durability then takes part in the I/O itself: whoever finds no write in flight takes
//! the whole buffer and writes it; whoever finds written-but-unsynced data and no sync in flight
//! runs one `fdatasync` for all of it. With one sync at a time (the default) the leader runs
//! its write and its sync back to back, taking the lock again only once both are done: on a
//! busy log every committer queues for that lock, and the disk would idle while the leader
//! waited for it between the two. With more syncs allowed, a write may proceed while a sync
//! is in flight, so the next group is written while the previous one is being made durable.
//! Meanwhile new commits form the next group in the buffer, and a reader copies the bytes in
//! flight instead of waiting for them. A group's committers sleep on the group's word
//! (`wake.rs`); once the group is durable the leader releases the lock and wakes them all
//! with one call, and each returns without taking the lock again. Any failed write or sync
//! poisons the log: nothing after it is trusted until the store is reopened.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::MutexGuard;
use sessionlog_format::{
    encode_footer, encoded_batch_len, segment_file_name, BatchEncoder, CatalogEntry, CatalogOp,
    IndexEntry, RecordHeader, SegmentHeader, StreamSummary, CATALOG_STREAM, FIRST_RESERVED_KIND,
    KIND_CATALOG_CHECKPOINT, KIND_CATALOG_CREATE, KIND_CATALOG_DELETE, KIND_CATALOG_RENAME,
    MAX_BATCH_LEN, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};

use crate::error::{io_err, Error, Result};
use crate::ids::{Lsn, SegmentId, Seq, StreamId};
use crate::index::{ActiveStreamIndex, SealedExtent};
use crate::log::{Inner, Receipt};
use crate::open::sealed_segment;
use crate::options::Durability;
use crate::state::{ActiveSegment, State};
use crate::storage::{OpenMode, Storage, StorageFile};
use crate::Append;

impl Inner {
    pub(crate) fn check_usable(st: &State) -> Result<()> {
        if st.closed {
            return Err(Error::Closed);
        }
        if let Some(cause) = &st.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        Ok(())
    }

    /// Refuses every write to a log opened read-only.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.report.read_only {
            return Err(Error::ReadOnly {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    pub(crate) fn poison(&self, st: &mut State, what: String) -> Error {
        let cause: Arc<str> = what.into();
        if st.poisoned.is_none() {
            st.poisoned = Some(cause.clone());
        }
        self.wake_all();
        Error::Poisoned { cause }
    }

    /// Wakes every waiter: after a roll (which syncs everything) or a poisoning.
    fn wake_all(&self) {
        for g in &self.group {
            g.wake_all();
        }
        self.idle.notify_all();
    }

    /// Checks an application record before it is encoded.
    fn check_record(&self, kind: u8, payload: &[u8]) -> Result<()> {
        if payload.len() > self.options.max_record_bytes {
            return Err(Error::RecordTooLarge {
                len: payload.len(),
                max: self.options.max_record_bytes,
            });
        }
        if kind >= FIRST_RESERVED_KIND {
            return Err(Error::InvalidInput(format!(
                "record kind {kind:#x} is reserved for the log"
            )));
        }
        Ok(())
    }

    /// The largest batch a commit accepts, in encoded bytes. spec: segment.md#zero-fill-and-preallocation
    pub(crate) fn max_batch_len(&self) -> usize {
        let by_options = self
            .options
            .segment_size_bytes
            .max(self.options.max_record_bytes as u64 * 2);
        usize::try_from(by_options).map_or(MAX_BATCH_LEN, |b| b.min(MAX_BATCH_LEN))
    }

    /// The encoded length of a batch with these payloads, or an error when it is too large.
    fn batch_len(&self, payload_lens: impl Iterator<Item = usize>) -> Result<usize> {
        let len = encoded_batch_len(payload_lens);
        if len > self.max_batch_len() {
            return Err(Error::InvalidInput(format!(
                "batch of {len} bytes is too large; split it"
            )));
        }
        Ok(len)
    }

    pub(crate) fn commit(&self, records: &[Append<'_>], durability: Durability) -> Result<Receipt> {
        self.check_writable()?;
        if records.is_empty() {
            return Err(Error::InvalidInput(
                "a batch needs at least one record".into(),
            ));
        }
        for r in records {
            self.check_record(r.kind, r.payload)?;
        }
        let len = self.batch_len(records.iter().map(|r| r.payload.len()))?;
        let mut st = self.state.lock();
        Self::check_usable(&st)?;
        let seqs = Self::check_batch(&st, records)?;
        self.make_room(&mut st, len)?;
        let lsn = Lsn::new(st.active.id, st.end);
        self.encode_records(
            &mut st,
            records
                .iter()
                .zip(&seqs)
                .map(|(r, s)| (r.stream.0, s.0, r.kind, r.flags, r.payload)),
        );
        st.counters.commits += 1;
        self.settle(st, durability)?;
        Ok(Receipt { lsn, seqs })
    }

    /// After a batch is encoded: waits until it is durable (`Sync`), or hands a full buffer to
    /// the operating system (`Buffered`). Takes the lock, which it may give up for good.
    fn settle<'a>(&'a self, mut st: MutexGuard<'a, State>, durability: Durability) -> Result<()> {
        match durability {
            Durability::Sync => {
                let end = Lsn::new(st.active.id, st.end);
                self.wait_durable(st, end)
            }
            Durability::Buffered => {
                if st.buf.len() >= self.options.write_buffer_bytes && !st.writing() {
                    self.io_cycle(&mut st, false, &mut Wakes::new(self))?;
                }
                Ok(())
            }
        }
    }

    /// Validates a batch against the streams and returns the seq each record gets.
    fn check_batch(st: &State, records: &[Append<'_>]) -> Result<Vec<Seq>> {
        let mut seqs = Vec::with_capacity(records.len());
        // Next seq of each stream the batch touches: one catalog lookup per stream, and a
        // batch of one stream's records stays linear. The first stream is kept apart, so
        // that the usual batch (one stream's records) allocates nothing here, under the lock.
        let next_of = |stream: StreamId| -> Result<u64> {
            st.catalog
                .streams
                .get(&stream.0)
                .filter(|s| !s.deleted && stream.0 != CATALOG_STREAM)
                .map(|s| s.next_seq)
                .ok_or_else(|| Error::UnknownStream(stream.to_string()))
        };
        let mut first: Option<(StreamId, u64)> = None;
        let mut others: Vec<(StreamId, u64)> = Vec::new();
        for r in records {
            let slot = match &mut first {
                Some(slot) if slot.0 == r.stream => slot,
                None => first.insert((r.stream, next_of(r.stream)?)),
                Some(_) => match others.iter().position(|(s, _)| *s == r.stream) {
                    Some(i) => &mut others[i],
                    None => {
                        others.push((r.stream, next_of(r.stream)?));
                        let last = others.len() - 1;
                        &mut others[last]
                    }
                },
            };
            let seq = Seq(slot.1);
            slot.1 += 1;
            if let Some(expected) = r.expected_seq {
                if expected != seq {
                    return Err(Error::SeqMismatch {
                        stream: r.stream,
                        expected,
                        actual: seq,
                    });
                }
            }
            seqs.push(seq);
        }
        Ok(seqs)
    }

    /// Encodes one batch at the end of the buffer and updates the index. The caller has
    /// checked every record and made room.
    fn encode_records<'p>(
        &self,
        st: &mut State,
        records: impl Iterator<Item = (u64, u64, u8, u8, &'p [u8])>,
    ) {
        let synced_through = st.synced_offset_in_active();
        let State {
            buf,
            end,
            active,
            catalog,
            ..
        } = &mut *st;
        let interval = self.options.index_interval_bytes;
        let mut enc = BatchEncoder::begin(buf, active.id.0, *end, synced_through);
        for (stream, seq, kind, flags, payload) in records {
            let record_bytes =
                (RECORD_HEADER_LEN + sessionlog_format::padded_len(payload.len())) as u64;
            let index = if stream == CATALOG_STREAM {
                &mut active.catalog_index
            } else {
                &mut catalog
                    .streams
                    .get_mut(&stream)
                    .expect("checked stream")
                    .active
            };
            let prev_offset = index.as_ref().map_or(0, |ix| ix.last_offset);
            let offset = enc.push(
                RecordHeader {
                    stream_id: stream,
                    seq,
                    kind,
                    flags,
                    prev_offset,
                    payload_len: 0,
                },
                payload,
            ) as u32;
            match index {
                Some(ix) => ix.push(seq, offset, record_bytes, interval),
                None => *index = Some(ActiveStreamIndex::new(seq, offset, record_bytes)),
            }
            if stream != CATALOG_STREAM {
                if let Some(s) = catalog.streams.get_mut(&stream) {
                    s.next_seq = seq + 1;
                }
            }
        }
        *end += enc.finish() as u64;
    }

    /// Rolls to a new segment when a batch of `len` bytes would not fit the active one.
    fn make_room(&self, st: &mut MutexGuard<'_, State>, len: usize) -> Result<()> {
        let fits = |st: &State| {
            st.end + len as u64 <= self.options.segment_size_bytes
                || st.end == SEGMENT_HEADER_LEN as u64
        };
        if fits(st) {
            return Ok(());
        }
        self.wait_idle(st);
        Self::check_usable(st)?;
        // Another committer that found the segment full may have rolled while this one
        // waited (the wait releases the lock): the batch fits the new segment, which must not
        // be sealed again with nothing in it.
        if fits(st) {
            return Ok(());
        }
        self.roll_or_poison(st, false)
    }

    /// Seals the active segment when it holds a record of any stream, and starts the next,
    /// so that a reclaim may compress or rewrite what it holds. Returns whether it sealed.
    /// A segment that holds nothing past its catalog records is left as it is.
    pub(crate) fn seal_active(&self) -> Result<bool> {
        self.check_writable()?;
        let mut st = self.state.lock();
        self.wait_idle(&mut st);
        Self::check_usable(&st)?;
        if !st.catalog.streams.values().any(|s| s.active.is_some()) {
            return Ok(false);
        }
        // The store is at rest: the next segment starts small, as a new store's first does.
        self.roll_or_poison(&mut st, true)?;
        Ok(true)
    }

    /// [`roll`](Self::roll), poisoning the writer when it fails; when it succeeds it synced
    /// everything before it, so every waiting committer is durable and is woken.
    fn roll_or_poison(&self, st: &mut State, start_small: bool) -> Result<()> {
        if let Err(e) = self.roll(st, start_small) {
            let what = format!("sealing segment {}: {e}", st.active.id);
            return Err(self.poison(st, what));
        }
        self.wake_all();
        Ok(())
    }

    /// Seals the active segment and starts the next, reserved whole or, when `start_small`,
    /// growing from a small first step. Called with no I/O in flight.
    fn roll(&self, st: &mut State, start_small: bool) -> Result<()> {
        let id = st.active.id;
        let file = st.active.file.clone();
        let path = st.active.path.clone();
        if !st.buf.is_empty() {
            file.write_all_at(&st.buf, st.buf_offset)
                .map_err(io_err("writing", &path))?;
            st.buf_offset = st.end;
            st.buf.clear();
        }
        file.sync_data().map_err(io_err("syncing", &path))?;
        st.written = Lsn::new(id, st.end);
        st.synced = st.written;
        st.sync_started = st.synced;

        let footer = build_footer(st, id);
        file.write_all_at(&footer, st.end)
            .map_err(io_err("writing the footer of", &path))?;
        file.set_len(st.end + footer.len() as u64)
            .map_err(io_err("truncating", &path))?;
        file.sync_all().map_err(io_err("syncing", &path))?;
        let bytes = file.map_readonly().map_err(io_err("mapping", &path))?;
        let sealed = sealed_segment(id, st.end, bytes, "footer just written does not verify")?;
        for i in 0..sealed.footer.stream_count {
            let Some(summary) = sealed.footer.stream(&sealed.bytes, i) else {
                continue;
            };
            if let Some(s) = st.catalog.streams.get_mut(&summary.stream_id) {
                s.active = None;
                s.sealed.push(SealedExtent {
                    first_seq: summary.first_seq,
                    segment: id.0 as u32,
                    summary_index: i,
                });
            }
        }
        st.sealed.insert(id, sealed);

        let next = SegmentId(id.0 + 1);
        st.active = create_segment(
            &*self.storage,
            &self.dir,
            self.store_id,
            next,
            &self.options,
            start_small,
        )?;
        st.end = SEGMENT_HEADER_LEN as u64;
        st.buf_offset = st.end;
        st.written = Lsn::new(next, st.end);
        st.synced = st.written;
        st.sync_started = st.synced;
        self.write_checkpoint(st)
    }

    /// Puts a catalog checkpoint in a batch of its own at the start of the new active segment
    /// (buffered: it becomes durable with the next sync), so this segment and the ones after
    /// it describe every stream name without any older segment. Skipped when the live catalog
    /// does not fit one batch; no segment before this one can then be reclaimed.
    /// spec: segment.md#streams-and-the-catalog
    fn write_checkpoint(&self, st: &mut State) -> Result<()> {
        let checkpoint = st.catalog.checkpoint();
        let payload = checkpoint.encode();
        if encoded_batch_len([payload.len()]) > self.max_batch_len() {
            return Ok(());
        }
        let seq = st.catalog.catalog_next_seq;
        let entry = checkpoint.to_entry(seq);
        st.catalog
            .apply_entry(&entry)
            .map_err(|e| crate::error::corrupted(st.active.id, st.end, e, None))?;
        st.active.catalog.push(entry);
        self.encode_records(
            st,
            std::iter::once((
                CATALOG_STREAM,
                seq,
                KIND_CATALOG_CHECKPOINT,
                0,
                &payload[..],
            )),
        );
        Ok(())
    }

    /// One I/O cycle, run by a committer that finds no write in flight (and, for a sync, a free
    /// sync slot): hand the whole buffer to the operating system and, when `sync`, make
    /// everything written so far durable with one `fdatasync`. Writes are serialised, so a
    /// sync covers every byte written before it began; up to `max_concurrent_syncs` syncs may
    /// overlap, so the next group can be written and its sync started while the previous sync
    /// is still running. New commits keep encoding into the buffer meanwhile: they form the
    /// next group. Wakes exactly the committers it made durable, and one committer of the
    /// next group to lead the next cycle: their words change under the lock, and the calls
    /// that wake them are left to `wakes`, made once the lock is released.
    pub(crate) fn io_cycle(
        &self,
        st: &mut MutexGuard<'_, State>,
        sync: bool,
        wakes: &mut Wakes<'_>,
    ) -> Result<()> {
        debug_assert!(!st.writing());
        let epoch = st.forming;
        if sync {
            st.forming += 1;
            st.syncs_in_flight += 1;
        }
        // The next group encodes into the last written buffer's allocation, when there is one.
        let next = std::mem::take(&mut st.spare);
        let data = Arc::new(std::mem::replace(&mut st.buf, next));
        let at = st.buf_offset;
        st.in_flight = Some((at, Arc::clone(&data)));
        st.buf_offset += data.len() as u64;
        let file = st.active.file.clone();
        let seg = st.active.id;
        let end = Lsn::new(seg, at + data.len() as u64);
        let grow = if self.options.preallocate {
            next_allocation(seg, st.active.allocated, end.offset(), &self.options)
        } else {
            None
        };
        if let Some(len) = grow {
            // Claimed before the unlocked write: writes are serialised, and a failed step
            // poisons the log, so no later cycle relies on it.
            st.active.allocated = len;
        }
        let zeros = if data.is_empty() {
            None
        } else {
            zero_ahead(
                st.active.zeroed,
                st.active.allocated,
                end.offset(),
                &self.options,
            )
        };
        if let Some((_, to)) = zeros {
            st.active.zeroed = to;
        }
        // With one sync at a time no other cycle can start while this one syncs, so the
        // sync follows the write without taking the lock between them: on a busy log that
        // lock is queued for by every committer, and the disk would idle meanwhile.
        let back_to_back = sync && self.options.max_concurrent_syncs <= 1;
        if back_to_back {
            st.sync_started = st.sync_started.max(end);
        }
        let written = MutexGuard::unlocked(st, || {
            // Groups an earlier cycle of this thread made durable are woken now, while
            // the lock is free and before this cycle's I/O.
            wakes.issue();
            if !data.is_empty() {
                if let Some(len) = grow {
                    file.allocate(len)
                        .map_err(|e| format!("preallocating segment {seg} to {len} bytes: {e}"))?;
                }
                file.write_all_at(&data, at)
                    .map_err(|e| format!("writing segment {seg} at offset {at}: {e}"))?;
                // After the data, so the zeros only ever cover bytes past it; the same sync
                // makes both durable. spec: recovery.md#ordering
                if let Some((from, to)) = zeros {
                    write_zeros(&*file, from, to).map_err(|e| {
                        format!("writing zeros into segment {seg} at offset {from}: {e}")
                    })?;
                }
            }
            if back_to_back {
                file.sync_data()
                    .map_err(|e| format!("syncing segment {seg}: {e}"))?;
            }
            Ok(())
        });
        st.in_flight = None;
        st.counters.writes += u64::from(!data.is_empty());
        if let Err(what) = written {
            st.syncs_in_flight -= u32::from(sync);
            return Err(self.poison(st, what));
        }
        st.written = st.written.max(end);
        // Keep the allocation for the next group (a reader copies the bytes in flight under
        // the lock and keeps no reference to them): as the buffer itself when no commit came
        // meanwhile, else as the spare the next cycle hands over. One that a very large batch
        // grew is let go of, so an idle log holds at most two buffers of ordinary size.
        if let Ok(data) = Arc::try_unwrap(data) {
            let st = &mut **st;
            keep_buffer(data, &mut st.buf, &mut st.spare, self.kept_buffer_bytes());
        }
        if back_to_back {
            st.syncs_in_flight -= 1;
            st.counters.syncs += 1;
            wakes.add(self.made_durable(st, end, epoch));
        } else if sync {
            st.sync_started = st.sync_started.max(end);
            // The next group may start its own write and sync while this one syncs.
            self.elect(st, wakes);
            let synced = MutexGuard::unlocked(st, || {
                wakes.issue();
                file.sync_data()
                    .map_err(|e| format!("syncing segment {seg}: {e}"))
            });
            st.syncs_in_flight -= 1;
            st.counters.syncs += 1;
            if let Err(what) = synced {
                return Err(self.poison(st, what));
            }
            wakes.add(self.made_durable(st, end, epoch));
        }
        self.elect(st, wakes);
        self.idle.notify_all();
        Ok(())
    }

    /// The largest buffer allocation a cycle keeps for the groups after it: twice what
    /// triggers a write of buffered commits (and at least 64 KiB), at most 16 MiB.
    fn kept_buffer_bytes(&self) -> usize {
        self.options
            .write_buffer_bytes
            .saturating_mul(2)
            .clamp(64 << 10, 16 << 20)
    }

    /// Records that everything up to `end` is durable and marks every group up to `epoch`
    /// durable (an earlier sync may still be running, but this one covered its bytes too).
    /// Returns the groups newly marked, whose sleepers are to be woken once the lock is
    /// released.
    fn made_durable(&self, st: &mut State, end: Lsn, epoch: u64) -> Range<u64> {
        st.synced = st.synced.max(end);
        // Written only here, under the lock.
        let from = self.durable_epoch.load(Ordering::Relaxed);
        if from > epoch {
            return 0..0;
        }
        // Published before the words change, so a woken committer that reads it finds its
        // group durable without taking the lock.
        self.durable_epoch.store(epoch + 1, Ordering::Release);
        for e in from..=epoch {
            self.group[(e % GROUPS) as usize].change();
        }
        from..epoch + 1
    }

    fn can_start_sync(&self, st: &State) -> bool {
        !st.writing() && st.syncs_in_flight < self.options.max_concurrent_syncs.max(1)
    }

    /// Elects one committer of the forming group to lead the next cycle, if any waits and a
    /// cycle could start. The wake itself is left to `wakes`, made once the lock is
    /// released: the elected committer then does not wake into a lock its waker still holds.
    fn elect(&self, st: &State, wakes: &mut Wakes<'_>) {
        let forming = (st.forming % GROUPS) as usize;
        if self.can_start_sync(st) && self.group[forming].any() {
            self.group[forming].change();
            wakes.elected = Some(forming);
        }
    }

    /// Returns once everything up to `target` is durable. The caller's batch is in the
    /// forming group (or an earlier one); if a cycle can start, the caller runs one for its
    /// whole group. The lock is given up for good: a committer woken because its group is
    /// durable returns without taking it again.
    pub(crate) fn wait_durable<'a>(&'a self, st: MutexGuard<'a, State>, target: Lsn) -> Result<()> {
        // Declared before the guard, so dropped after it: on every return the lock is
        // released before the sleepers of the groups this thread's cycles made durable
        // are woken, and they do not wake into a lock their waker holds.
        let mut wakes = Wakes::new(self);
        let mut st = st;
        // Every byte encoded so far is in this group or an earlier one, so once the groups
        // up to it are durable, so is `target` (`made_durable`'s end covers them all).
        let epoch = st.forming;
        let group = &self.group[(epoch % GROUPS) as usize];
        loop {
            Self::check_usable(&st)?;
            if st.synced >= target {
                // Pass leadership on if this thread was elected but had nothing left to do.
                self.elect(&st, &mut wakes);
                return Ok(());
            }
            // Start a cycle unless a sync already started covers this batch.
            if self.can_start_sync(&st) && st.sync_started < target {
                self.io_cycle(&mut st, true, &mut wakes)?;
                continue;
            }
            let seen = group.enter();
            drop(st);
            wakes.issue();
            group.wait(seen);
            if self.durable_epoch.load(Ordering::Acquire) > epoch {
                return Ok(());
            }
            // Elected to lead, woken by a roll or a failure, or by a group sharing the word:
            // decide under the lock.
            st = self.state.lock();
        }
    }

    /// Waits until no write and no sync is running (the mutex is held on return).
    pub(crate) fn wait_idle(&self, st: &mut MutexGuard<'_, State>) {
        while st.writing() || st.syncs_in_flight > 0 {
            self.idle.wait(st);
        }
    }

    pub(crate) fn flush(&self) -> Result<()> {
        let st = self.state.lock();
        Self::check_usable(&st)?;
        let end = Lsn::new(st.active.id, st.end);
        self.wait_durable(st, end)
    }

    /// Creates stream `name` and appends `records` (kind, payload) to it, in one batch: the
    /// catalog create first, then the records with seqs 0, 1, … (spec:
    /// segment.md#streams-and-the-catalog). After a crash the stream exists with all of them
    /// or not at all.
    pub(crate) fn create_stream_with(
        &self,
        name: &str,
        records: &[(u8, &[u8])],
        durability: Durability,
    ) -> Result<(StreamId, Receipt)> {
        self.check_writable()?;
        check_stream_name(name)?;
        for (kind, payload) in records {
            self.check_record(*kind, payload)?;
        }
        let create_len = 8 + name.len();
        let len = self
            .batch_len(std::iter::once(create_len).chain(records.iter().map(|(_, p)| p.len())))?;
        let mut st = self.state.lock();
        Self::check_usable(&st)?;
        self.make_room(&mut st, len)?;
        // Checked after `make_room`, which may wait with the lock released.
        if st.catalog.names.contains_key(name) {
            return Err(Error::StreamExists(name.to_owned()));
        }
        let id = st.catalog.next_stream_id;
        let catalog_seq = st.catalog.catalog_next_seq;
        let mut payload = id.to_le_bytes().to_vec();
        payload.extend_from_slice(name.as_bytes());
        let entry = CatalogEntry {
            op: CatalogOp::Create,
            stream_id: id,
            seq: catalog_seq,
            name: name.as_bytes().to_vec(),
        };
        st.catalog
            .apply_entry(&entry)
            .map_err(Error::InvalidInput)?;
        st.active.catalog.push(entry);
        let lsn = Lsn::new(st.active.id, st.end);
        let create = (
            CATALOG_STREAM,
            catalog_seq,
            KIND_CATALOG_CREATE,
            0,
            &payload[..],
        );
        let first = records
            .iter()
            .zip(0u64..)
            .map(|((kind, p), seq)| (id, seq, *kind, 0, *p));
        self.encode_records(&mut st, std::iter::once(create).chain(first));
        st.counters.commits += 1;
        self.settle(st, durability)?;
        let seqs = (0..records.len() as u64).map(Seq).collect();
        Ok((StreamId(id), Receipt { lsn, seqs }))
    }

    /// Binds live `stream` to `name` (free) and frees its old name, in one catalog record.
    pub(crate) fn rename_stream(
        &self,
        stream: StreamId,
        name: &str,
        durability: Durability,
    ) -> Result<()> {
        self.check_writable()?;
        check_stream_name(name)?;
        let mut payload = stream.0.to_le_bytes().to_vec();
        payload.extend_from_slice(name.as_bytes());
        let entry = CatalogEntry {
            op: CatalogOp::Rename,
            stream_id: stream.0,
            seq: 0,
            name: name.as_bytes().to_vec(),
        };
        let st = self.state.lock();
        Self::check_usable(&st)?;
        self.write_catalog(st, entry, KIND_CATALOG_RENAME, &payload, durability)
    }

    pub(crate) fn delete_stream(&self, stream: StreamId, durability: Durability) -> Result<()> {
        self.check_writable()?;
        let st = self.state.lock();
        Self::check_usable(&st)?;
        let entry = CatalogEntry {
            op: CatalogOp::Delete,
            stream_id: stream.0,
            seq: 0,
            name: Vec::new(),
        };
        self.write_catalog(
            st,
            entry,
            KIND_CATALOG_DELETE,
            &stream.0.to_le_bytes(),
            durability,
        )
    }

    /// Writes one catalog record (a delete or a rename) as a batch of its own. The entry's
    /// seq is assigned here; the stream and the name are checked after `make_room`, which may
    /// wait with the lock released.
    fn write_catalog<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        mut entry: CatalogEntry,
        kind: u8,
        payload: &[u8],
        durability: Durability,
    ) -> Result<()> {
        let len = encoded_batch_len([payload.len()]);
        self.make_room(&mut st, len)?;
        let live = st
            .catalog
            .streams
            .get(&entry.stream_id)
            .is_some_and(|s| !s.deleted);
        if !live || entry.stream_id == CATALOG_STREAM {
            return Err(Error::UnknownStream(StreamId(entry.stream_id).to_string()));
        }
        if let Ok(name) = std::str::from_utf8(&entry.name) {
            if st.catalog.names.contains_key(name) {
                return Err(Error::StreamExists(name.to_owned()));
            }
        }
        entry.seq = st.catalog.catalog_next_seq;
        let seq = entry.seq;
        st.catalog
            .apply_entry(&entry)
            .map_err(Error::InvalidInput)?;
        st.active.catalog.push(entry);
        self.encode_records(
            &mut st,
            std::iter::once((CATALOG_STREAM, seq, kind, 0, payload)),
        );
        self.settle(st, durability)
    }
}

/// The groups a thread's sync cycles made durable, whose sleepers it wakes once it holds
/// the log's lock no more: on drop, or before it sleeps itself.
pub(crate) struct Wakes<'a> {
    inner: &'a Inner,
    epochs: Range<u64>,
    /// The group one of whose committers was elected to lead the next cycle.
    elected: Option<usize>,
}

impl<'a> Wakes<'a> {
    fn new(inner: &'a Inner) -> Self {
        Wakes {
            inner,
            epochs: 0..0,
            elected: None,
        }
    }

    fn add(&mut self, epochs: Range<u64>) {
        if self.epochs.is_empty() {
            self.epochs = epochs;
        } else if !epochs.is_empty() {
            // Cycles run in order, so the groups follow on.
            self.epochs.end = epochs.end;
        }
    }

    fn issue(&mut self) {
        // The leader first: the disk waits for it.
        if let Some(g) = self.elected.take() {
            self.inner.group[g].wake_one_sleeper();
        }
        for e in std::mem::replace(&mut self.epochs, 0..0) {
            self.inner.group[(e % GROUPS) as usize].wake_sleepers();
        }
    }
}

impl Drop for Wakes<'_> {
    fn drop(&mut self) {
        self.issue();
    }
}

/// Wait words for waiting groups, indexed by group number modulo this; more than
/// the groups that can be in flight at once (`max_concurrent_syncs` ≤ 4, plus the forming one).
pub(crate) const GROUPS: u64 = 8;

/// Longest stream name, in bytes. spec: segment.md#streams-and-the-catalog
pub(crate) const MAX_STREAM_NAME_BYTES: usize = 4096;

/// Refuses a name the catalog cannot bind. spec: segment.md#streams-and-the-catalog
fn check_stream_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_STREAM_NAME_BYTES {
        return Err(Error::InvalidInput(format!(
            "a stream name has 1 to {MAX_STREAM_NAME_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Segment numbers stay below 2^32 so that an [`Lsn`] orders them.
const MAX_SEGMENT_ID: u64 = u32::MAX as u64;

/// The footer of the active segment as it stands.
pub(crate) fn build_footer(st: &State, id: SegmentId) -> Vec<u8> {
    let mut streams: Vec<(u64, &ActiveStreamIndex)> = st
        .catalog
        .streams
        .iter()
        .filter_map(|(k, s)| s.active.as_ref().map(|a| (*k, a)))
        .collect();
    if let Some(c) = &st.active.catalog_index {
        streams.push((CATALOG_STREAM, c));
    }
    streams.sort_by_key(|(k, _)| *k);
    let mut summaries: Vec<StreamSummary> = Vec::with_capacity(streams.len());
    let mut index: Vec<IndexEntry> = Vec::new();
    for (k, a) in streams {
        summaries.push(a.summary(k, index.len() as u32));
        index.extend(a.entries());
    }
    let mut out = Vec::new();
    encode_footer(
        &mut out,
        id.0,
        st.end,
        &summaries,
        &index,
        &st.active.catalog,
    );
    out
}

/// Creates segment `id` with its header durable, and syncs the directory.
pub(crate) fn create_segment(
    storage: &dyn Storage,
    dir: &std::path::Path,
    store_id: [u8; 16],
    id: SegmentId,
    options: &crate::options::LogOptions,
    start_small: bool,
) -> Result<ActiveSegment> {
    if id.0 > MAX_SEGMENT_ID {
        return Err(Error::InvalidInput(format!(
            "segment number {} exceeds the format's limit of {MAX_SEGMENT_ID}",
            id.0
        )));
    }
    let path = dir.join(segment_file_name(id.0));
    let file: Arc<dyn StorageFile> = storage
        .open_file(&path, OpenMode::CreateNew)
        .map_err(io_err("creating", &path))?;
    // A segment started small is reserved as a store's first segment is, then grows.
    let sized_as = if start_small { SegmentId(1) } else { id };
    let allocated = match next_allocation(sized_as, 0, SEGMENT_HEADER_LEN as u64, options) {
        Some(len) if options.preallocate => {
            file.allocate(len).map_err(io_err("preallocating", &path))?;
            len
        }
        _ => 0,
    };
    let header = SegmentHeader {
        store_id,
        segment_id: id.0,
        created_unix_ms: now_unix_ms(),
    };
    file.write_all_at(&header.encode(), 0)
        .map_err(io_err("writing the header of", &path))?;
    // The header is durable before any record is written (spec: recovery.md#ordering).
    file.sync_all().map_err(io_err("syncing", &path))?;
    storage
        .sync_dir(dir)
        .map_err(io_err("syncing directory", dir))?;
    Ok(ActiveSegment {
        id,
        file,
        path,
        catalog: Vec::new(),
        catalog_index: None,
        allocated,
        zeroed: 0,
    })
}

/// The length to preallocate segment `segment` to before data reaching offset `needed` is
/// written into it, when `allocated` bytes are reserved, or `None` when nothing needs to grow
/// (the data fits, or the reservation already spans a whole segment: a batch larger than that
/// is written past it and extends the file itself). spec: segment.md#zero-fill-and-preallocation
///
/// The first segment of a store starts at the options' first step and doubles until `needed`
/// fits, capped at the segment size, so a small store stays small. Every later segment is
/// reserved whole at once: the store has filled a segment already, so it is not small, and
/// in the preallocation bench a whole reservation was the faster choice for durable commits.
/// A later segment that was started small ([`Inner::seal_active`]: the store was at rest)
/// keeps growing by doubling from what it holds.
pub(crate) fn next_allocation(
    segment: SegmentId,
    allocated: u64,
    needed: u64,
    options: &crate::options::LogOptions,
) -> Option<u64> {
    let cap = options.segment_size_bytes;
    if needed <= allocated || allocated >= cap {
        return None;
    }
    let first = if segment.0 > 1 && allocated == 0 {
        cap
    } else {
        options.first_preallocation_bytes
    };
    let mut len = allocated.max(first);
    while len < needed && len < cap {
        len = len.saturating_mul(2);
    }
    Some(len.min(cap))
}

/// The range of the reservation (`allocated` bytes, zeros written up to `zeroed`) to fill
/// with zeros after a write that ends the data at `end`, or `None` when at least half a step
/// of written zeros is still ahead of the data (or zero-ahead is off, or the reservation ends
/// first). spec: segment.md#zero-fill-and-preallocation
fn zero_ahead(
    zeroed: u64,
    allocated: u64,
    end: u64,
    options: &crate::options::LogOptions,
) -> Option<(u64, u64)> {
    let step = options.zero_ahead_bytes;
    if !options.preallocate || step == 0 || zeroed >= end.saturating_add(step / 2) {
        return None;
    }
    let from = zeroed.max(end);
    let to = allocated.min(from.saturating_add(step));
    (to > from).then_some((from, to))
}

/// Keeps the allocation of a written buffer for the groups after it: as `buf` itself when
/// `buf` is still empty and smaller, else as `spare` when that is smaller; not at all when it
/// is larger than `limit` bytes (a very large batch grew it).
fn keep_buffer(mut written: Vec<u8>, buf: &mut Vec<u8>, spare: &mut Vec<u8>, limit: usize) {
    if written.capacity() > limit {
        return;
    }
    written.clear();
    if buf.is_empty() && buf.capacity() < written.capacity() {
        *spare = std::mem::replace(buf, written);
    } else if spare.capacity() < written.capacity() {
        *spare = written;
    }
}

/// Zeros written ahead of the data come from here, a chunk at a time.
static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// Writes zeros over `from..to` of `file`.
fn write_zeros(file: &dyn StorageFile, from: u64, to: u64) -> std::io::Result<()> {
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64);
        file.write_all_at(&ZEROS[..n as usize], at)?;
        at += n;
    }
    Ok(())
}

pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::{keep_buffer, zero_ahead};
    use crate::options::LogOptions;

    const STEP: u64 = 64 << 10;

    fn options() -> LogOptions {
        LogOptions::default().with_zero_ahead_bytes(STEP)
    }

    #[test]
    fn zeros_start_past_the_data_and_stay_inside_the_reservation() {
        let options = options();
        for allocated in [16 << 10, 100_000, 1 << 20] {
            for zeroed in [0, 4096, 50_000, 200_000] {
                for end in [64, 4097, 49_999, 99_000, 150_000] {
                    if let Some((from, to)) = zero_ahead(zeroed, allocated, end, &options) {
                        assert!(from >= end && from >= zeroed, "{zeroed} {allocated} {end}");
                        assert!(to <= allocated && to - from <= STEP && to > from);
                    }
                }
            }
        }
    }

    #[test]
    fn zeros_are_written_again_only_when_less_than_half_a_step_is_left() {
        let options = options();
        let (_, to) = zero_ahead(0, 1 << 20, 100, &options).expect("nothing written ahead yet");
        assert_eq!(to, 100 + STEP);
        assert_eq!(zero_ahead(to, 1 << 20, 100 + STEP / 2, &options), None);
        let (from, _) = zero_ahead(to, 1 << 20, 101 + STEP / 2, &options).expect("refill");
        assert_eq!(from, to);
    }

    #[test]
    fn nothing_is_written_ahead_when_it_is_off_or_nothing_is_reserved() {
        let off = options().with_zero_ahead_bytes(0);
        assert_eq!(zero_ahead(0, 1 << 20, 100, &off), None);
        let unreserved = options().with_preallocate(false);
        assert_eq!(zero_ahead(0, 1 << 20, 100, &unreserved), None);
        assert_eq!(zero_ahead(0, 4096, 4096, &options()), None);
    }

    #[test]
    fn a_written_buffer_s_allocation_is_kept_for_the_next_groups_within_the_limit() {
        let written = || {
            let mut v = Vec::with_capacity(64 << 10);
            v.extend_from_slice(&[7; 1000]);
            v
        };
        // No commit came during the write: the buffer itself takes the allocation back.
        let (mut buf, mut spare) = (Vec::new(), Vec::new());
        keep_buffer(written(), &mut buf, &mut spare, 1 << 20);
        assert!(buf.is_empty() && buf.capacity() >= 64 << 10);
        // Commits came meanwhile: they stay in the buffer, the allocation waits as the spare.
        let (mut buf, mut spare) = (vec![1u8; 10], Vec::new());
        keep_buffer(written(), &mut buf, &mut spare, 1 << 20);
        assert_eq!(buf, vec![1u8; 10]);
        assert!(spare.is_empty() && spare.capacity() >= 64 << 10);
        // A larger spare is not swapped for a smaller one.
        let mut spare = Vec::with_capacity(1 << 20);
        keep_buffer(written(), &mut buf, &mut spare, 2 << 20);
        assert!(spare.capacity() >= 1 << 20);
        // An allocation above the limit is let go of.
        let (mut buf, mut spare) = (Vec::new(), Vec::new());
        keep_buffer(written(), &mut buf, &mut spare, 32 << 10);
        assert_eq!((buf.capacity(), spare.capacity()), (0, 0));
    }
}
