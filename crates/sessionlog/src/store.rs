//! The store: sessions on the log.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use sessionlog_log::{Access, Append, Durability, Log, LogOptions, Seq as LogSeq, StreamId};
use sessionlog_session::{
    decode_header, decode_stored_event, derive_message, encode_event, encode_event_into,
    event_for_format, header_for_format, kind_tag, migrate, needs_migration, zstd_file, BuildEvent,
    ChildFact, DshFormat, Event, EventInput, ExportOptions, FormatChoice, FormatVersion, LookBack,
    PackedLines, RuleSet, SessionHeader, SessionState, WithPending,
};

use sessionlog_session::compaction::{
    self, CompactionContext, CompactionOutcome, CompactionPolicy, PruneOptions, StateAndPast,
    Summarizer,
};
use sessionlog_session::store_trait::SessionCache;
use sessionlog_session::tokens::{
    ContextPressure, HeuristicCounter, TokenCounter, TokenProjection, TokenView,
};
use sessionlog_session::Seq;

use crate::cache::{self, CacheMiss};
use crate::error::{Error, Result};
use crate::projection::{Projection, Projections, StoreProjection};
use crate::view::{RequestView, SurfaceView};

mod create;
mod past;
mod pipeline;
mod projected;
mod resume;
mod retention;
mod store_wide;

pub use create::parse_dsh;
pub(crate) use past::LogPast;
pub use retention::{Retention, RetentionReport};
pub use store_wide::ProjectionCheck;

/// Kind tag of the session header record (record 0 of a session's stream).
/// spec: events.md#session-header-record
pub const KIND_SESSION_HEADER: u8 = 0xE0;

/// Options for [`Store::open`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreOptions {
    /// The log underneath.
    pub log: LogOptions,
    /// Vocabulary and surface rules for sessions created, appended and loaded.
    pub version: FormatVersion,
    /// Keep a checkpoint of each session's state (`cache/` in the store directory) so
    /// resuming or viewing a session folds only the events after the checkpoint.
    pub projection_cache: bool,
    /// Events folded past the checkpoint that make [`Store::view`], an open for writing or
    /// a writer's [`SessionHandle::commit`] write a new one (when its records are durable).
    pub cache_refresh_events: u64,
    /// The counter behind the token projection every [`SessionHandle`] maintains (and so
    /// behind [`SessionHandle::pressure`]).
    pub token_counter: Arc<dyn TokenCounter>,
    /// Consumer projections the store keeps for every session (see [`crate::projection`]):
    /// writers fold them, checkpoints keep them, [`Store::projection`] hands them out.
    pub projections: Projections,
    /// Store-wide projections (see [`crate::projection::store_wide`]): each session's part
    /// checkpointed in one file, [`Store::store_projection`] hands out their total.
    pub store_projections: Projections,
    /// How much event text the store's writers keep in memory together of the surface
    /// events they appended, so that compaction and the rules that look back find them
    /// without reading the log: each [`SessionHandle`] keeps its newest, up to 256 KiB, and
    /// one that appends while all of them keep more than this lets its own oldest go. A
    /// handle gives back what it kept when it is dropped. 0 keeps none (every look-back then
    /// reads the log). Default 64 MiB.
    pub kept_events_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log: LogOptions::default(),
            version: FormatVersion::current(),
            projection_cache: true,
            cache_refresh_events: 1024,
            token_counter: Arc::new(HeuristicCounter),
            projections: Projections::default(),
            store_projections: Projections::default(),
            kept_events_bytes: 64 << 20,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `StoreOptions::default().with_...(...)`.
impl StoreOptions {
    /// Sets [`log`](Self::log).
    #[must_use]
    pub fn with_log(mut self, log: LogOptions) -> Self {
        self.log = log;
        self
    }

    /// Sets [`version`](Self::version).
    #[must_use]
    pub fn with_version(mut self, version: FormatVersion) -> Self {
        self.version = version;
        self
    }

    /// Sets [`projection_cache`](Self::projection_cache).
    #[must_use]
    pub fn with_projection_cache(mut self, projection_cache: bool) -> Self {
        self.projection_cache = projection_cache;
        self
    }

    /// Sets [`cache_refresh_events`](Self::cache_refresh_events).
    #[must_use]
    pub fn with_cache_refresh_events(mut self, cache_refresh_events: u64) -> Self {
        self.cache_refresh_events = cache_refresh_events;
        self
    }

    /// Registers `projection` in [`projections`](Self::projections). Opening the store
    /// refuses a name that is invalid or registered twice.
    #[must_use]
    pub fn with_projection(mut self, projection: impl Projection) -> Self {
        self.projections.push(projection);
        self
    }

    /// Registers `projection` in [`store_projections`](Self::store_projections). Opening
    /// the store refuses a name that is invalid or registered twice.
    #[must_use]
    pub fn with_store_projection(mut self, projection: impl StoreProjection) -> Self {
        self.store_projections.push(projection);
        self
    }

    /// Sets [`token_counter`](Self::token_counter).
    #[must_use]
    pub fn with_token_counter(mut self, token_counter: Arc<dyn TokenCounter>) -> Self {
        self.token_counter = token_counter;
        self
    }

    /// Sets [`kept_events_bytes`](Self::kept_events_bytes).
    #[must_use]
    pub fn with_kept_events_bytes(mut self, kept_events_bytes: usize) -> Self {
        self.kept_events_bytes = kept_events_bytes;
        self
    }
}

#[derive(Debug)]
struct Inner {
    log: Log,
    options: StoreOptions,
    writers: Mutex<HashSet<StreamId>>,
    /// Generations of projections' appended parts that a slot of this store is extending:
    /// a writer that starts a generation removes the others, never these.
    live_appended: Arc<Mutex<HashSet<u64>>>,
    /// The cache files this store wrote, which its next checkpoints may append to.
    cache_files: cache::Written,
    /// Sessions folded for [`SessionStore`](sessionlog_session::SessionStore) appends.
    trait_sessions: SessionCache<crate::session_store::Open>,
    /// Staged imports the open deleted.
    discarded_imports: usize,
    /// What the writers keep at hand together of the events they appended.
    kept: Arc<past::KeptEvents>,
}

