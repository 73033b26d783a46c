//! Consumer projections: named, versioned folds over a session's stored events that the store
//! keeps checkpointed beside the session's own state. spec: format-spec/cache.md#projections
//!
//! A consumer implements [`Projection`] (init, apply one event, encode and decode its state)
//! and registers it in [`StoreOptions::with_projection`](crate::StoreOptions::with_projection).
//! Every writer of a session then folds each appended event into each registered projection,
//! and writes the projection's checkpoint where it writes the session's; and
//! [`Store::projection`](crate::Store::projection) hands back the state folded over every
//! event of a session, from the checkpoint plus the events after its watermark.
//!
//! A fold reads; it never writes the log (it is handed shared references only). A fold that
//! fails or panics fails its own projection only: the error names the projection and the
//! event, the append that fed it stands, and the session's state and the other projections
//! go on. Projection checkpoints follow the cache's rules: disposable, used only when they
//! prove they match the log, rebuilt from it otherwise.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

pub use ::bytes::Bytes;
use sessionlog_session::json::JsonRef;
use sessionlog_session::{Event, FormatVersion, SessionHeader};

pub mod stats;
pub mod store_wide;
pub mod tool_audit;
pub mod totals;
pub mod transcript;

pub use stats::{SessionStats, Stats, TypeCounts};
pub use store_wide::{StoreProjected, StoreProjection};
pub use tool_audit::{ToolAudit, ToolCallRecord, ToolCalls};
pub use totals::{SessionTotals, StoreTotals, Totals};
pub use transcript::{SessionTranscript, Transcript};

/// One stored event as a projection sees it: the record's kind tag (so a fold can skip by
/// kind without reading the payload), the record's size, and the event, whose typed view is
/// [`Event::view`].
#[derive(Debug, Clone, Copy)]
pub struct StoredEvent<'a> {
    /// The record's kind tag ([`sessionlog_session::codec::kind`]).
    pub kind: u8,
    /// Bytes of the record's payload in the log.
    pub record_bytes: u64,
    /// The event (older shapes upgraded as loading upgrades them).
    pub event: &'a Event,
    /// The rules the session is read under (its surface types and message locations, for
    /// [`sessionlog_session::derive_message`]).
    pub version: &'a FormatVersion,
    /// The estimate the writer's session state made of the message the event derives, when
    /// the event reaches the projection as it is appended (so a fold that estimates with the
    /// same counter need not do it again); `None` when the event is folded from the log.
    pub message_estimate: Option<MessageEstimate<'a>>,
    /// The exact provider usage the writer's session state read from the event's `usage`
    /// member (with [`sessionlog_session::tokens::Usage::read`]), when the event reaches the
    /// projection as it is appended and the state read one (so a fold that reads usage the
    /// same way need not read it again); `None` when the event is folded from the log, or
    /// has no usage that reader reads.
    pub usage: Option<&'a sessionlog_session::tokens::Usage>,
    /// What [`sessionlog_session::derive_message_content`] says of the event (the message
    /// it derives and that message's `content`, or `Some(None)` when it derives none), when
    /// the writer's session state found that as it folded the event just before handing it
    /// over (so a fold that reads the message need not look for it again); `None` when
    /// the event is folded from the log, is no surface event, or was not the last of its
    /// batch. Handed to every fold: it depends on no counter.
    pub message: Option<Option<(&'a str, Option<JsonRef<'a>>)>>,
}

/// An estimate of the tokens of the message an event derives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageEstimate<'a> {
    /// The counter that made it ([`sessionlog_session::tokens::TokenCounter::name`]).
    pub counter: &'a str,
    /// Its tokens, the counter's per-message overhead included; 0 when the event derives
    /// no message.
    pub tokens: u32,
}

