//! Registered projections of a session: resumed from their checkpoints plus the records
//! after them, folded by writers as events are appended, checkpointed where the session's
//! state is. spec: format-spec/cache.md#projections

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use sessionlog_log::storage::{OpenMode, StorageFile};
use sessionlog_log::{Seq as LogSeq, StreamId};
use sessionlog_session::{
    decode_stored_event, upgrade_event, Event, FormatVersion, SessionHeader, SessionState,
};

use super::{CacheUse, LogPast, Store};
use crate::cache::{self, CacheHeader, CacheMiss};
use crate::error::{Error, Result};
use crate::projection::{
    AnyState, MessageEstimate, Projected, Projection, ProjectionError, Registered, StoredEvent,
    Tally,
};

/// One registered projection of one session: its state, or why it failed.
pub(crate) struct Slot {
    pub(crate) projection: Arc<dyn Registered>,
    pub(crate) state: std::result::Result<AnyState, ProjectionError>,
    /// Events folded into the state (the session's next seq when it covers them all).
    pub(crate) events: u64,
    /// Events the state covered when its checkpoint was last written or loaded.
    pub(crate) checkpointed: u64,
    /// Events the state has been told of: those up to the last one handed to its fold, or
    /// all of them once [`Slot::catch_up`] told it of those it skipped since.
    pub(crate) told: u64,
    /// The files of the state's appended parts this slot has written and extends, once it
    /// has written a checkpoint. spec: format-spec/cache.md#appended-parts
    appended: Option<AppendedFiles>,
    /// The record kinds the projection wants, asked of it once ([`Projection::wants`] is a
    /// function of the kind): a bit per kind.
    wanted: [u64; 4],
    /// The kinds of those it tallies ([`Projection::tallies`]), asked once likewise.
    tallied: [u64; 4],
    /// The run of tallied events not handed to the fold yet.
    run: Run,
    /// Whether the fold reads the writer's estimates ([`Projection::reads_estimates`]).
    pub(crate) estimates: bool,
}

/// A run of tallied events a slot keeps until it hands it to its fold as a [`Tally`]: the
/// type's name is kept in a buffer the slot reuses.
#[derive(Default)]
struct Run {
    event_type: String,
    kind: u8,
    events: u64,
    record_bytes: u64,
    first_seq: u64,
    last_seq: u64,
    first_time: i64,
    last_time: i64,
}

/// What a run keeps of one tallied event.
#[derive(Clone, Copy)]
struct Counted<'a> {
    event_type: &'a str,
    kind: u8,
    seq: u64,
    time: i64,
    record_bytes: u64,
}

impl<'a> Counted<'a> {
    fn of(event: &'a Event, kind: u8, record_bytes: u64) -> Counted<'a> {
        Counted {
            event_type: event.event_type(),
            kind,
            seq: event.seq().get(),
            time: event.time(),
            record_bytes,
        }
    }
}

impl Run {
    /// Adds an event to the run, if it is of the run's kind and type: whether it was.
    #[inline]
    fn extend(&mut self, e: Counted<'_>) -> bool {
        if self.events == 0
            || self.kind != e.kind
            || !sessionlog_session::json::same_bytes(&self.event_type, e.event_type)
        {
            return false;
        }
        self.events += 1;
        self.record_bytes += e.record_bytes;
        self.last_seq = e.seq;
        self.last_time = e.time;
        true
    }

    /// Begins a new run with an event (the run must be empty: handed over before).
    fn begin(&mut self, e: Counted<'_>) {
        self.event_type.clear();
        self.event_type.push_str(e.event_type);
        self.kind = e.kind;
        self.events = 1;
        self.record_bytes = e.record_bytes;
        self.first_seq = e.seq;
        self.last_seq = e.seq;
        self.first_time = e.time;
        self.last_time = e.time;
    }

    fn tally(&self) -> Tally<'_> {
        Tally {
            event_type: &self.event_type,
            kind: self.kind,
            events: self.events,
            record_bytes: self.record_bytes,
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            first_time: self.first_time,
            last_time: self.last_time,
        }
    }
}

/// A generation of appended-part files that one slot writes: each file's bytes so far and
/// their CRC. The generation stays listed as live in its store while the slot lasts.
struct AppendedFiles {
    generation: u64,
    parts: Vec<PartFile>,
    live: Arc<Mutex<HashSet<u64>>>,
}