/// Many sessions in one log directory. Cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// How a [`SessionView`] was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// From the cache, plus this many events folded after its watermark.
    Hit {
        /// Events folded after the watermark.
        folded: u64,
    },
    /// From the whole log, because the cache could not be used.
    Rebuilt(CacheMiss),
    /// From the whole log; the store keeps no cache.
    Disabled,
}

/// A session's derived state: its header, surface, derived messages and latest request
/// envelope, as of its last event.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The session's name.
    pub name: String,
    /// Its header.
    pub header: SessionHeader,
    /// Events in the session.
    pub events: u64,
    /// The surface and the message of each node.
    pub surface: SurfaceView,
    /// The latest request header and context.
    pub request: RequestView,
    /// How the view was built.
    pub cache: CacheUse,
}

/// What [`Store::cache_verify`] found for one session's cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheCheck {
    /// The checkpoint is usable, and it plus the records after it fold to the state a fold
    /// of the whole log gives.
    Ok,
    /// There is no cache file. Not damage: the cache is disposable, and the next view of the
    /// session writes one.
    Missing,
    /// The checkpoint cannot be used (corrupt, stale, of another version, or different from
    /// a fold of the log), and why. Views and writers rebuild it from the log.
    Unusable(String),
}

/// A session as listed by [`Store::list_sessions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session's name.
    pub name: String,
    /// Events in the session.
    pub events: u64,
}

/// What [`Store::import_dsh`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session's name in the store.
    pub session: String,
    /// Events stored.
    pub events: u64,
    /// Whether the file had a torn tail that was not imported.
    pub tail_discarded: bool,
    /// Closers that opening the session will append (its final turn is open).
    pub closers: u64,
}