/// A run of events a projection tallies ([`Projection::tallies`]): events of one type and
/// record kind, with no event the projection applied between them, seen only as their
/// count, their record bytes, and the seqs and times of the first and the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally<'a> {
    /// The events' type (as [`Event::event_type`] names it).
    pub event_type: &'a str,
    /// Their record kind tag.
    pub kind: u8,
    /// How many there are (at least one).
    pub events: u64,
    /// Their record payload bytes, summed.
    pub record_bytes: u64,
    /// The seq of the first.
    pub first_seq: u64,
    /// The seq of the last.
    pub last_seq: u64,
    /// The time of the first (ms, as written).
    pub first_time: i64,
    /// The time of the last (ms, as written).
    pub last_time: i64,
}

/// Why a projection could not be folded, decoded or handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectionError {
    /// The fold refused an event.
    #[error("event {seq} ({event_type}): {detail}")]
    Refused {
        /// The event's seq.
        seq: u64,
        /// Its type.
        event_type: String,
        /// What the fold said.
        detail: String,
    },
    /// Consumer code panicked.
    #[error("{during} panicked: {message}")]
    Panicked {
        /// What the store was doing (`apply`, `init`, `encode`, `decode`).
        during: &'static str,
        /// The panic's message, when it was a string.
        message: String,
    },
    /// A checkpoint's bytes do not decode.
    #[error("its checkpoint does not decode: {0}")]
    Undecodable(String),
}

impl ProjectionError {
    /// A fold's refusal of `event`, saying why.
    pub fn refused(event: &Event, detail: impl Into<String>) -> ProjectionError {
        ProjectionError::Refused {
            seq: event.seq().get(),
            event_type: event.event_type().to_owned(),
            detail: detail.into(),
        }
    }
}