struct PartFile {
    file: Arc<dyn StorageFile>,
    written: u64,
    crc: crc32fast::Hasher,
}

impl Drop for AppendedFiles {
    fn drop(&mut self) {
        self.live.lock().remove(&self.generation);
    }
}

/// A generation id no other generation of the store is likely to have: the process's
/// random hash keys over the time and a counter.
fn new_generation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("projection", &self.projection.name())
            .field("failed", &self.state.as_ref().err())
            .field("events", &self.events)
            .finish()
    }
}

impl Slot {
    /// A slot whose state covers the first `events` events, as its checkpoint did when it
    /// covered `checkpointed`.
    pub(crate) fn new(
        projection: Arc<dyn Registered>,
        state: std::result::Result<AnyState, ProjectionError>,
        events: u64,
        checkpointed: u64,
    ) -> Slot {
        let mut wanted = [0u64; 4];
        let mut tallied = [0u64; 4];
        for kind in 0..=u8::MAX {
            if projection.wants(kind) {
                set_bit(&mut wanted, kind);
                if projection.tallies(kind) {
                    set_bit(&mut tallied, kind);
                }
            }
        }
        let estimates = projection.reads_estimates();
        Slot {
            projection,
            state,
            events,
            checkpointed,
            told: checkpointed,
            appended: None,
            wanted,
            tallied,
            run: Run::default(),
            estimates,
        }
    }

    /// Whether the projection wants records of kind `kind`.
    #[inline]
    pub(crate) fn wants(&self, kind: u8) -> bool {
        bit(&self.wanted, kind)
    }

    /// What the projection does with `event`, of record kind `kind`: skips it (a kind it does
    /// not want), counts it in its run (a kind it tallies, carrying no surface operation),
    /// or applies it.
    #[inline]
    fn takes(&self, kind: u8, event: &Event) -> Takes {
        if !self.wants(kind) {
            Takes::Skip
        } else if self.tallies_kind(kind) && event.surface_op().is_none() {
            Takes::Count
        } else {
            Takes::Apply
        }
    }

    /// Adds `event`, which the projection tallies, to the run, handing the run over first
    /// when the event cannot extend it.
    #[inline]
    fn count(&mut self, event: &Event, kind: u8, record_bytes: u64) {
        self.count_read(Counted::of(event, kind, record_bytes));
    }

    /// [`Slot::count`] of an event known by what a run keeps of it.
    fn count_read(&mut self, e: Counted<'_>) {
        if !self.run.extend(e) {
            self.hand_over_run();
            self.run.begin(e);
        }
        self.told = e.seq + 1;
    }

    /// Whether the projection tallies every event of kind `kind` that carries no surface
    /// operation.
    fn tallies_kind(&self, kind: u8) -> bool {
        bit(&self.tallied, kind)
    }

    /// Hands the run kept to the fold ([`Projection::tally`]), unless it is empty or the
    /// projection has failed.
    #[inline]
    fn hand_over_run(&mut self) {
        if self.run.events != 0 {
            self.hand_over_kept_run();
        }
    }

    /// [`Slot::hand_over_run`] of a run that holds events.
    #[inline(never)]
    fn hand_over_kept_run(&mut self) {
        if let Ok(state) = &mut self.state {
            if let Err(e) = self.projection.tally(state, &self.run.tally()) {
                self.state = Err(e);
            }
        }
        self.run.events = 0;
    }

    /// Tells the state of the events after the last one it was handed: the run of tallied
    /// ones kept ([`Projection::tally`]), then those its projection skipped by kind
    /// ([`Projection::skipped`]); before it is checkpointed or handed out.
    pub(crate) fn catch_up(&mut self) {
        self.hand_over_run();
        if self.told >= self.events {
            return;
        }
        if let Ok(state) = &mut self.state {
            if let Err(e) = self.projection.skipped(state, self.events) {
                self.state = Err(e);
            }
        }
        self.told = self.events;
    }

    /// Whether enough events were folded past the checkpoint to write a new one.
    pub(crate) fn due(&self, refresh_events: u64) -> bool {
        let every = match &self.state {
            Ok(state) => self
                .projection
                .checkpoint_every(state, refresh_events, self.events),
            Err(_) => refresh_events,
        }
        .max(1);
        self.events.saturating_sub(self.checkpointed) >= every
    }