impl Store {
    /// Opens (creating if needed) the store in `dir`. Physical recovery of the log happens here.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        Self::open_with(Arc::new(sessionlog_log::RealStorage), dir.as_ref(), options)
    }

    /// Opens the existing store in `dir` read-only: no lock and no write of any kind (no
    /// repair, no cache write), so it works beside a live writer in another process and
    /// without write permission. Views, events, exports, listings and token counts work;
    /// every write fails with [`sessionlog_log::Error::ReadOnly`]. What the log found damaged
    /// is in `log().recovery_report()`, left out of what is read.
    pub fn open_read_only(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        Self::open_with_access(
            Arc::new(sessionlog_log::RealStorage),
            dir.as_ref(),
            options,
            Access::ReadOnly,
        )
    }

    /// Opens the store in `dir` with all I/O (log and cache) through `storage`, creating it
    /// when the directory is absent or empty.
    pub fn open_with(
        storage: Arc<dyn sessionlog_log::Storage>,
        dir: &Path,
        options: StoreOptions,
    ) -> Result<Store> {
        Self::open_with_access(storage, dir, options, Access::CreateOrOpen)
    }

    /// Opens the store in `dir` through `storage` as `access` allows: create, open an
    /// existing store only, or read only.
    pub fn open_with_access(
        storage: Arc<dyn sessionlog_log::Storage>,
        dir: &Path,
        options: StoreOptions,
        access: Access,
    ) -> Result<Store> {
        options.projections.check().map_err(Error::BadProjection)?;
        options
            .store_projections
            .check()
            .map_err(Error::BadProjection)?;
        let log = Log::open_with_access(storage, dir, options.log.clone(), access)?;
        // A read-only open leaves staged imports alone; they are hidden from every listing.
        let discarded_imports = match access {
            Access::ReadOnly => 0,
            _ => create::discard_staged_imports(&log)?,
        };
        let kept = past::KeptEvents::new(options.kept_events_bytes);
        Ok(Store {
            inner: Arc::new(Inner {
                log,
                options,
                writers: Mutex::new(HashSet::new()),
                live_appended: Arc::default(),
                cache_files: cache::Written::default(),
                trait_sessions: SessionCache::new(crate::session_store::CACHE_SESSIONS),
                discarded_imports,
                kept,
            }),
        })
    }

    /// Imports that a crash cut short before they were published, whose staged records this
    /// open deleted (their sessions never existed). spec: events.md#creating-and-importing-a-session
    pub fn discarded_imports(&self) -> usize {
        self.inner.discarded_imports
    }

    /// The log underneath, writable: crate-internal (see [`Store::log_reader`]).
    pub(crate) fn log(&self) -> &Log {
        &self.inner.log
    }

    /// The sessions this store keeps folded for its `SessionStore` implementation.
    pub(crate) fn trait_sessions(&self) -> &SessionCache<crate::session_store::Open> {
        &self.inner.trait_sessions
    }

    /// Refuses a write to a store opened read-only, before anything is done.
    fn check_writable(&self) -> Result<()> {
        Ok(self.inner.log.check_writable()?)
    }

    pub(crate) fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Opens a session for writing as it is, without restart repair: appends must
    /// continue it under the session's rules (a final turn left open stays open until an
    /// event closes it or [`Store::open_session`] repairs it).
    pub fn open_session_as_is(&self, name: &str) -> Result<SessionHandle> {
        let stream = self.stream(name)?;
        self.check_writable()?;
        let (state, cache) = self.resume(name, stream)?;
        if self.refresh_checkpoint(&cache) {
            self.write_checkpoint(stream, &state, None);
        }
        self.handle(name, stream, state, cache)
    }

    /// Whether a fold that used the checkpoint as `cache` says should write a new one.
    fn refresh_checkpoint(&self, cache: &CacheUse) -> bool {
        match cache {
            CacheUse::Hit { folded } => *folded >= self.inner.options.cache_refresh_events,
            CacheUse::Rebuilt(_) => true,
            CacheUse::Disabled => false,
        }
    }

    /// Names of all sessions, sorted.
    pub fn session_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.live_sessions().into_iter().map(|s| s.name).collect();
        names.sort();
        names
    }

    /// The log's streams that are sessions (header written, not a name of the store's own),
    /// by stream id.
    fn live_sessions(&self) -> Vec<sessionlog_log::StreamInfo> {
        let mut streams = self.inner.log.streams();
        streams.retain(|s| s.next_seq.0 > 0 && !create::is_reserved(&s.name));
        streams
    }

    /// The stream of a session that exists: one whose header record is written, under a name
    /// that is not the store's own (a staged import is no session until it is published).
    fn stream(&self, name: &str) -> Result<StreamId> {
        let log = &self.inner.log;
        log.stream_id(name)
            .filter(|_| !create::is_reserved(name))
            .filter(|&id| log.stream_info(id).is_some_and(|i| i.next_seq.0 > 0))
            .ok_or_else(|| Error::NoSuchSession(name.to_owned()))
    }

    fn handle(
        &self,
        name: &str,
        stream: StreamId,
        state: SessionState,
        opened: CacheUse,
    ) -> Result<SessionHandle> {
        self.check_writable()?;
        if !self.inner.writers.lock().insert(stream) {
            return Err(Error::WriterBusy(name.to_owned()));
        }
        let registered = &self.inner.options.projections;
        let views = if state.next_seq().get() == 0 {
            let header = state.header();
            registered
                .0
                .iter()
                .map(|p| projected::Slot::new(p.clone(), p.init(header), 0, 0))
                .collect()
        } else {
            match self.resume_projections(name, stream, state.header()) {
                Ok(views) => views,
                Err(e) => {
                    self.inner.writers.lock().remove(&stream);
                    return Err(e);
                }
            }
        };
        let past = LogPast::for_writer(
            self.inner.log.clone(),
            stream,
            state.header().id(),
            self.inner.kept.clone(),
        );
        Ok(SessionHandle {
            store: self.clone(),
            name: name.to_owned(),
            stream,
            checkpointed: state.next_seq().get(),
            state,
            opened,
            past,
            last: None,
            payload: Vec::new(),
            views,
        })
    }

    /// The header record (record 0) of a session's stream.
    fn read_header(&self, name: &str, stream: StreamId) -> Result<SessionHeader> {
        let first = self.inner.log.read(stream, LogSeq(0))?;
        let bad = |detail: String| Error::BadRecord {
            session: name.to_owned(),
            seq: 0,
            detail,
        };
        if first.kind != KIND_SESSION_HEADER {
            return Err(bad(format!(
                "record 0 has kind {:#x}, not a session header",
                first.kind
            )));
        }
        decode_header(&first.payload).map_err(|e| bad(e.to_string()))
    }

    /// A session's state (surface, turn and step tracker, open tool calls, token
    /// projection), read as [`Store::view`] reads it: from its checkpoint plus the records
    /// after it when the checkpoint matches the log, else folded from every record. No
    /// event is kept, nothing is repaired and nothing is written.
    pub fn session_state(&self, name: &str) -> Result<SessionState> {
        let stream = self.stream(name)?;
        Ok(self.resume(name, stream)?.0)
    }

    /// The seq of the record after the last of `stream` (0 for a stream the log lacks).
    fn next_record(&self, stream: StreamId) -> u64 {
        self.inner
            .log
            .stream_info(stream)
            .map_or(0, |i| i.next_seq.0)
    }

    /// A token projection of session `name` by `counter`, folded from its records streamed
    /// from the log (for a counter other than the one the store maintains; the maintained
    /// figures are [`SessionHandle::pressure`] and [`Store::session_state`]).
    pub fn tokens(&self, name: &str, counter: Arc<dyn TokenCounter>) -> Result<TokenProjection> {
        let stream = self.stream(name)?;
        let header = self.read_header(name, stream)?;
        let log = &self.inner.log;
        let next = self.next_record(stream);
        let past = LogPast::new(log.clone(), stream, header.id());
        let mut tokens = TokenProjection::new(
            counter,
            FormatVersion::for_header(&self.inner.options.version, &header),
        );
        for event in self.stored_events(name, stream, LogSeq(1), LogSeq(next)) {
            let mut event = event?;
            sessionlog_session::upgrade_event(&mut event, &past, header.id())?;
            tokens.apply(&event)?;
        }
        Ok(tokens)
    }

    /// Opens a session for writing: folds it and, when its final turn was left open by a
    /// crash, appends the closers (durably) as new events. Returns the handle and the closers.
    pub fn open_session(&self, name: &str) -> Result<(SessionHandle, Vec<Event>)> {
        let mut handle = self.open_session_as_is(name)?;
        // Restart repair: close a final turn left open (DeepSeek Harness's closers), then an
        // interrupted compaction (an orphaned lock gets an error end; a summary that never got
        // its replacement stays unapplied). Each set of closers is one atomic batch.
        let closers: Vec<EventInput> = handle
            .state
            .repair_closers()?
            .into_iter()
            .map(event_input)
            .collect();
        let mut appended = Vec::new();
        if !closers.is_empty() {
            appended.extend(handle.append_batch(closers)?);
        }
        let compaction = handle.compaction_closers();
        if !compaction.is_empty() {
            appended.extend(handle.append_batch(compaction)?);
        }
        if !appended.is_empty() {
            handle.commit()?;
        }
        Ok((handle, appended))
    }

    /// The session as DeepSeek Harness JSONL: header line, then the events (chunk runs
    /// packed). Collects the whole file; [`Store::write_dsh`] streams it.
    pub fn export_dsh(&self, name: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_dsh(name, &mut out)?;
        Ok(out)
    }

    /// Writes the session as DeepSeek Harness JSONL to `out` (the bytes of
    /// [`Store::export_dsh`]), streaming its records from the log: memory stays bounded by
    /// one run of chunk deltas, whatever the session's length. The stored envelopes are
    /// written verbatim; nothing is folded.
    pub fn write_dsh(&self, name: &str, out: &mut dyn std::io::Write) -> Result<()> {
        let stream = self.stream(name)?;
        let header = self.read_header(name, stream)?;
        let mut lines = String::with_capacity(1 << 16);
        lines.push_str(header.raw());
        lines.push('\n');
        let mut packer = PackedLines::new();
        for event in self.events(name, Seq(0))? {
            packer.push(event?, &mut lines);
            if lines.len() >= 1 << 16 {
                out.write_all(lines.as_bytes()).map_err(Error::Output)?;
                lines.clear();
            }
        }
        packer.finish(&mut lines);
        out.write_all(lines.as_bytes()).map_err(Error::Output)?;
        Ok(())
    }

    /// Writes the session as a DeepSeek Harness file of the format `options` asks for (by
    /// default the one it declares when that holds every event, else the lowest that does),
    /// plain or in DSH's zstd layout, and returns the format written. Two streamed passes
    /// over the log: the first checks that the format holds every event, so a refused
    /// export writes nothing; the second writes. At the declared format the bytes are those
    /// of [`Store::write_dsh`].
    pub fn write_dsh_as(
        &self,
        name: &str,
        options: &ExportOptions,
        out: &mut dyn std::io::Write,
    ) -> Result<DshFormat> {
        let stream = self.stream(name)?;
        let header = self.read_header(name, stream)?;
        let declared = header.format();
        if needs_migration(declared, options.format) {
            let children = if options.children.is_empty() {
                self.children_of(&header)?
            } else {
                options.children.clone()
            };
            let events = self.raw_events(name, Seq(0))?;
            let file = migrate::export_latest(&header, &events, &children, options.zstd)?;
            out.write_all(&file).map_err(Error::Output)?;
            return Ok(DshFormat::LATEST);
        }
        let mut choice = FormatChoice::new(declared);
        let mut any_event = false;
        for event in self.events(name, Seq(0))? {
            choice.observe(&event?);
            any_event = true;
        }
        let format = choice.choose(options.format)?;
        let header_line = format!("{}\n", header_for_format(&header, format)?.raw());
        let mut sink = if options.zstd {
            out.write_all(&zstd_file::frame(header_line.as_bytes())?)
                .map_err(Error::Output)?;
            if !any_event {
                return Ok(format);
            }
            DshSink::Frame(zstd_file::StreamFrame::new(out).map_err(Error::Output)?)
        } else {
            out.write_all(header_line.as_bytes())
                .map_err(Error::Output)?;
            DshSink::Plain(out)
        };
        let mut lines = String::with_capacity(1 << 16);
        let mut packer = PackedLines::new();
        for event in self.events(name, Seq(0))? {
            packer.push(event_for_format(event?, declared, format)?, &mut lines);
            if lines.len() >= 1 << 16 {
                sink.write_all(lines.as_bytes())?;
                lines.clear();
            }
        }
        packer.finish(&mut lines);
        sink.write_all(lines.as_bytes())?;
        sink.finish()?;
        Ok(format)
    }

    /// What a migration of the session with `header` to V4 needs of its direct children: the
    /// store's sessions whose headers name it as their parent (`origin: "subagent"`,
    /// `parentSession` its id), as DSH finds them among the sessions it holds.
    pub fn children_of(&self, header: &SessionHeader) -> Result<Vec<ChildFact>> {
        let mut children = Vec::new();
        for name in self.session_names() {
            let child = self.header(&name)?;
            if !child.is_subagent() || child.parent_session() != Some(header.id()) {
                continue;
            }
            let events = self.raw_events(&name, Seq(0))?;
            children.extend(ChildFact::of(header.id(), &child, &events));
        }
        Ok(children)
    }

    /// The header of session `name`, read from its first record (nothing is folded).
    pub fn header(&self, name: &str) -> Result<SessionHeader> {
        self.read_header(name, self.stream(name)?)
    }

    /// The stored envelopes of a session's events from event seq `from` on, without folding
    /// the session. Collects them; [`Store::events`] streams them.
    pub fn raw_events(&self, name: &str, from: Seq) -> Result<Vec<Event>> {
        self.events(name, from)?.collect()
    }

    /// The stored envelopes of a session's events from event seq `from` on, read from the
    /// log one record at a time as the iterator advances (nothing is folded or collected).
    pub fn events(
        &self,
        name: &str,
        from: Seq,
    ) -> Result<impl Iterator<Item = Result<Event>> + 'static> {
        let stream = self.stream(name)?;
        let next = self
            .inner
            .log
            .stream_info(stream)
            .ok_or_else(|| Error::NoSuchSession(name.to_owned()))?
            .next_seq;
        Ok(self.stored_events(name, stream, LogSeq(from.get().saturating_add(1)), next))
    }

    /// A session's events from event seq `from` on as a fold sees them: legacy shapes
    /// upgraded in memory (the stored bytes stay as they are; [`Store::events`] gives them
    /// as stored), read from the log one record at a time as the iterator advances.
    pub fn loaded_events(
        &self,
        name: &str,
        from: Seq,
    ) -> Result<impl Iterator<Item = Result<Event>> + 'static> {
        let stream = self.stream(name)?;
        let header = self.read_header(name, stream)?;
        let past = LogPast::new(self.inner.log.clone(), stream, header.id());
        Ok(self.events(name, from)?.map(move |event| {
            let mut event = event?;
            sessionlog_session::upgrade_event(&mut event, &past, header.id())?;
            Ok(event)
        }))
    }

    /// The events in log records `from..to` of session `name` (stream `stream`), decoded as
    /// stored (older shapes not upgraded); a record that does not decode is a `BadRecord`.
    pub(crate) fn stored_events(
        &self,
        name: &str,
        stream: StreamId,
        from: LogSeq,
        to: LogSeq,
    ) -> impl Iterator<Item = Result<Event>> + 'static {
        let name = name.to_owned();
        self.inner.log.iter(stream, from, to).map(move |r| {
            let r = r?;
            decode_stored_event(&r.payload).map_err(|e| Error::BadRecord {
                session: name.clone(),
                seq: r.seq.0,
                detail: e.to_string(),
            })
        })
    }

    /// Deletes a session (durably). Its records stay in their segments until reclaimed.
    pub fn delete_session(&self, name: &str) -> Result<()> {
        let stream = self.stream(name)?;
        if self.inner.writers.lock().contains(&stream) {
            return Err(Error::WriterBusy(name.to_owned()));
        }
        self.inner.log.delete_stream(stream, Durability::Sync)?;
        let _ = self.remove_cache_file(&cache::cache_path(self.inner.log.dir(), stream));
        let _ = self.remove_projections(stream);
        Ok(())
    }

    /// Gives the space of deleted sessions back: removes the log's sealed segments that hold
    /// nothing live and rewrites the ones whose live share is below
    /// `LogOptions::rewrite_below_live_percent` ([`sessionlog_log::Log::reclaim`]). Every event of a live session stays,
    /// the originals a compaction shadowed included; only deleted sessions free space.
    pub fn reclaim(&self) -> Result<sessionlog_log::ReclaimReport> {
        self.reclaim_with_progress(&mut |_| {})
    }

    /// [`reclaim`](Self::reclaim), calling `progress` after each segment removed or rewritten.
    pub fn reclaim_with_progress(
        &self,
        progress: &mut dyn FnMut(&sessionlog_log::ReclaimReport),
    ) -> Result<sessionlog_log::ReclaimReport> {
        Ok(self.inner.log.reclaim_with_progress(progress)?)
    }

    /// Seals the log's active segment when it holds events, so the next
    /// [`reclaim`](Self::reclaim) compresses it too ([`sessionlog_log::Log::seal_active`]).
    /// For a store at rest, as `sessionlog gc --compress` uses it.
    pub fn seal_active_segment(&self) -> Result<bool> {
        Ok(self.inner.log.seal_active()?)
    }

    /// Runs [`reclaim`](Self::reclaim) on a thread of its own, once now and then every
    /// `interval`, until the returned handle is stopped or dropped or the store is closed
    /// ([`sessionlog_log::Log::start_background_reclaim`]). Stop it before closing the store
    /// to reopen the directory at once: the thread keeps the store locked until it ends.
    /// It works at most 15% of the time while a run lasts, so that commits keep the
    /// CPU and the disk ([`Store::start_background_reclaim_paced`] sets the share).
    pub fn start_background_reclaim(
        &self,
        interval: std::time::Duration,
    ) -> Result<sessionlog_log::BackgroundReclaim> {
        Ok(self.inner.log.start_background_reclaim(interval)?)
    }

    /// [`Store::start_background_reclaim`], working at most `work_share` of the time while a
    /// run lasts (above 0, at most 1; see
    /// [`sessionlog_log::Log::start_background_reclaim_paced`]).
    pub fn start_background_reclaim_paced(
        &self,
        interval: std::time::Duration,
        work_share: f64,
    ) -> Result<sessionlog_log::BackgroundReclaim> {
        Ok(self
            .inner
            .log
            .start_background_reclaim_paced(interval, work_share)?)
    }

    /// Up to `limit` sessions in name order after `after`, optionally only names starting
    /// with `prefix`. Reads the log's name index, never event data.
    pub fn list_sessions(
        &self,
        after: Option<&str>,
        prefix: Option<&str>,
        limit: usize,
    ) -> Vec<SessionInfo> {
        let start = match (after, prefix) {
            (Some(a), Some(p)) if a < p => None,
            (Some(a), _) => Some(a.to_owned()),
            (None, _) => None,
        };
        // Names sort so that every name with the prefix follows the prefix itself; start just
        // before it by asking for names after its predecessor bound.
        let mut out = Vec::with_capacity(limit.min(1024));
        let mut cursor = start;
        if cursor.is_none() {
            if let Some(p) = prefix.filter(|p| !create::is_reserved(p)) {
                if let Some(id) = self.inner.log.stream_id(p) {
                    if let Some(info) = self.inner.log.stream_info(id) {
                        out.push(SessionInfo {
                            name: info.name,
                            events: info.next_seq.0.saturating_sub(1),
                        });
                    }
                }
                cursor = Some(p.to_owned());
            }
        }
        while out.len() < limit {
            let page = self
                .inner
                .log
                .streams_page(cursor.as_deref(), limit - out.len());
            if page.is_empty() {
                break;
            }
            cursor = page.last().map(|s| s.name.clone());
            for s in page {
                if prefix.is_some_and(|p| !s.name.starts_with(p)) {
                    return out;
                }
                if create::is_reserved(&s.name) {
                    continue;
                }
                out.push(SessionInfo {
                    name: s.name,
                    events: s.next_seq.0.saturating_sub(1),
                });
            }
        }
        out
    }

    /// The session's derived state. Loads the checkpoint of its state and folds only the
    /// events after its watermark (a checkpoint that cannot be used is rebuilt from the log,
    /// and rewritten when its records are durable); then reads the message of each surface
    /// node and the latest request envelope from the log by seq. Never writes the log.
    pub fn view(&self, name: &str) -> Result<SessionView> {
        let stream = self.stream(name)?;
        let (state, cache) = self.resume(name, stream)?;
        if self.refresh_checkpoint(&cache) {
            self.write_checkpoint(stream, &state, None);
        }
        let state = &state;
        let past = LogPast::new(self.inner.log.clone(), stream, state.header().id());
        let read = |seq: Seq| -> Result<Event> {
            past.event_at(seq)?
                .map(std::borrow::Cow::into_owned)
                .ok_or_else(|| Error::BadRecord {
                    session: name.to_owned(),
                    seq: seq.get() + 1,
                    detail: "an event the state names is missing from the log".into(),
                })
        };
        let mut messages = Vec::new();
        for seq in state.message_nodes() {
            let event = read(seq)?;
            if let Some(message) = derive_message(state.version(), &event) {
                messages.push(message.to_owned());
            }
        }
        let data = |seq: Option<Seq>| -> Result<Option<String>> {
            seq.map(|seq| read(seq).map(|e| e.data().raw().to_owned()))
                .transpose()
        };
        Ok(SessionView {
            name: name.to_owned(),
            header: state.header().clone(),
            events: state.next_seq().get(),
            surface: SurfaceView {
                nodes: state.surface(),
                messages,
                replace_generation: state.replace_generation(),
            },
            request: RequestView {
                header: data(state.latest_request_header())?,
                context: data(state.latest_request_context())?,
            },
            cache,
        })
    }

    /// Checks every session's checkpoint against a fold of its whole log. Returns, per
    /// session, what was found: a usable checkpoint that, with the records after it, folds
    /// to the same state; no checkpoint at all (not damage: it is disposable, and the next
    /// view writes one); or why the checkpoint cannot be used.
    pub fn cache_verify(&self) -> Result<Vec<(String, CacheCheck)>> {
        let mut out = Vec::new();
        let full = Store {
            inner: Arc::new(Inner {
                log: self.inner.log.clone(),
                options: self.inner.options.clone().with_projection_cache(false),
                writers: Mutex::new(HashSet::new()),
                live_appended: Arc::default(),
                cache_files: cache::Written::default(),
                trait_sessions: SessionCache::new(1),
                discarded_imports: 0,
                kept: self.inner.kept.clone(),
            }),
        };
        for name in self.session_names() {
            let stream = self.stream(&name)?;
            let next = self.next_record(stream);
            let version = FormatVersion::for_header(
                &self.inner.options.version,
                &self.read_header(&name, stream)?,
            );
            let verdict = match self.load_checkpoint(stream, next, &version) {
                Err(CacheMiss::Missing) => CacheCheck::Missing,
                Err(miss) => CacheCheck::Unusable(miss.to_string()),
                Ok(_) => {
                    let (cached, _) = self.resume(&name, stream)?;
                    let (fresh, _) = full.resume(&name, stream)?;
                    if cached != fresh {
                        CacheCheck::Unusable(
                            "the checkpoint plus the records after it differ from a fold of the log"
                                .into(),
                        )
                    } else {
                        CacheCheck::Ok
                    }
                }
            };
            out.push((name, verdict));
        }
        Ok(out)
    }

    /// Deletes every session's cache and rebuilds it from the log. Returns sessions rebuilt.
    pub fn cache_rebuild(&self) -> Result<usize> {
        self.check_writable()?;
        let names = self.session_names();
        for name in &names {
            let stream = self.stream(name)?;
            self.remove_cache_file(&cache::cache_path(self.inner.log.dir(), stream))
                .and_then(|()| self.remove_projections(stream))
                .map_err(|e| sessionlog_log::Error::Io {
                    op: "removing the cache of",
                    path: name.into(),
                    source: e,
                })?;
            self.view(name)?;
            let header = self.read_header(name, stream)?;
            self.resume_projections(name, stream, &header)?;
        }
        self.rebuild_store_wide()?;
        Ok(names.len())
    }

    /// Makes every event appended so far, by every writer of the store, durable: one group
    /// commit, shared with any running at the same time. [`SessionHandle::commit`] does this
    /// for its writer (and refreshes its checkpoint); this takes no handle, so a caller
    /// committing many sessions' appends at once waits once without holding any writer.
    pub fn flush(&self) -> Result<()> {
        Ok(self.inner.log.flush()?)
    }

    /// Makes everything committed so far durable, then closes the log. Session handles,
    /// raw streams and clones of this store that are still alive keep the log open, and the
    /// store's lock held, until the last of them is dropped: drop them first when the
    /// directory is to be opened again.
    pub fn close(self) -> Result<()> {
        self.inner.log.flush()?;
        Ok(())
    }
}