/// A named, versioned fold over a session's stored events, in seq order.
///
/// The state after events `0..n` must depend only on those events: the store checkpoints it,
/// and a checkpoint decoded and folded over the events after it must equal a fold of all
/// of them (`decode(encode(s)) == s`). Bump [`Projection::version`] whenever the encoding or
/// the meaning of the fold changes: checkpoints of another version are rebuilt, never misread.
pub trait Projection: Send + Sync + 'static {
    /// What the fold keeps.
    type State: Send + 'static;

    /// The name the projection is registered, asked for and checkpointed under: 1 to 64
    /// characters of `a-z`, `0-9` and `-`, unique in a store.
    fn name(&self) -> &str;

    /// The version of the fold and of its encoding.
    fn version(&self) -> u32;

    /// Whether events of record kind `kind` reach [`Projection::apply`]; others are skipped
    /// without their payload being decoded. A function of the kind: the store asks once
    /// per kind when it sets a projection up, and keeps the answers. Everything, by
    /// default.
    fn wants(&self, kind: u8) -> bool {
        let _ = kind;
        true
    }

    /// Whether events of record kind `kind`, of the kinds [`Projection::wants`], are only
    /// counted: handed to [`Projection::tally`] in runs, each event seen as its type, seq,
    /// time and record bytes, instead of one by one to [`Projection::apply`]. A writer then
    /// adds such an event to the run it keeps (no typed event is made for the fold, no
    /// figure looked up), and hands the run over before the next event it applies, before
    /// the state is checkpointed or handed out, and when the type changes. An event that
    /// carries a surface operation (`surfaceOp`) is applied whatever its kind. A function
    /// of the kind, asked once per kind as [`Projection::wants`] is. None by default.
    fn tallies(&self, kind: u8) -> bool {
        let _ = kind;
        false
    }

    /// Folds in a run of events of a kind the projection [`Projection::tallies`]. The state
    /// after a run must be what folding it in pieces gives: the store splits runs where
    /// it checkpoints, and reads fold them from the log in runs of their own. Does nothing
    /// by default.
    fn tally(&self, state: &mut Self::State, tally: &Tally<'_>) -> Result<(), ProjectionError> {
        let _ = (state, tally);
        Ok(())
    }

    /// Whether the fold reads [`StoredEvent::message_estimate`] or [`StoredEvent::usage`]. A
    /// writer looks both up for each event it hands over only when a projection it keeps
    /// reads them; for one that says it does not, both are `None`, as when the event is
    /// folded from the log. Yes by default.
    fn reads_estimates(&self) -> bool {
        true
    }

    /// Tells the fold that the session now holds `events` events, the ones after the last
    /// event it was handed having been skipped by [`Projection::wants`]. The store calls it
    /// before the state is checkpointed or handed out, when events were skipped since the
    /// last one folded, so that a fold keeping something of the events it skips (how many
    /// there are, where a run of them ends) need not be handed each of them. Does nothing by
    /// default.
    fn skipped(&self, state: &mut Self::State, events: u64) {
        let _ = (state, events);
    }

    /// How many events a writer folds past this projection's checkpoint before it writes a
    /// new one (and how many a read may fold before it does), given the state, the store's
    /// `cache_refresh_events` and the events the state covers. The default is the store's
    /// setting; a projection whose checkpoint grows with the session returns more as the
    /// checkpoint grows, so that rewriting it stays a bounded share of appending (and no
    /// more than it must: a read folds up to this many events past the checkpoint).
    fn checkpoint_every(&self, state: &Self::State, refresh_events: u64, events: u64) -> u64 {
        let _ = (state, events);
        refresh_events
    }

    /// The state of a session with no event yet.
    fn init(&self, header: &SessionHeader) -> Self::State;

    /// Folds one event in. An error fails this projection of this session.
    fn apply(
        &self,
        state: &mut Self::State,
        event: &StoredEvent<'_>,
    ) -> Result<(), ProjectionError>;

    /// Appends the state's checkpoint bytes to `out`.
    fn encode(&self, state: &Self::State, out: &mut Vec<u8>);

    /// [`Projection::encode`] as pieces, which the store writes one after another: their
    /// bytes in order must be what `encode` appends. A state whose checkpoint is mostly
    /// buffers it keeps (a long transcript's text) hands those over borrowed, so that
    /// writing a checkpoint does not copy them into one buffer first. One piece, what
    /// `encode` appends, by default.
    fn encode_pieces<'s>(&self, state: &'s Self::State, pieces: &mut Vec<Cow<'s, [u8]>>) {
        let mut out = Vec::new();
        self.encode(state, &mut out);
        pieces.push(Cow::Owned(out));
    }

    /// Decodes a checkpoint written by [`Projection::encode`] of this version. Must refuse,
    /// never panic on, bytes it did not write.
    fn decode(&self, bytes: &[u8]) -> Result<Self::State, ProjectionError>;

    /// [`Projection::decode`] of bytes the state may keep: the store hands a checkpoint over
    /// this way (mapped from its file when large), so a projection whose checkpoint is
    /// large can read it in place, lazily, instead of copying it into its state. Decodes
    /// the bytes by default.
    fn decode_shared(&self, bytes: Bytes) -> Result<Self::State, ProjectionError> {
        self.decode(&bytes)
    }

    /// How many *appended parts* the checkpoint has: byte strings that only grow at their
    /// end as the fold goes on (a transcript's text and rows). The store keeps each in a
    /// file of its own, which a writer extends by what was added since its last checkpoint
    /// instead of rewriting, and checkpoints the rest ([`Projection::encode_pieces`]) in the
    /// projection's file, which names how much of each part it covers. None by default.
    /// spec: format-spec/cache.md#appended-parts
    fn appended_parts(&self) -> usize {
        0
    }

    /// Pushes the state's appended parts, [`Projection::appended_parts`] of them, each as
    /// pieces whose bytes in order are the part. Between two calls on the same state, each
    /// part's bytes must begin with the bytes the earlier call gave: what was handed over
    /// once is never changed.
    fn appended<'s>(&self, state: &'s Self::State, parts: &mut Vec<Vec<&'s [u8]>>) {
        let _ = (state, parts);
    }

    /// Decodes a checkpoint of a projection with appended parts: `rest` is what
    /// [`Projection::encode_pieces`] wrote, `parts` the appended parts as far as the
    /// checkpoint covers them. The state may keep the bytes. Must refuse, never panic on,
    /// bytes it did not write.
    fn decode_appended(
        &self,
        rest: Bytes,
        parts: Vec<Bytes>,
    ) -> Result<Self::State, ProjectionError> {
        let _ = (rest, parts);
        Err(ProjectionError::Undecodable(
            "this projection has no appended parts".into(),
        ))
    }
}