    /// The state as projection type `P`'s, for session `session`: a failed fold is
    /// [`Error::Projection`], a state of another type [`Error::NoSuchProjection`].
    pub(crate) fn state_as<P: Projection>(&self, session: &str) -> Result<&P::State> {
        let name = self.projection.name();
        let state = self
            .state
            .as_ref()
            .map_err(|e| failed(name, session, e.clone()))?;
        state
            .downcast_ref::<P::State>()
            .ok_or_else(|| wrong_type(name))
    }

    /// [`Slot::state_as`], handing the state over.
    pub(crate) fn into_state_as<P: Projection>(self, session: &str) -> Result<P::State> {
        let name = self.projection.name();
        let state = self.state.map_err(|e| failed(name, session, e))?;
        state
            .downcast::<P::State>()
            .map(|state| *state)
            .map_err(|_| wrong_type(name))
    }

    /// Folds one stored event in (or adds it to the run of tallied events), unless the
    /// projection skips its kind or has failed.
    pub(crate) fn feed(&mut self, event: &StoredEvent<'_>) {
        match self.takes(event.kind, event.event) {
            Takes::Skip => {}
            Takes::Count => self.count(event.event, event.kind, event.record_bytes),
            Takes::Apply => self.fold(event),
        }
    }

    /// Folds one stored event of a kind the projection wants in, unless it has failed;
    /// the run of tallied events before it first.
    #[inline]
    fn fold(&mut self, event: &StoredEvent<'_>) {
        self.hand_over_run();
        if let Ok(state) = &mut self.state {
            if let Err(e) = self.projection.apply(state, event) {
                self.state = Err(e);
            }
        }
        self.told = event.event.seq().get() + 1;
    }
}

/// What a slot does with an event ([`Slot::takes`]).
enum Takes {
    Skip,
    Count,
    Apply,
}

/// Sets the bit of `kind` in a set of kinds.
fn set_bit(set: &mut [u64; 4], kind: u8) {
    if let Some(word) = set.get_mut(usize::from(kind / 64)) {
        *word |= 1 << (kind % 64);
    }
}

/// Whether the bit of `kind` is set in a set of kinds.
#[inline]
fn bit(set: &[u64; 4], kind: u8) -> bool {
    set.get(usize::from(kind / 64))
        .is_some_and(|word| word & (1 << (kind % 64)) != 0)
}

/// A projection's fold failed on `session`.
pub(super) fn failed(name: &str, session: &str, source: ProjectionError) -> Error {
    Error::Projection {
        projection: name.to_owned(),
        session: session.to_owned(),
        source,
    }
}

/// A projection's state is not of the type asked for.
pub(super) fn wrong_type(name: &str) -> Error {
    Error::NoSuchProjection(format!("{name} (of the type asked for)"))
}

/// A projection's slot being resumed: the records from `start` on are still to fold.
pub(super) struct Resumed {
    pub(super) slot: Slot,
    pub(super) start: u64,
    pub(super) cache: CacheUse,
}

impl Store {
    /// The state of projection `name` (registered in
    /// [`StoreOptions::with_projection`](crate::StoreOptions::with_projection), of type `P`)
    /// over every event of `session`: from its checkpoint plus the events after the
    /// checkpoint's watermark, or folded from the whole log when no checkpoint can be used
    /// (then, or when many events were folded, a new checkpoint is written if the store is
    /// writable and the session's records are durable). Never writes the log.
    ///
    /// A projection whose fold fails or panics on this session is
    /// [`Error::Projection`]; the session and every other projection are unaffected.
    pub fn projection<P: Projection>(
        &self,
        name: &str,
        session: &str,
    ) -> Result<Projected<P::State>> {
        let registered = self
            .inner
            .options
            .projections
            .get(name)
            .ok_or_else(|| Error::NoSuchProjection(name.to_owned()))?
            .clone();
        let stream = self.stream(session)?;
        let header = self.read_header(session, stream)?;
        let (slot, cache) = self.resume_projection(registered, session, stream, &header)?;
        let events = slot.events;
        Ok(Projected {
            state: slot.into_state_as::<P>(session)?,
            events,
            cache,
        })
    }