/// The one writer of a session. Appends are validated against the session's state and
/// folded into it, written to the log's buffer, and made durable by
/// [`SessionHandle::commit`] (group-committed with every other session of the store). The
/// handle keeps the state, not the events: a rule that looks back at an earlier event reads
/// it from the log, so a handle's memory does not grow with its session. It keeps at hand
/// only the newest surface events it appended itself, up to 256 KiB of their text, which is
/// what a compaction reads back and what a rule most often looks back at.
#[derive(Debug)]
pub struct SessionHandle {
    store: Store,
    name: String,
    stream: StreamId,
    /// The state (with its token tally, so pressure is O(1), and the compaction locks
    /// without their end, for restart repair).
    state: SessionState,
    /// The next seq when a checkpoint was last written or loaded.
    checkpointed: u64,
    /// How the open built the state.
    opened: CacheUse,
    /// Earlier events, read back from the log.
    past: LogPast,
    /// The event the last single append added.
    last: Option<Event>,
    /// The log payload of the last single append: its allocation is reused by the next.
    payload: Vec<u8>,
    /// The registered projections, folded with every append.
    views: Vec<projected::Slot>,
}

/// The largest record payload allocation a handle keeps for its next append.
const KEPT_PAYLOAD_BYTES: usize = 64 << 10;