/// [`Projection::checkpoint_every`] for a projection whose whole checkpoint grows with the
/// session (it keeps something of every call or row): a new checkpoint after a sixteenth
/// more events at the earliest, which bounds the bytes rewritten over a session's life to
/// about seventeen times its final checkpoint, instead of growing with the square of its
/// length.
pub(crate) fn growing_checkpoint_every(refresh_events: u64, events: u64) -> u64 {
    refresh_events.max(events / 16)
}

/// Events a projection with appended parts folds past its checkpoint at most, while what it
/// rewrites is small: at a whole-log fold rate of about 0.3 µs per event, about 5 ms for a
/// read to fold, and a rewrite of what is not appended at most every this many events.
pub(crate) const APPENDED_CHECKPOINT_EVERY: u64 = 16_384;

/// Bytes of its rewritten rest a projection with appended parts may write per event
/// appended ([`appended_checkpoint_every`]): a few percent of the bytes an event takes in
/// the log.
pub(crate) const REWRITTEN_BYTES_PER_EVENT: u64 = 8;

/// [`Projection::checkpoint_every`] for a projection whose checkpoint is mostly appended
/// parts, and whose rest (rewritten at each checkpoint) is `rest_bytes` long: every
/// [`APPENDED_CHECKPOINT_EVERY`] events while the rest is small, as rarely as its
/// rewriting costs [`REWRITTEN_BYTES_PER_EVENT`] when it is large, never more rarely than
/// [`growing_checkpoint_every`]. The appended parts are written once whatever the interval,
/// so the interval is what bounds the fold of a read against the rest's rewriting.
pub(crate) fn appended_checkpoint_every(refresh_events: u64, events: u64, rest_bytes: u64) -> u64 {
    let by_rest = APPENDED_CHECKPOINT_EVERY.max(rest_bytes / REWRITTEN_BYTES_PER_EVENT);
    by_rest
        .min(growing_checkpoint_every(refresh_events, events))
        .max(refresh_events)
}

/// [`Projection::encode`] of a projection with appended parts: the whole checkpoint in one
/// buffer, each appended part after its length (8 bytes), in order, then the rest.
/// spec: format-spec/cache.md#appended-parts
pub(crate) fn encode_with_parts<P: Projection>(p: &P, state: &P::State, out: &mut Vec<u8>) {
    let mut parts = Vec::with_capacity(p.appended_parts());
    p.appended(state, &mut parts);
    for part in parts {
        bytes::put_u64(out, part.iter().map(|piece| piece.len() as u64).sum());
        for piece in part {
            out.extend_from_slice(piece);
        }
    }
    let mut rest = Vec::new();
    p.encode_pieces(state, &mut rest);
    for piece in rest {
        out.extend_from_slice(&piece);
    }
}

/// [`Projection::decode_shared`] of what [`encode_with_parts`] wrote: the parts and the rest
/// handed to [`Projection::decode_appended`] as slices of `buffer`.
pub(crate) fn decode_with_parts<P: Projection>(
    p: &P,
    buffer: Bytes,
) -> Result<P::State, ProjectionError> {
    let mut r = bytes::Reader::new(&buffer);
    let mut parts = Vec::with_capacity(p.appended_parts());
    for _ in 0..p.appended_parts() {
        let len = r.count(1)?;
        parts.push(buffer.slice_ref(r.take(len)?));
    }
    let rest = buffer.slice_ref(r.rest());
    p.decode_appended(rest, parts)
}

/// A projection state without its type, as the store keeps it.
pub(crate) type AnyState = Box<dyn Any + Send>;