    /// Every registered projection of a session, resumed for its writer: each from its
    /// checkpoint, all folded in one pass over the records after the oldest of them.
    pub(super) fn resume_projections(
        &self,
        session: &str,
        stream: StreamId,
        header: &SessionHeader,
    ) -> Result<Vec<Slot>> {
        let next = self.next_record(stream);
        let mut resumed: Vec<Resumed> = self
            .inner
            .options
            .projections
            .0
            .iter()
            .map(|projection| self.load_slot(projection.clone(), stream, header, next))
            .collect();
        self.fold_slots(&mut resumed, session, stream, header, next)?;
        Ok(resumed
            .into_iter()
            .map(|r| self.finish_slot(stream, r, next).0)
            .collect())
    }

    /// One projection of one session over all its records, and how it was built; its
    /// checkpoint is rewritten when it was rebuilt or many events were folded past it.
    /// An error of the log or of the session's records is the outer error; the
    /// projection's own failure is the slot's state.
    fn resume_projection(
        &self,
        projection: Arc<dyn Registered>,
        session: &str,
        stream: StreamId,
        header: &SessionHeader,
    ) -> Result<(Slot, CacheUse)> {
        let next = self.next_record(stream);
        let mut resumed = [self.load_slot(projection, stream, header, next)];
        self.fold_slots(&mut resumed, session, stream, header, next)?;
        let [resumed] = resumed;
        Ok(self.finish_slot(stream, resumed, next))
    }

    /// A projection's slot from its checkpoint, or from its initial state when no
    /// checkpoint can be used; the records from the returned start on are still to fold.
    fn load_slot(
        &self,
        projection: Arc<dyn Registered>,
        stream: StreamId,
        header: &SessionHeader,
        next: u64,
    ) -> Resumed {
        let loaded = if self.inner.options.projection_cache {
            self.load_projection(projection.as_ref(), stream, next)
        } else {
            Err(CacheMiss::Missing)
        };
        self.resumed_from(projection, loaded, header, next)
    }

    /// A slot from a checkpoint's state and watermark, or from the projection's initial
    /// state when the checkpoint was `Err(why)`.
    pub(super) fn resumed_from(
        &self,
        projection: Arc<dyn Registered>,
        loaded: std::result::Result<(AnyState, u64), CacheMiss>,
        header: &SessionHeader,
        next: u64,
    ) -> Resumed {
        let miss = match loaded {
            Ok((state, watermark)) => return resumed_at(projection, state, watermark, next),
            Err(miss) => miss,
        };
        let cache = if self.inner.options.projection_cache {
            CacheUse::Rebuilt(miss)
        } else {
            CacheUse::Disabled
        };
        Resumed {
            slot: Slot::new(
                projection.clone(),
                projection.init(header),
                next.saturating_sub(1),
                0,
            ),
            start: 1,
            cache,
        }
    }

    /// Folds the records of `stream` after each slot's start, up to `next`, into the
    /// slots in one pass: a record is decoded once, and only when a slot still folding
    /// from it wants its kind.
    pub(super) fn fold_slots(
        &self,
        resumed: &mut [Resumed],
        session: &str,
        stream: StreamId,
        header: &SessionHeader,
        next: u64,
    ) -> Result<()> {
        let Some(from) = resumed.iter().map(|r| r.start).min() else {
            return Ok(());
        };
        let log = &self.inner.log;
        let past = LogPast::new(log.clone(), stream, header.id());
        let version = FormatVersion::for_header(&self.inner.options.version, header);
        let folds = |r: &Resumed, seq: u64| r.slot.state.is_ok() && r.start <= seq;
        let chunks_tallied_from_heads = version.surface_type("assistant/chunk").is_none();
        for record in log.iter(stream, LogSeq(from), LogSeq(next)) {
            if resumed.iter().all(|r| r.slot.state.is_err()) {
                break;
            }
            let record = record?;
            let seq = record.seq.0;
            let wanted = |r: &Resumed| folds(r, seq) && r.slot.wants(record.kind);
            if !resumed.iter().any(wanted) {
                continue;
            }
            // A streamed chunk that every slot wanting it tallies is read from its head:
            // its type, seq and time are all a run keeps (no chunk carries a surface
            // operation where the rules make chunks no surface type).
            if chunks_tallied_from_heads
                && record.kind == sessionlog_session::codec::kind::ASSISTANT_CHUNK
                && resumed
                    .iter()
                    .filter(|r| wanted(r))
                    .all(|r| r.slot.tallies_kind(record.kind))
            {
                // The log numbers a session's records from its header's, one before its
                // first event's.
                if let Some((event_seq, time)) =
                    sessionlog_session::chunk_head(record.kind, &record.payload)
                        .filter(|(s, _)| s.get().checked_add(1) == Some(seq))
                {
                    let counted = Counted {
                        event_type: "assistant/chunk",
                        kind: record.kind,
                        seq: event_seq.get(),
                        time,
                        record_bytes: record.payload.len() as u64,
                    };
                    for r in resumed.iter_mut().filter(|r| wanted(r)) {
                        r.slot.count_read(counted);
                    }
                    continue;
                }
            }
            let mut event = decode_stored_event(&record.payload).map_err(|e| Error::BadRecord {
                session: session.to_owned(),
                seq,
                detail: e.to_string(),
            })?;
            upgrade_event(&mut event, &past, header.id())?;
            let stored = StoredEvent {
                kind: record.kind,
                record_bytes: record.payload.len() as u64,
                event: &event,
                version: &version,
                message_estimate: None,
                usage: None,
                message: None,
            };
            for r in resumed.iter_mut().filter(|r| folds(r, seq)) {
                r.slot.feed(&stored);
            }
        }
        for r in resumed.iter_mut() {
            r.slot.catch_up();
        }
        Ok(())
    }