/// Epoch milliseconds now (0 if the clock reads before 1970).
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl SessionHandle {
    /// The session's name in the store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The session's state: header, surface, turn state, next seq.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// How opening the handle built the session's state: from the checkpoint plus the
    /// events after it, or from the whole log (and why). A created session is `Disabled`.
    pub fn opened_from(&self) -> &CacheUse {
        &self.opened
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> Seq {
        self.state.next_seq()
    }

    /// The session's events from seq `from` on, read from the store (appended events are
    /// readable before they are committed).
    pub fn events_from(&self, from: Seq) -> Result<Vec<Event>> {
        self.store.raw_events(&self.name, from)
    }

    /// The model history as of the last append: the message of every surface node, read
    /// back from the log by seq, verbatim (stored key order), skipping assistant settlements
    /// whose content is empty. O(surface), never O(session).
    pub fn derive_messages(&self) -> Result<Vec<String>> {
        let version = self.state.version();
        let mut out = Vec::with_capacity(self.state.surface_state().len());
        for seq in self.state.surface_state().iter() {
            let event = self.past.event_at(seq)?.ok_or_else(|| Error::BadRecord {
                session: self.name.clone(),
                seq: seq.get() + 1,
                detail: "a surface node's event is missing from the log".into(),
            })?;
            if let Some(message) = derive_message(version, &event) {
                out.push(message.to_owned());
            }
        }
        Ok(out)
    }

    /// The state of projection `name` (of type `P`) over every event appended so far,
    /// which the handle folds with each append: O(1). A projection whose fold failed on
    /// this session is [`Error::Projection`]; the handle and its other projections go on.
    pub fn projection<P: Projection>(&mut self, name: &str) -> Result<&P::State> {
        let slot = self
            .views
            .iter_mut()
            .find(|s| s.projection.name() == name)
            .ok_or_else(|| Error::NoSuchProjection(name.to_owned()))?;
        slot.catch_up();
        slot.state_as::<P>(&self.name)
    }

    /// Whether restart repair would append closers now: the last turn, or a compaction, is
    /// open. (A live writer continues them; a restart closes them.)
    pub fn needs_restart_repair(&self) -> bool {
        self.state.turn_open() || !self.state.compaction_locks().is_empty()
    }

    /// Whether a compaction lock is open (its `compaction/end` is not written yet).
    pub fn has_open_compaction(&self) -> bool {
        !self.state.compaction_locks().is_empty()
    }

    /// The `compaction/end` events that would close every compaction lock left open.
    fn compaction_closers(&self) -> Vec<EventInput> {
        let time = self.state.last_event_time().unwrap_or(0);
        self.state
            .compaction_locks()
            .closers(self.state.next_seq().get(), time)
    }

    /// Builds `event` (a typed builder of [`crate::build`] or a raw [`EventInput`]) at the
    /// session's position, validates it against every rule of a native append, and appends
    /// it to the session and to the log buffer. A builder with no time set gets the wall
    /// clock. A refused event changes nothing.
    pub fn append(&mut self, event: impl BuildEvent) -> Result<&Event> {
        let input = event.build(&self.state.position(wall_clock_ms()))?;
        let seq = self.state.next_seq().get();
        if let Some(given) = input.seq {
            if given != seq {
                return Err(sessionlog_session::Error::SeqMismatch {
                    expected: Seq(seq),
                    got: given,
                }
                .into());
            }
        }
        let format = self.state.header().format();
        let event = input.into_event_for(seq, format)?;
        // The event before (in the log already) stays at hand for look-backs, this event's
        // first of all, and for compaction, when it is a surface event.
        if let Some(before) = self.last.take() {
            self.past.remember(before);
        }
        self.write(std::slice::from_ref(&event), RuleSet::Native)?;
        Ok(self.last.insert(event))
    }

    /// Validates `events` (consecutive, from the next seq on) under `rules` against the
    /// state, folding each in, then writes them to the log buffer as one atomic batch; then
    /// folds them into the token projection and the compaction locks. If one is refused, or
    /// the log refuses the batch (it is poisoned), the state is put back as it was: the
    /// handle always mirrors the log, and stays usable.
    fn write(&mut self, events: &[Event], rules: RuleSet) -> Result<()> {
        let max = self.store.inner.options.log.max_record_bytes;
        let log = &self.store.inner.log;
        let stream = self.stream;
        let past = &self.past;
        let state = &mut self.state;
        let fed = !self.views.is_empty();
        if let [event] = events {
            // The one record's kind and size, kept in place, and its payload encoded into
            // the previous one's allocation: nothing allocated per append.
            let mut size: Option<(u8, u64)> = None;
            let payload = &mut self.payload;
            // One event: checked, written, then folded; nothing to take back if the log
            // refuses it, so no savepoint (a copy of the turn tracker) per append.
            state.append_then(event, rules, past, || {
                encode_event_into(event, payload);
                check_record_len(payload.len(), max)?;
                let kind = kind_tag(event);
                let mut append = Append::new(stream, kind, payload);
                append.expected_seq = Some(LogSeq(event.seq().get() + 1));
                log.commit(std::slice::from_ref(&append), Durability::Buffered)?;
                if fed {
                    size = Some((kind, payload.len() as u64));
                }
                Ok::<_, Error>(())
            })?;
            projected::feed_all(&mut self.views, state, events, size.as_slice());
            if self.payload.capacity() > KEPT_PAYLOAD_BYTES {
                // A rare large event's allocation is not kept for the small ones after it.
                self.payload = Vec::new();
            }
            return Ok(());
        }
        let mut sizes: Vec<(u8, u64)> = Vec::new();
        state.atomically(|state| {
            let mut records: Vec<(u8, Vec<u8>)> = Vec::with_capacity(events.len());
            for (i, event) in events.iter().enumerate() {
                let before = WithPending::new(past, events.get(..i).unwrap_or_default());
                state.append(event, rules, &before)?;
                records.push((kind_tag(event), record_payload(event, max)?));
            }
            let batch: Vec<Append<'_>> = records
                .iter()
                .zip(events)
                .map(|((kind, payload), event)| {
                    let mut a = Append::new(stream, *kind, payload);
                    a.expected_seq = Some(LogSeq(event.seq().get() + 1));
                    a
                })
                .collect();
            log.commit(&batch, Durability::Buffered)?;
            if fed {
                sizes.extend(records.iter().map(|(k, p)| (*k, p.len() as u64)));
            }
            Ok::<_, Error>(())
        })?;
        projected::feed_all(&mut self.views, state, events, &sizes);
        Ok(())
    }

    /// Validates and appends `inputs` in order, then writes them to the log as one atomic
    /// batch: after a crash all of them are there or none. If one is refused (or the log
    /// fails), none of them stays in the session either, and the handle stays usable.
    pub fn append_atomic(&mut self, inputs: Vec<EventInput>) -> Result<Vec<Seq>> {
        Ok(self.append_batch(inputs)?.iter().map(Event::seq).collect())
    }

    /// [`SessionHandle::append_atomic`], returning the events appended.
    fn append_batch(&mut self, inputs: Vec<EventInput>) -> Result<Vec<Event>> {
        let first = self.state.next_seq().get();
        let format = self.state.header().format();
        let events = inputs
            .into_iter()
            .enumerate()
            .map(|(i, input)| input.into_event_for(first + i as u64, format))
            .collect::<std::result::Result<Vec<Event>, _>>()?;
        self.write(&events, RuleSet::Native)?;
        Ok(events)
    }

    /// Context pressure of the next request, from the token tally the handle's state keeps
    /// up to date with every append: O(1), whatever the session's length. Estimates are made
    /// with [`StoreOptions::token_counter`].
    pub fn pressure(&self) -> ContextPressure {
        match self.state.pressure() {
            Some(pressure) => pressure,
            // Not reached: a handle's state is always made measuring tokens.
            None => TokenProjection::new(
                self.store.inner.options.token_counter.clone(),
                self.state.version().clone(),
            )
            .pressure(),
        }
    }

    /// The maintained token figures (estimates by [`StoreOptions::token_counter`]): surface
    /// and envelope estimates, exact usage, pressure. O(1).
    pub fn token_view(&self) -> Option<TokenView> {
        self.state.token_view()
    }

    /// Token measurement of the session: the exact usage ledger, per-node estimates by
    /// `counter`, and the context pressure of the next request. When `counter` is the one
    /// the state measures with, this is the maintained projection (a copy of the state's
    /// surface and tally, O(surface)); else a fold of the session's records with `counter`.
    pub fn tokens(&self, counter: Arc<dyn TokenCounter>) -> Result<TokenProjection> {
        let maintained = self
            .state
            .token_counter()
            .is_some_and(|c| c.name() == counter.name());
        if maintained {
            if let Some(projection) = TokenProjection::from_state(&self.state) {
                return Ok(projection);
            }
        }
        self.store.tokens(&self.name, counter)
    }

    /// The session as compaction reads it ([`compaction::compact`],
    /// [`compaction::prune_tool_results`]): the state, and surface nodes read back from the
    /// log by seq.
    pub fn source(&self) -> StateAndPast<'_> {
        StateAndPast {
            state: &self.state,
            past: &self.past,
        }
    }

    /// Runs one summary compaction now (the caller decides when; see
    /// [`CompactionPolicy::should_compact`]) and writes its events as one atomic batch,
    /// durably. A failed summarizer leaves an error-ended lock and an unchanged surface.
    pub fn compact(
        &mut self,
        policy: &CompactionPolicy,
        summarizer: &mut dyn Summarizer,
        counter: Arc<dyn TokenCounter>,
        time: i64,
    ) -> Result<CompactionOutcome> {
        let projection = self.tokens(counter)?;
        let id = format!("{}-{}", self.name, self.state.next_seq().get());
        let outcome = compaction::compact(
            &self.source(),
            &projection,
            policy,
            summarizer,
            &CompactionContext::new(id, time),
        )?;
        drop(projection);
        let events = match &outcome {
            CompactionOutcome::Compacted(report) => report.events.clone(),
            CompactionOutcome::Failed { events, .. } => events.clone(),
            _ => Vec::new(),
        };
        if !events.is_empty() {
            self.append_batch(events)?;
            self.commit()?;
        }
        Ok(outcome)
    }

    /// Shortens every tool result over `options.threshold_bytes` with a single-node
    /// replacement (the originals stay in the log), as one atomic batch, durably. Returns
    /// the number of results pruned.
    pub fn prune(
        &mut self,
        options: &PruneOptions,
        counter: Arc<dyn TokenCounter>,
        time: i64,
    ) -> Result<usize> {
        let projection = self.tokens(counter)?;
        let events = compaction::prune_tool_results(&self.source(), &projection, options, time)?;
        drop(projection);
        let pruned = events.len() / 2;
        if !events.is_empty() {
            self.append_batch(events)?;
            self.commit()?;
        }
        Ok(pruned)
    }

    /// Makes every event appended so far durable. Once
    /// [`StoreOptions::cache_refresh_events`] events have been appended since the last
    /// checkpoint, writes a new one (of the records now durable; it never syncs anything
    /// itself, and a checkpoint that cannot be written is left for later).
    pub fn commit(&mut self) -> Result<()> {
        self.store.inner.log.flush()?;
        // The flush made every record of this session durable: no need to ask the log again
        // (one more turn on its lock per commit, behind every other committer).
        self.write_due_checkpoints();
        Ok(())
    }

    /// What [`commit`](Self::commit) does once the log is flushed, for a writer whose appends
    /// were made durable by [`Store::flush`]: writes the checkpoints that are due. Does
    /// nothing while an append of this session is not durable yet (it never syncs), so the
    /// checkpoint stays due for a later call.
    pub fn refresh_checkpoints(&mut self) {
        if !self.store.inner.log.is_stream_durable(self.stream) {
            return;
        }
        self.write_due_checkpoints();
    }

    /// Writes the checkpoints that are due, once every append of this session is durable.
    fn write_due_checkpoints(&mut self) {
        let next = self.state.next_seq().get();
        let refresh = self.store.inner.options.cache_refresh_events;
        let (store, stream) = (&self.store, self.stream);
        // Every checkpoint of this commit covers every record: one header, found for the
        // first that is due, serves them all (finding it reads the last record back).
        let mut found = None;
        let mut header =
            || *found.get_or_insert_with(|| store.durable_cache_header(stream, next + 1));
        if next.saturating_sub(self.checkpointed) >= refresh {
            store.write_checkpoint(stream, &self.state, header());
            self.checkpointed = next;
        }
        for slot in &mut self.views {
            if slot.due(refresh) {
                store.write_projection(stream, slot, header());
            }
        }
    }

    /// Checkpoints the projections whose checkpoints lag by
    /// [`StoreOptions::cache_refresh_events`] or more, when every append of this session is
    /// durable (it never syncs). A projection whose checkpoint grows with the session may be
    /// rewritten only after a growing share of new events
    /// ([`Projection::checkpoint_every`]), so a writer
    /// going away could leave it far behind, and every later read would fold what it lags
    /// by.
    fn checkpoint_lagging_projections(&mut self) {
        if self.views.is_empty() || !self.store.inner.log.is_stream_durable(self.stream) {
            return;
        }
        let refresh = self.store.inner.options.cache_refresh_events;
        for slot in &mut self.views {
            if slot.events.saturating_sub(slot.checkpointed) >= refresh {
                self.store.write_projection(self.stream, slot, None);
            }
        }
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.checkpoint_lagging_projections();
        self.store.inner.writers.lock().remove(&self.stream);
    }
}