/// [`Projection`] with its state type erased, every call into consumer code guarded.
pub(crate) trait Registered: Send + Sync {
    /// The projection itself, for a typed caller to find its own type again.
    fn as_any(&self) -> &dyn Any;
    fn name(&self) -> &str;
    fn version(&self) -> u32;
    fn wants(&self, kind: u8) -> bool;
    fn tallies(&self, kind: u8) -> bool;
    fn reads_estimates(&self) -> bool;
    fn checkpoint_every(&self, state: &AnyState, refresh_events: u64, events: u64) -> u64;
    fn init(&self, header: &SessionHeader) -> Result<AnyState, ProjectionError>;
    fn apply(&self, state: &mut AnyState, event: &StoredEvent<'_>) -> Result<(), ProjectionError>;
    fn tally(&self, state: &mut AnyState, tally: &Tally<'_>) -> Result<(), ProjectionError>;
    fn skipped(&self, state: &mut AnyState, events: u64) -> Result<(), ProjectionError>;
    fn encode(&self, state: &AnyState) -> Result<Vec<u8>, ProjectionError> {
        let mut out = Vec::new();
        self.encode_into(state, &mut out)?;
        Ok(out)
    }
    fn encode_into(&self, state: &AnyState, out: &mut Vec<u8>) -> Result<(), ProjectionError>;
    fn encode_pieces<'s>(
        &self,
        state: &'s AnyState,
        pieces: &mut Vec<Cow<'s, [u8]>>,
    ) -> Result<(), ProjectionError>;
    fn decode(&self, bytes: &[u8]) -> Result<AnyState, ProjectionError>;
    fn decode_shared(&self, bytes: Bytes) -> Result<AnyState, ProjectionError>;
    fn appended_parts(&self) -> usize;
    fn appended<'s>(
        &self,
        state: &'s AnyState,
        parts: &mut Vec<Vec<&'s [u8]>>,
    ) -> Result<(), ProjectionError>;
    fn decode_appended(&self, rest: Bytes, parts: Vec<Bytes>) -> Result<AnyState, ProjectionError>;
}

/// Runs consumer code, turning a panic into [`ProjectionError::Panicked`].
#[inline]
pub(crate) fn guarded<T>(
    during: &'static str,
    f: impl FnOnce() -> Result<T, ProjectionError>,
) -> Result<T, ProjectionError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".to_owned());
            Err(ProjectionError::Panicked { during, message })
        }
    }
}

/// The state inside `state`, which the store made with this projection.
fn typed<P: Projection>(state: &AnyState) -> Result<&P::State, ProjectionError> {
    state
        .downcast_ref::<P::State>()
        .ok_or_else(|| ProjectionError::Undecodable("a state of another type".into()))
}

/// [`typed`], mutably.
fn typed_mut<P: Projection>(state: &mut AnyState) -> Result<&mut P::State, ProjectionError> {
    state
        .downcast_mut::<P::State>()
        .ok_or_else(|| ProjectionError::Undecodable("a state of another type".into()))
}