    /// A folded slot and how it was built; its checkpoint is rewritten when it was rebuilt
    /// or many events were folded past it.
    fn finish_slot(&self, stream: StreamId, resumed: Resumed, next: u64) -> (Slot, CacheUse) {
        let Resumed {
            mut slot,
            start,
            mut cache,
        } = resumed;
        if let CacheUse::Hit { folded } = &mut cache {
            *folded = next.saturating_sub(start);
        }
        let refresh = match &cache {
            CacheUse::Hit { .. } => slot.due(self.inner.options.cache_refresh_events),
            CacheUse::Rebuilt(_) => true,
            CacheUse::Disabled => false,
        };
        if refresh {
            self.write_projection(stream, &mut slot, None);
        }
        (slot, cache)
    }

    /// The checkpoint of `projection` of `stream` and its watermark, if the file proves it
    /// matches this log and decodes under the projection's running version (with the
    /// appended parts it names, if the projection has any).
    pub(super) fn load_projection(
        &self,
        projection: &dyn Registered,
        stream: StreamId,
        next: u64,
    ) -> std::result::Result<(AnyState, u64), CacheMiss> {
        let path = cache::projection_path(self.inner.log.dir(), stream, projection.name());
        let bytes = self.read_cache_file(&path)?;
        let expected = [(projection.name(), projection.version())];
        let (h, parts) = self.check_cache_file(&path, &bytes, &expected, stream, next)?;
        let part = parts
            .first()
            .ok_or_else(|| CacheMiss::Incompatible("section missing".into()))?;
        let undecodable =
            |e: ProjectionError| CacheMiss::Incompatible(format!("{}: {e}", projection.name()));
        let count = projection.appended_parts();
        let state = if count == 0 {
            projection.decode_shared(bytes.slice_ref(part))
        } else {
            let (named, rest) = cache::AppendedParts::decode(part)
                .filter(|(named, _)| named.parts.len() == count)
                .ok_or_else(|| {
                    CacheMiss::Incompatible(format!(
                        "{}: no list of its {count} appended parts",
                        projection.name()
                    ))
                })?;
            let parts = self.read_appended(projection.name(), stream, &named)?;
            projection.decode_appended(bytes.slice_ref(rest), parts)
        };
        Ok((state.map_err(undecodable)?, h.watermark))
    }