/// The log payload of `event`, refused when it exceeds the log's record limit `max`.
fn record_payload(event: &Event, max: usize) -> Result<Vec<u8>> {
    let payload = encode_event(event);
    check_record_len(payload.len(), max)?;
    Ok(payload)
}

/// Refuses a record payload of `len` bytes when it exceeds the log's record limit `max`.
fn check_record_len(len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(sessionlog_log::Error::RecordTooLarge { len, max }.into());
    }
    Ok(())
}

/// The input that re-creates a built event (used to write restart closers through the same
/// atomic path as every other batch).
fn event_input(event: Event) -> EventInput {
    let data = event.stored_data().raw().to_owned();
    let mut input = EventInput::new(event.stored_type(), event.time(), data);
    input.surface_op = event.surface_op();
    input.source_event_seqs = event.source_event_seqs().map(<[Seq]>::to_vec);
    input.ignorable = event.is_ignorable();
    input.seq = Some(event.seq());
    input
}

/// Where an export's event lines go: straight out, or into one zstd frame.
enum DshSink<'a> {
    Plain(&'a mut dyn std::io::Write),
    Frame(zstd_file::StreamFrame<&'a mut dyn std::io::Write>),
}

impl DshSink<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            DshSink::Plain(out) => out.write_all(bytes),
            DshSink::Frame(frame) => frame.write_all(bytes),
        }
        .map_err(Error::Output)
    }

    fn finish(self) -> Result<()> {
        match self {
            DshSink::Plain(_) => Ok(()),
            DshSink::Frame(frame) => frame.finish().map(drop).map_err(Error::Output),
        }
    }
}