impl<P: Projection> Registered for P {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        Projection::name(self)
    }

    fn version(&self) -> u32 {
        Projection::version(self)
    }

    fn wants(&self, kind: u8) -> bool {
        guarded("wants", || Ok(Projection::wants(self, kind))).unwrap_or(true)
    }

    fn tallies(&self, kind: u8) -> bool {
        guarded("tallies", || Ok(Projection::tallies(self, kind))).unwrap_or(false)
    }

    fn reads_estimates(&self) -> bool {
        guarded("reads_estimates", || Ok(Projection::reads_estimates(self))).unwrap_or(true)
    }

    fn checkpoint_every(&self, state: &AnyState, refresh_events: u64, events: u64) -> u64 {
        guarded("checkpoint_every", || {
            let state = typed::<P>(state)?;
            Ok(Projection::checkpoint_every(
                self,
                state,
                refresh_events,
                events,
            ))
        })
        .unwrap_or(refresh_events)
    }

    fn init(&self, header: &SessionHeader) -> Result<AnyState, ProjectionError> {
        guarded("init", || {
            Ok(Box::new(Projection::init(self, header)) as AnyState)
        })
    }

    fn apply(&self, state: &mut AnyState, event: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let state = typed_mut::<P>(state)?;
        guarded("apply", || Projection::apply(self, state, event))
    }

    fn tally(&self, state: &mut AnyState, tally: &Tally<'_>) -> Result<(), ProjectionError> {
        let state = typed_mut::<P>(state)?;
        guarded("tally", || Projection::tally(self, state, tally))
    }

    fn skipped(&self, state: &mut AnyState, events: u64) -> Result<(), ProjectionError> {
        let state = typed_mut::<P>(state)?;
        guarded("skipped", || {
            Projection::skipped(self, state, events);
            Ok(())
        })
    }

    fn encode_into(&self, state: &AnyState, out: &mut Vec<u8>) -> Result<(), ProjectionError> {
        let state = typed::<P>(state)?;
        guarded("encode", || {
            Projection::encode(self, state, out);
            Ok(())
        })
    }

    fn encode_pieces<'s>(
        &self,
        state: &'s AnyState,
        pieces: &mut Vec<Cow<'s, [u8]>>,
    ) -> Result<(), ProjectionError> {
        let state = typed::<P>(state)?;
        guarded("encode", || {
            Projection::encode_pieces(self, state, pieces);
            Ok(())
        })
    }

    fn decode(&self, bytes: &[u8]) -> Result<AnyState, ProjectionError> {
        guarded("decode", || {
            Projection::decode(self, bytes).map(|s| Box::new(s) as AnyState)
        })
    }

    fn decode_shared(&self, bytes: Bytes) -> Result<AnyState, ProjectionError> {
        guarded("decode", || {
            Projection::decode_shared(self, bytes).map(|s| Box::new(s) as AnyState)
        })
    }

    fn appended_parts(&self) -> usize {
        guarded("appended_parts", || Ok(Projection::appended_parts(self))).unwrap_or(0)
    }

    fn appended<'s>(
        &self,
        state: &'s AnyState,
        parts: &mut Vec<Vec<&'s [u8]>>,
    ) -> Result<(), ProjectionError> {
        let state = typed::<P>(state)?;
        guarded("encode", || {
            Projection::appended(self, state, parts);
            Ok(())
        })
    }

    fn decode_appended(&self, rest: Bytes, parts: Vec<Bytes>) -> Result<AnyState, ProjectionError> {
        guarded("decode", || {
            Projection::decode_appended(self, rest, parts).map(|s| Box::new(s) as AnyState)
        })
    }
}

/// The projections a store keeps, in registration order.
#[derive(Clone, Default)]
pub struct Projections(pub(crate) Vec<Arc<dyn Registered>>);

impl fmt::Debug for Projections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|p| (p.name().to_owned(), p.version())))
            .finish()
    }
}

impl Projections {
    /// Adds `projection`.
    pub(crate) fn push(&mut self, projection: impl Projection) {
        self.0.push(Arc::new(projection));
    }

    /// The registered projection named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Registered>> {
        self.0.iter().find(|p| p.name() == name)
    }

    /// Names of the registered projections, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.name()).collect()
    }

    /// Refuses a name that is not a valid file name part, or registered twice.
    pub(crate) fn check(&self) -> Result<(), String> {
        for (i, p) in self.0.iter().enumerate() {
            let name = p.name();
            let valid = (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !valid {
                return Err(format!(
                    "projection name {name:?} must be 1 to 64 characters of a-z, 0-9 and -"
                ));
            }
            if self.0.iter().skip(i + 1).any(|q| q.name() == name) {
                return Err(format!("projection {name:?} is registered twice"));
            }
        }
        Ok(())
    }
}

/// A projection of one session as [`Store::projection`](crate::Store::projection) hands it
/// back: the state folded over every event, and how it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projected<S> {
    /// The state.
    pub state: S,
    /// Events folded into it (the session's event count).
    pub events: u64,
    /// From the projection's checkpoint plus this many events, or from the whole log.
    pub cache: crate::CacheUse,
}

/// Maps and sets of event seqs, as projection states keep them (see
/// [`sessionlog_session::seq_hash`]).
pub(crate) use sessionlog_session::seq_hash::{SeqMap, SeqSet};

/// Little-endian encoding helpers for projection states.
pub mod bytes {
    use super::ProjectionError;