    /// The appended parts a checkpoint names, each as far as it covers it and checked
    /// against its CRC. spec: cache.md#appended-parts
    fn read_appended(
        &self,
        name: &str,
        stream: StreamId,
        named: &cache::AppendedParts,
    ) -> std::result::Result<Vec<Bytes>, CacheMiss> {
        let log = &self.inner.log;
        let mut parts = Vec::with_capacity(named.parts.len());
        for (k, &(len, crc)) in named.parts.iter().enumerate() {
            let path = cache::appended_path(log.dir(), stream, name, named.generation, k);
            let bytes = match cache::read_prefix(&log.storage(), &path, len) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    return Err(CacheMiss::Corrupt(format!(
                        "{} names {}, which is missing",
                        name,
                        path.display()
                    )))
                }
                Err(e) => return Err(CacheMiss::Corrupt(e.to_string())),
            };
            if crc32fast::hash(&bytes) != crc {
                return Err(CacheMiss::Corrupt(format!(
                    "the first {len} bytes of {} do not match their checksum",
                    path.display()
                )));
            }
            parts.push(bytes);
        }
        Ok(parts)
    }

    /// Writes the checkpoint of a slot whose state covers every record of `stream`, under
    /// the rules of the session's own checkpoint (durable records only, never syncing,
    /// never failing the caller). A failed projection writes none. A projection with
    /// appended parts has them extended first, by what was added since the slot last
    /// wrote them. `known` is the header of a checkpoint of `stream` found already, used when
    /// it covers what the slot does.
    pub(super) fn write_projection(
        &self,
        stream: StreamId,
        slot: &mut Slot,
        known: Option<CacheHeader>,
    ) {
        slot.catch_up();
        let Slot {
            projection,
            state,
            events,
            checkpointed,
            appended,
            ..
        } = slot;
        let Ok(state) = &*state else {
            return;
        };
        let Some(header) = self.cache_header(stream, *events + 1, known) else {
            return;
        };
        let name = projection.name();
        let version = projection.version();
        let mut named = Vec::new();
        let count = projection.appended_parts();
        let mut started = None;
        if count > 0 {
            let mut parts = Vec::with_capacity(count);
            if projection.appended(state, &mut parts).is_err() || parts.len() != count {
                return;
            }
            match self.extend_appended(stream, name, appended, &parts) {
                Ok((parts, new)) => {
                    parts.encode(&mut named);
                    started = new.then_some(parts.generation);
                }
                Err(_) => return,
            }
        }
        let mut pieces = vec![std::borrow::Cow::Borrowed(&named[..])];
        if projection.encode_pieces(state, &mut pieces).is_err() {
            return;
        }
        let pieces: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        let (head, sum) = cache::frame_one(&header, name, version, &pieces);
        let mut file = Vec::with_capacity(pieces.len() + 2);
        file.push(&head[..]);
        file.extend_from_slice(&pieces);
        file.push(&sum[..]);
        let path = cache::projection_path(self.inner.log.dir(), stream, name);
        // The generation the replaced checkpoint named may still be read beside this
        // writer; it goes when the next generation starts.
        let replaced = started.and_then(|_| self.named_generation(projection.as_ref(), stream));
        if self.write_cache_pieces(&path, &file).is_err() {
            return;
        }
        *checkpointed = *events;
        if let Some(generation) = started {
            let keep = [Some(generation), replaced];
            let _ = self.remove_appended(stream, name, &keep);
        }
    }

    /// The generation of appended parts that the checkpoint of `projection` of `stream`
    /// on disk names, if it is a checkpoint of this projection's version.
    fn named_generation(&self, projection: &dyn Registered, stream: StreamId) -> Option<u64> {
        let path = cache::projection_path(self.inner.log.dir(), stream, projection.name());
        let bytes = self.read_cache_file(&path).ok()?;
        let expected = [(projection.name(), projection.version())];
        let (_, sections) = cache::decode(&bytes, &expected).ok()?;
        let (named, _) = cache::AppendedParts::decode(sections.first()?)?;
        Some(named.generation)
    }

    /// Writes what `parts` hold past what the slot's appended files hold, starting a new
    /// generation of files when the slot has none yet (or a part got shorter, or a write
    /// failed before); returns what the files now hold and whether the generation is new.
    fn extend_appended(
        &self,
        stream: StreamId,
        name: &str,
        files: &mut Option<AppendedFiles>,
        parts: &[Vec<&[u8]>],
    ) -> std::io::Result<(cache::AppendedParts, bool)> {
        let len = |part: &Vec<&[u8]>| part.iter().map(|p| p.len() as u64).sum::<u64>();
        let continues = files.as_ref().is_some_and(|f| {
            f.parts.len() == parts.len()
                && f.parts
                    .iter()
                    .zip(parts)
                    .all(|(file, part)| len(part) >= file.written)
        });
        let new = !continues;
        if new {
            // The generation the slot had is dropped first: it is no longer live.
            *files = None;
        }
        let f = match files {
            Some(f) => f,
            None => files.insert(self.start_generation(stream, name, parts.len())?),
        };
        let written = f.parts.iter_mut().zip(parts).try_for_each(|(file, part)| {
            let mut at = 0u64;
            for piece in part {
                let end = at + piece.len() as u64;
                if end > file.written {
                    let skip = usize::try_from(file.written - at).unwrap_or(usize::MAX);
                    let bytes = piece.get(skip..).unwrap_or_default();
                    file.file.write_all_at(bytes, file.written)?;
                    file.crc.update(bytes);
                    file.written += bytes.len() as u64;
                }
                at = end;
            }
            Ok::<(), std::io::Error>(())
        });
        if let Err(e) = written {
            // The files may hold bytes past what they say; the next write starts afresh.
            *files = None;
            return Err(e);
        }
        let named = cache::AppendedParts {
            generation: f.generation,
            parts: f
                .parts
                .iter()
                .map(|p| (p.written, p.crc.clone().finalize()))
                .collect(),
        };
        Ok((named, new))
    }

    /// New, empty files for a generation of `count` appended parts, listed as live.
    fn start_generation(
        &self,
        stream: StreamId,
        name: &str,
        count: usize,
    ) -> std::io::Result<AppendedFiles> {
        let log = &self.inner.log;
        let storage = log.storage();
        storage.create_dir_all(&log.dir().join(cache::CACHE_DIR))?;
        let generation = new_generation();
        self.inner.live_appended.lock().insert(generation);
        let mut files = AppendedFiles {
            generation,
            parts: Vec::with_capacity(count),
            live: self.inner.live_appended.clone(),
        };
        for k in 0..count {
            let path = cache::appended_path(log.dir(), stream, name, generation, k);
            files.parts.push(PartFile {
                file: storage.open_file(&path, OpenMode::CreateNew)?,
                written: 0,
                crc: crc32fast::Hasher::new(),
            });
        }
        Ok(files)
    }

    /// Removes the appended-part files of projection `name` of `stream` of every
    /// generation but those in `keep` and those a slot of this store is extending.
    fn remove_appended(
        &self,
        stream: StreamId,
        name: &str,
        keep: &[Option<u64>],
    ) -> std::io::Result<()> {
        let log = &self.inner.log;
        let storage = log.storage();
        for (generation, file) in cache::appended_generations(&storage, log.dir(), stream, name)? {
            if keep.contains(&Some(generation))
                || self.inner.live_appended.lock().contains(&generation)
            {
                continue;
            }
            self.remove_cache_file(&log.dir().join(cache::CACHE_DIR).join(file))?;
        }
        Ok(())
    }

    /// Removes the checkpoints of every registered projection of `stream`, with their
    /// appended parts (but those a writer of this store is extending).
    pub(super) fn remove_projections(&self, stream: StreamId) -> std::io::Result<()> {
        let log = &self.inner.log;
        for p in &self.inner.options.projections.0 {
            self.remove_cache_file(&cache::projection_path(log.dir(), stream, p.name()))?;
            self.remove_appended(stream, p.name(), &[])?;
        }
        Ok(())
    }
}