    /// Appends `v`.
    pub fn put_u64(out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends `s` as 8 bytes of length and its UTF-8 bytes.
    pub fn put_str(out: &mut Vec<u8>, s: &str) {
        put_u64(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    /// A bounds-checked reader of what the `put_` functions wrote.
    #[derive(Debug)]
    pub struct Reader<'a>(&'a [u8]);

    impl<'a> Reader<'a> {
        /// Reads `bytes` from the start.
        pub fn new(bytes: &'a [u8]) -> Reader<'a> {
            Reader(bytes)
        }

        fn short() -> ProjectionError {
            ProjectionError::Undecodable("the bytes end early".into())
        }

        /// The next `n` bytes.
        pub fn take(&mut self, n: usize) -> Result<&'a [u8], ProjectionError> {
            if self.0.len() < n {
                return Err(Self::short());
            }
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Ok(head)
        }

        /// The next u64.
        pub fn u64(&mut self) -> Result<u64, ProjectionError> {
            let mut b = [0u8; 8];
            b.copy_from_slice(self.take(8)?);
            Ok(u64::from_le_bytes(b))
        }

        /// The next byte.
        pub fn u8(&mut self) -> Result<u8, ProjectionError> {
            Ok(self.take(1)?.first().copied().unwrap_or_default())
        }

        /// A count of items of at least `min_item_bytes` each, refused when the bytes left
        /// could not hold that many (so a damaged count never allocates).
        pub fn count(&mut self, min_item_bytes: usize) -> Result<usize, ProjectionError> {
            let n = self.u64()?;
            let fits = usize::try_from(n)
                .ok()
                .filter(|&n| n.saturating_mul(min_item_bytes.max(1)) <= self.0.len());
            fits.ok_or_else(|| ProjectionError::Undecodable(format!("count {n} is too large")))
        }

        /// The next string written by [`put_str`].
        pub fn str(&mut self) -> Result<String, ProjectionError> {
            let bytes = self.str_bytes()?;
            String::from_utf8(bytes.to_vec())
                .map_err(|_| ProjectionError::Undecodable("text that is not UTF-8".into()))
        }

        /// The bytes of the next string written by [`put_str`], not checked to be UTF-8.
        pub fn str_bytes(&mut self) -> Result<&'a [u8], ProjectionError> {
            let len = self.count(1)?;
            self.take(len)
        }

        /// The bytes not read yet.
        pub fn rest(&self) -> &'a [u8] {
            self.0
        }

        /// Refuses bytes left over.
        pub fn finish(self) -> Result<(), ProjectionError> {
            if self.0.is_empty() {
                Ok(())
            } else {
                Err(ProjectionError::Undecodable(format!(
                    "{} bytes after the state",
                    self.0.len()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{appended_checkpoint_every, growing_checkpoint_every, APPENDED_CHECKPOINT_EVERY};

    #[test]
    fn an_appended_checkpoint_is_rewritten_as_often_as_its_rest_allows() {
        let refresh = 1024;
        // A short session: the store's interval, as any projection.
        assert_eq!(appended_checkpoint_every(refresh, 10_000, 100), refresh);
        // Growing as a sixteenth of the session, up to the fixed bound while the rest is small.
        assert_eq!(appended_checkpoint_every(refresh, 160_000, 100), 10_000);
        for events in [1_000_000, 10_000_000, 1 << 40] {
            assert_eq!(
                appended_checkpoint_every(refresh, events, 4096),
                APPENDED_CHECKPOINT_EVERY
            );
            // A large rest is rewritten less often, but never more rarely than a growing
            // checkpoint.
            let big = appended_checkpoint_every(refresh, events, 1 << 20);
            assert_eq!(
                big,
                ((1 << 20) / super::REWRITTEN_BYTES_PER_EVENT).min(events / 16)
            );
            assert!(big > APPENDED_CHECKPOINT_EVERY);
            assert_eq!(
                appended_checkpoint_every(refresh, events, u64::MAX),
                growing_checkpoint_every(refresh, events)
            );
        }
        // A store whose interval is longer keeps it.
        assert_eq!(appended_checkpoint_every(1 << 30, 1 << 32, 0), 1 << 30);
    }
}