/// A slot from a checkpoint's state and watermark; the records from the watermark up to
/// `next` are still to fold.
pub(super) fn resumed_at(
    projection: Arc<dyn Registered>,
    state: AnyState,
    watermark: u64,
    next: u64,
) -> Resumed {
    Resumed {
        slot: Slot::new(
            projection,
            Ok(state),
            next.saturating_sub(1),
            watermark.saturating_sub(1),
        ),
        start: watermark,
        cache: CacheUse::Hit { folded: 0 },
    }
}

/// The usage the writer's ledger recorded for `event`, if it recorded one: it keeps its
/// newest records, and an appended event's is the last or nearly so. An event whose usage
/// it could not read, or whose record it no longer keeps, gets none here.
fn recorded_usage<'a>(
    state: &'a SessionState,
    kind: u8,
    event: &Event,
) -> Option<&'a sessionlog_session::tokens::Usage> {
    use sessionlog_session::codec::kind;
    if kind != kind::ASSISTANT_MESSAGE && kind != kind::COMPACTION_SUMMARY {
        return None;
    }
    let seq = event.seq();
    state
        .usage_ledger()?
        .requests()
        .iter()
        .rev()
        .take_while(|r| r.seq >= seq)
        .find(|r| r.seq == seq)
        .map(|r| &r.usage)
}

/// The writer's figures of an event: the estimate its state made of the message the event
/// derives, and the usage its ledger recorded for it.
type Figures<'a> = (
    Option<MessageEstimate<'a>>,
    Option<&'a sessionlog_session::tokens::Usage>,
);

/// [`Figures`] of `event`. An event whose kind tag says it derives no message and carries
/// no usage the ledger reads (a projection that wants every event is handed mostly chunks,
/// steps and calls) has an estimate of 0 and no usage, said here without a lookup so that
/// no fold derives them again.
#[inline]
fn writer_figures<'a>(state: &'a SessionState, kind: u8, event: &Event) -> Figures<'a> {
    use sessionlog_session::codec::kind;
    if sessionlog_session::is_surface_kind(kind) || kind == kind::COMPACTION_SUMMARY {
        return looked_up_figures(state, kind, event);
    }
    let counter = state.token_counter().map(|c| c.name());
    (
        counter.map(|counter| MessageEstimate { counter, tokens: 0 }),
        None,
    )
}

/// [`writer_figures`] of an event of a kind that may derive a message or carry usage. Out
/// of line: most appended events are of neither.
#[inline(never)]
fn looked_up_figures<'a>(state: &'a SessionState, kind: u8, event: &Event) -> Figures<'a> {
    // An event of a type that is no surface type derives no message: its estimate is 0. A
    // surface event's is the one the writer's state keeps for its node; a node a later
    // event of the same batch replaced has none kept, and the fold makes its own.
    let message_estimate = state.token_counter().and_then(|counter| {
        let counter = counter.name();
        if !sessionlog_session::is_surface_kind(kind)
            || state.version().surface_type(event.event_type()).is_none()
        {
            return Some(MessageEstimate { counter, tokens: 0 });
        }
        state
            .node_estimate(event.seq())
            .map(|tokens| MessageEstimate { counter, tokens })
    });
    (message_estimate, recorded_usage(state, kind, event))
}

/// Feeds appended events to a writer's projections, with the estimates the writer's state
/// made of their messages; `records` holds each event's kind and payload size.
pub(super) fn feed_all(
    slots: &mut [Slot],
    state: &SessionState,
    events: &[Event],
    records: &[(u8, u64)],
) {
    if slots.is_empty() {
        return;
    }
    for (i, event) in events.iter().enumerate() {
        let Some(&(kind, record_bytes)) = records.get(i) else {
            return;
        };
        let next = event.seq().get() + 1;
        // An event no projection wants is only counted: nothing is made for it.
        if !slots.iter().any(|slot| slot.wants(kind)) {
            for slot in slots.iter_mut() {
                slot.events = next;
            }
            continue;
        }
        feed_one(slots, state, event, kind, record_bytes);
    }
}

/// Feeds one appended event, which some projection wants, to the projections that want
/// it: added to the runs of those that tally it, applied by the others. Out of line: most
/// appended events are wanted by none (streamed chunks, for most projections), and the
/// loop over them need not set up what feeding takes.
#[inline(never)]
fn feed_one(slots: &mut [Slot], state: &SessionState, event: &Event, kind: u8, record_bytes: u64) {
    let next = event.seq().get() + 1;
    // The event as a fold is handed it, made once and only for a fold that applies it; the
    // writer's figures likewise, and only for a fold that reads them.
    let mut stored = None;
    let mut figures = None;
    for slot in slots.iter_mut() {
        match slot.takes(kind, event) {
            Takes::Skip => {}
            Takes::Count => slot.count(event, kind, record_bytes),
            Takes::Apply => {
                let stored = stored.get_or_insert_with(|| StoredEvent {
                    kind,
                    record_bytes,
                    event,
                    version: state.version(),
                    message_estimate: None,
                    usage: None,
                    // Only a surface event derives a message (the kind tag says which are).
                    message: sessionlog_session::is_surface_kind(kind)
                        .then(|| state.folded_message(event))
                        .flatten(),
                });
                let (estimate, usage) = match slot.estimates {
                    true => *figures.get_or_insert_with(|| writer_figures(state, kind, event)),
                    false => (None, None),
                };
                stored.message_estimate = estimate;
                stored.usage = usage;
                slot.fold(stored);
            }
        }
        slot.events = next;
    }
}
