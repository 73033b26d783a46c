//! The session state machine: everything the rules and projections need to know about a
//! session, without its events.
//!
//! [`SessionState`] holds the surface with its replacements, the turn and step tracker with
//! the open tool calls, and what the restart rules need of the last event. Every append is
//! split into a read-only check that plans the change and an apply that cannot fail, so a
//! refused event leaves the state exactly as it was; [`SessionState::atomically`] extends that to batches.
//! The few rules that look at an earlier event (a tool-result replacement compares itself
//! with the result it shadows) read it through [`LookBack`], so the state can be kept for a
//! session whose events are not in memory. [`Session`](crate::Session) is this state plus
//! the events.
//!
//! The state also holds what a reader needs to rebuild a view from the log without a
//! second fold: which surface nodes contribute a derived message
//! ([`SessionState::message_nodes`]; the text itself is read from the log by seq), the
//! seqs of the latest `request/header` and `request/context`, and, when built with
//! [`SessionState::with_tokens`], the token measurement (per-node estimates, usage ledger,
//! context pressure) that a [`TokenProjection`](crate::tokens::TokenProjection) would fold.

use std::borrow::Cow;
use std::sync::Arc;

use crate::build::Position;
use crate::compaction::CompactionLocks;
use crate::error::{Error, Rule};
use crate::event::{Event, Seq, SurfaceOp};
use crate::header::SessionHeader;
use crate::json::JsonRef;
use crate::repair::TurnTracker;
use crate::session::derived_message_ref;
use crate::surface::{NodeFacts, RangeError, ShadowedLinks, Surface};
use crate::tokens::projection::{estimate_nodes, TallyMark, TokenTally};
use crate::tokens::{ContextPressure, TokenCounter, TokenView, UsageLedger};
use crate::upgrade::upgrade_event;
use crate::validate::{self, RuleSet};
use crate::version::DshFormat;
use crate::version::FormatVersion;

/// Reads earlier events of a session by seq, for the rules that look back.
pub trait LookBack {
    /// The event with `seq`, or `None` when the session has no such event. A store that
    /// reads it from disk reports a failed read as an error.
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error>;
}

impl LookBack for &[Event] {
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        Ok(usize::try_from(seq.get())
            .ok()
            .and_then(|i| (*self).get(i))
            .map(Cow::Borrowed))
    }
}

/// What an accepted event does to the surface.
pub(crate) enum SurfacePlan {
    None,
    Append,
    Replace(Vec<u64>),
}

/// How to take back one applied event's surface change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SurfaceUndo {
    None,
    Append(u64),
    Replace(u64, ShadowedLinks),
}

/// What `session/end-seed` and restart closers need of the newest event: whether it is an
/// end-seed, and its time. Kept without the type's text, so folding an event allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastEvent {
    pub(crate) end_seed: bool,
    pub(crate) time: i64,
}

/// The seqs of the newest `request/header` and `request/context`: the envelope and tool
/// schemas of the next provider request, and its context window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestSeqs {
    pub(crate) header: Option<u64>,
    pub(crate) context: Option<u64>,
}

/// Where an open [`SessionState::atomically`] started: enough to put the state back without
/// having copied it. The turn tracker is small (open turn and step, calls of the open
/// step), so it is saved whole, as are the open compaction locks (rarely more than one); the surface is journaled per event; the token tally is
/// saved as its scalars and the usage ledger's length.
#[derive(Debug)]
pub(crate) struct Savepoint {
    next_seq: u64,
    last: Option<LastEvent>,
    tracker: TurnTracker,
    requests: RequestSeqs,
    tokens: Option<TallyMark>,
    locks: CompactionLocks,
    journal_len: usize,
    outermost: bool,
}

/// The state of one session: header, format version, surface (with message presence and
/// token estimates per node), turn state, request seqs, token tally, open compaction locks,
/// next seq.
#[derive(Debug, Clone)]
pub struct SessionState {
    pub(crate) header: SessionHeader,
    pub(crate) version: Arc<FormatVersion>,
    pub(crate) next_seq: u64,
    pub(crate) last: Option<LastEvent>,
    pub(crate) surface: Surface,
    pub(crate) tracker: TurnTracker,
    pub(crate) requests: RequestSeqs,
    pub(crate) tokens: Option<TokenTally>,
    /// The compactions started and not ended yet, which restart repair closes.
    pub(crate) locks: CompactionLocks,
    /// Surface undo steps; recorded only inside [`SessionState::atomically`].
    journal: Option<Vec<SurfaceUndo>>,
    /// Where the message of the surface event folded last lies in it, for
    /// [`SessionState::folded_message`]. Not content: equal states may differ in it.
    folded: Option<FoldedMessage>,
}

/// The message (and its `content`) that the surface event folded last derives, as byte
/// ranges of that event's envelope; the event is known by its seq and the address and
/// length of its envelope, so no other event (not even an equal copy) is answered from it.
#[derive(Debug, Clone, Copy)]
struct FoldedMessage {
    seq: u64,
    raw: (usize, usize),
    message: Option<(Span, Option<Span>)>,
}

type Span = (usize, usize);

/// The byte range of `part` in `whole`, which it lies in.
fn span_in(whole: &str, part: &str) -> Option<Span> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some((start, end))
}

impl PartialEq for SessionState {
    /// States are equal when their contents are; an open undo journal is not content.
    fn eq(&self, other: &SessionState) -> bool {
        self.header == other.header
            && self.version == other.version
            && self.next_seq == other.next_seq
            && self.last == other.last
            && self.surface == other.surface
            && self.tracker == other.tracker
            && self.requests == other.requests
            && self.tokens == other.tokens
            && self.locks == other.locks
    }
}

impl Eq for SessionState {}

impl SessionState {
    /// The state of an empty session.
    pub fn new(header: SessionHeader, version: FormatVersion) -> SessionState {
        // A session declaring DSH format V1 or later (an imported `vN` file) is read with
        // that format's rules, whatever the caller's default; V0 is the caller's choice.
        let version = match header.format() {
            DshFormat::V0 => version,
            _ => FormatVersion::for_header(&version, &header),
        };
        SessionState {
            header,
            version: Arc::new(version),
            next_seq: 0,
            last: None,
            surface: Surface::default(),
            tracker: TurnTracker::default(),
            requests: RequestSeqs::default(),
            tokens: None,
            locks: CompactionLocks::new(),
            journal: None,
            folded: None,
        }
    }

    /// The state of an empty session that also measures tokens with `counter`: per-node
    /// estimates, the usage ledger and context pressure are maintained as events fold, so
    /// [`SessionState::pressure`] costs O(1).
    pub fn with_tokens(
        header: SessionHeader,
        version: FormatVersion,
        counter: Arc<dyn TokenCounter>,
    ) -> SessionState {
        let mut state = SessionState::new(header, version);
        state.tokens = Some(TokenTally::bounded(counter));
        state
    }

    /// Validates `event` (its seq must be the next one) under `rules` and folds it in. A
    /// refused event changes nothing.
    pub fn append(
        &mut self,
        event: &Event,
        rules: RuleSet,
        past: &dyn LookBack,
    ) -> Result<(), Error> {
        self.append_then(event, rules, past, || Ok::<(), Error>(()))
    }

    /// [`SessionState::append`] with `write` run between the checks and the fold: `event` is
    /// folded in only if `write` succeeds (a store writes it to its log there), so a failed
    /// write, like a refused event, leaves the state exactly as it was, without the undo
    /// journal an [`atomically`](SessionState::atomically) around both would keep.
    pub fn append_then<E: From<Error>>(
        &mut self,
        event: &Event,
        rules: RuleSet,
        past: &dyn LookBack,
        write: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        self.check_vocabulary(event)?;
        self.check_declared_format(event)?;
        let plan = self.check(event, rules, past)?;
        write()?;
        self.apply(event, plan);
        Ok(())
    }

    /// Folds in a stored event as loading does: its legacy shape is upgraded in place (looking
    /// back through `past` at the upgraded events before it), then it is checked under the
    /// rules a DSH log is loaded with. A store that streams a session's records into a state,
    /// without keeping them, calls this once per record in seq order.
    pub fn load(&mut self, event: &mut Event, past: &dyn LookBack) -> Result<(), Error> {
        upgrade_event(event, past, self.header.id())?;
        // What was stored is read back under the loading rules, never refused for the
        // format the session declares (that rule is for new appends).
        self.check_vocabulary(event)?;
        self.fold(event, RuleSet::Dsh, past)
    }

    /// A session whose header declares DSH format V1 or later (an imported `vN` file)
    /// takes only events that format holds, so exporting it at its own version never
    /// writes a file DSH refuses. A V0 header is what native sessions are created with;
    /// their export picks the lowest format that holds every event instead.
    fn check_declared_format(&self, event: &Event) -> Result<(), Error> {
        let format = self.header.format();
        if format == DshFormat::V0 {
            return Ok(());
        }
        format.holds(event).map_err(|reason| Error::NotInFormat {
            seq: event.seq(),
            event_type: event.event_type().to_owned(),
            format,
            reason,
        })
    }

    /// [`SessionState::append`] for an event whose type the caller has already checked
    /// against the vocabulary (a load checks every event's type before folding any).
    pub(crate) fn fold(
        &mut self,
        event: &Event,
        rules: RuleSet,
        past: &dyn LookBack,
    ) -> Result<(), Error> {
        let plan = self.check(event, rules, past)?;
        self.apply(event, plan);
        Ok(())
    }

    /// Runs `f` as one atomic change: if it fails, every event it folded in is taken back
    /// and the state is exactly as before, without ever having been copied. Undo costs
    /// O(events folded inside) plus the nodes their replacements shadowed. Nested calls roll
    /// back to their own start.
    pub fn atomically<R, E>(
        &mut self,
        f: impl FnOnce(&mut SessionState) -> Result<R, E>,
    ) -> Result<R, E> {
        let savepoint = self.savepoint();
        let result = f(self);
        self.release(savepoint, result.is_err());
        result
    }

    /// Starts an atomic change (see [`SessionState::atomically`]); every savepoint must be
    /// released, innermost first.
    pub(crate) fn savepoint(&mut self) -> Savepoint {
        let outermost = self.journal.is_none();
        let journal = self.journal.get_or_insert_with(Vec::new);
        Savepoint {
            next_seq: self.next_seq,
            last: self.last,
            tracker: self.tracker.clone(),
            requests: self.requests,
            tokens: self.tokens.as_ref().map(TokenTally::mark),
            locks: self.locks.clone(),
            journal_len: journal.len(),
            outermost,
        }
    }

    /// Ends the change `savepoint` started, taking it back when it `failed`.
    pub(crate) fn release(&mut self, savepoint: Savepoint, failed: bool) {
        let outermost = savepoint.outermost;
        if failed {
            self.undo_to(savepoint);
        }
        if outermost {
            self.journal = None;
            if !failed {
                self.trim_ledger();
            }
        }
    }

    /// Drops the usage records the bounded ledger no longer keeps, once nothing folded
    /// can be taken back (a rewind truncates to a mark, so it must find every record
    /// folded since).
    fn trim_ledger(&mut self) {
        if let Some(tokens) = self.tokens.as_mut() {
            tokens.trim_ledger();
        }
    }

    fn undo_to(&mut self, savepoint: Savepoint) {
        self.folded = None;
        if let Some(journal) = self.journal.as_mut() {
            for undo in journal.drain(savepoint.journal_len..).rev() {
                match undo {
                    SurfaceUndo::None => {}
                    SurfaceUndo::Append(seq) => self.surface.undo_append(seq),
                    SurfaceUndo::Replace(seq, links) => self.surface.undo_replace(seq, links),
                }
            }
        }
        self.next_seq = savepoint.next_seq;
        self.last = savepoint.last;
        self.tracker = savepoint.tracker;
        self.requests = savepoint.requests;
        self.locks = savepoint.locks;
        if let (Some(tokens), Some(mark)) = (self.tokens.as_mut(), savepoint.tokens) {
            tokens.rewind(mark);
        }
    }

    /// Whether this session's format writes tool results as `role: "tool"` messages (DSH V4).
    fn tool_results_are_messages(&self) -> bool {
        self.version
            .surface_type("tool/result")
            .is_some_and(|s| s.rule == crate::version::MessageRule::ToolMessage)
    }

    /// The closing events restart repair would append now (spec §8), without appending
    /// them: tool results for pending calls, then `step/end` if a step is open, then
    /// `turn/end {kind: interrupted}`. Empty when the last turn is closed.
    pub fn repair_closers(&self) -> Result<Vec<Event>, Error> {
        let Some(last) = &self.last else {
            return Ok(Vec::new());
        };
        self.tracker
            .closers(
                self.next_seq - 1,
                last.time,
                self.tool_results_are_messages(),
            )
            .into_iter()
            .map(|(seq, raw)| Event::parse(&raw, seq))
            .collect()
    }

    /// Where the next event goes, for [`BuildEvent::build`](crate::build::BuildEvent::build):
    /// the next seq, the open turn and step, the announced calls; `now_ms` is the time of
    /// builders that set none.
    pub fn position(&self, now_ms: i64) -> Position<'_> {
        Position::new(&self.tracker, self.next_seq, now_ms)
    }

    /// The time of the newest event, if any.
    pub fn last_event_time(&self) -> Option<i64> {
        self.last.as_ref().map(|l| l.time)
    }

    /// Whether the last turn is open (a restart would append closers).
    pub fn turn_open(&self) -> bool {
        self.tracker.turn_open()
    }

    /// The compactions started and not ended yet (a restart would close them).
    pub fn compaction_locks(&self) -> &CompactionLocks {
        &self.locks
    }

    /// The open turn's number, when the last turn is open and its `turn` is a safe integer.
    pub fn open_turn_number(&self) -> Option<i64> {
        const MAX_SAFE: i64 = (1 << 53) - 1;
        self.tracker
            .open_turn()
            .and_then(|t| t.parse::<i64>().ok())
            .filter(|n| n.abs() <= MAX_SAFE)
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The format version.
    pub fn version(&self) -> &FormatVersion {
        &self.version
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> Seq {
        Seq(self.next_seq)
    }

    /// Whether the newest event is a `session/end-seed`.
    pub fn ends_with_end_seed(&self) -> bool {
        self.last.is_some_and(|l| l.end_seed)
    }

    /// The current surface, in order.
    pub fn surface(&self) -> Vec<Seq> {
        self.surface.to_vec()
    }

    /// The surface state (for iteration without collecting).
    pub fn surface_state(&self) -> &Surface {
        &self.surface
    }

    /// How many replacements have been applied.
    pub fn replace_generation(&self) -> u64 {
        self.surface.replace_generation()
    }

    /// The surface nodes that contribute a message to the derived model history, in
    /// surface order. Reading each event by seq and taking its derived message
    /// ([`derive_message`](crate::derive_message)) gives the model history, with no other
    /// event needed.
    pub fn message_nodes(&self) -> impl Iterator<Item = Seq> + '_ {
        self.surface.message_nodes()
    }

    /// The seq of the newest `request/header` (the next request's envelope and tools).
    pub fn latest_request_header(&self) -> Option<Seq> {
        self.requests.header.map(Seq)
    }

    /// The seq of the newest `request/context` (the next request's context window).
    pub fn latest_request_context(&self) -> Option<Seq> {
        self.requests.context.map(Seq)
    }

    /// Whether tokens are measured (the state was made by [`SessionState::with_tokens`]).
    pub fn measures_tokens(&self) -> bool {
        self.tokens.is_some()
    }

    /// Context pressure for the next request, in O(1); `None` when tokens are not measured.
    pub fn pressure(&self) -> Option<ContextPressure> {
        self.tokens.as_ref().map(TokenTally::pressure)
    }

    /// The token view (surface and envelope estimates, exact usage, pressure); `None` when
    /// tokens are not measured.
    pub fn token_view(&self) -> Option<TokenView> {
        self.tokens.as_ref().map(|t| t.view(self.surface.len()))
    }

    /// The usage ledger (exact provider figures); `None` when tokens are not measured.
    pub fn usage_ledger(&self) -> Option<&UsageLedger> {
        self.tokens.as_ref().map(TokenTally::ledger)
    }

    /// The counter the estimates come from; `None` when tokens are not measured.
    pub fn token_counter(&self) -> Option<&Arc<dyn TokenCounter>> {
        self.tokens.as_ref().map(TokenTally::counter)
    }

    /// What [`crate::derive_message_content`] says of `event` under this state's rules
    /// (the message it derives and the message's `content`, or `Some(None)` when it
    /// derives none), when `event` is the surface event this state folded last, the very
    /// value it folded rather than a copy: the state found the message as it folded it,
    /// so a consumer handed the event next need not look again. `None` otherwise. The
    /// event is recognised by its seq and the address and length of its envelope, so ask
    /// with the value just folded: a different event that a later allocation put at the
    /// same address, with the same seq and length, would be answered as that one was.
    pub fn folded_message<'e>(
        &self,
        event: &'e Event,
    ) -> Option<Option<(&'e str, Option<JsonRef<'e>>)>> {
        let folded = self.folded.as_ref()?;
        let raw = event.raw();
        if folded.seq != event.seq().get() || folded.raw != (raw.as_ptr() as usize, raw.len()) {
            return None;
        }
        let text = |(a, b): Span| raw.get(a..b);
        Some(match folded.message {
            None => None,
            Some((message, content)) => Some((
                text(message)?,
                match content {
                    Some(c) => Some(JsonRef::new(text(c)?)),
                    None => None,
                },
            )),
        })
    }

    /// The cached estimate of a current surface node (0 when tokens are not measured).
    pub fn node_estimate(&self, seq: Seq) -> Option<u32> {
        self.surface.facts(seq.get()).map(|f| f.estimate)
    }

    /// The summed cached estimates of `nodes` (nodes not on the surface count 0).
    pub fn estimate_nodes(&self, nodes: &[Seq]) -> u64 {
        estimate_nodes(&self.surface, nodes)
    }

    pub(crate) fn check_vocabulary(&self, event: &Event) -> Result<(), Error> {
        check_vocabulary(&self.version, event)
    }

    /// Every stateful and stateless rule; returns the surface change to make.
    fn check(
        &self,
        event: &Event,
        rules: RuleSet,
        past: &dyn LookBack,
    ) -> Result<SurfacePlan, Error> {
        self.check_seq(event)?;
        validate::check_payload(&self.version, event)?;
        let plan = self.check_surface(event, past)?;
        if rules == RuleSet::Native {
            validate::check_structure(&self.tracker, &self.version, event)?;
        }
        Ok(plan)
    }

    /// Refuses an event whose seq is not the next one.
    pub(crate) fn check_seq(&self, event: &Event) -> Result<(), Error> {
        self.check_next_seq(event.seq())
    }

    /// Refuses `seq` unless it is the next one.
    pub(crate) fn check_next_seq(&self, seq: Seq) -> Result<(), Error> {
        if seq.get() != self.next_seq {
            return Err(Error::SeqMismatch {
                expected: Seq(self.next_seq),
                got: seq,
            });
        }
        Ok(())
    }

    pub(crate) fn check_surface(
        &self,
        event: &Event,
        past: &dyn LookBack,
    ) -> Result<SurfacePlan, Error> {
        let seq = event.seq().get();
        let event_type = event.event_type();
        let fail = |rule: Rule, detail: String| Err(Error::invalid(seq, event_type, rule, detail));
        if self.version.surface_type(event_type).is_none() {
            if event.surface_op().is_some() || event.source_event_seqs().is_some() {
                return fail(
                    Rule::SurfaceOp,
                    "only surface events may carry surfaceOp or sourceEventSeqs".into(),
                );
            }
            return Ok(SurfacePlan::None);
        }
        let sources = event.source_event_seqs();
        if sources.is_some_and(|s| s.is_empty()) && event_type != "assistant/message" {
            return fail(
                Rule::SourceEventSeqs,
                "may be empty only on assistant/message".into(),
            );
        }
        match event.surface_op() {
            None => fail(
                Rule::SurfaceOp,
                "surfaceOp is mandatory on surface events".into(),
            ),
            Some(SurfaceOp::Append) => Ok(SurfacePlan::Append),
            Some(SurfaceOp::Replace { start, end }) => {
                let shadowed =
                    match self
                        .surface
                        .plan_replace(start.get(), end.get(), sources.unwrap_or(&[]))
                    {
                        Ok(shadowed) => shadowed,
                        Err(RangeError::NotOnSurface(s)) => {
                            return fail(
                                Rule::ReplaceRange,
                                format!("seq {s} is not a current surface node"),
                            )
                        }
                        Err(RangeError::Reversed { start, end }) => {
                            return fail(
                                Rule::ReplaceRange,
                                format!("node {start} comes after node {end} on the surface"),
                            )
                        }
                        Err(RangeError::MissingSource(s)) => {
                            return fail(
                                Rule::SourceEventSeqs,
                                format!("missing shadowed node {s}"),
                            )
                        }
                    };
                if event_type == "tool/result" {
                    check_tool_result_replace(event, &shadowed, past)?;
                }
                Ok(SurfacePlan::Replace(shadowed))
            }
        }
    }

    /// Folds in an event checked by [`SessionState::check`] on this same state.
    pub(crate) fn apply(&mut self, event: &Event, plan: SurfacePlan) {
        self.apply_with(event, plan, None);
    }

    /// [`SessionState::apply`] given, for a surface event, what its node keeps (message
    /// presence and estimate) when that was worked out beforehand with this state's rules
    /// and counter; `None` works it out here.
    pub(crate) fn apply_with(&mut self, event: &Event, plan: SurfacePlan, node: Option<NodeFacts>) {
        let seq = event.seq().get();
        // Set again below for a surface event whose message is worked out here.
        self.folded = None;
        let undo = match plan {
            SurfacePlan::None => {
                if let Some(tokens) = self.tokens.as_mut() {
                    tokens.fold_structural(event);
                }
                SurfaceUndo::None
            }
            SurfacePlan::Append => {
                let node = self.node_facts(event, None, node);
                self.surface.append(seq, node);
                SurfaceUndo::Append(seq)
            }
            SurfacePlan::Replace(shadowed) => {
                let node = self.node_facts(event, Some(&shadowed), node);
                SurfaceUndo::Replace(seq, self.surface.apply_replace(&shadowed, seq, node))
            }
        };
        match event.event_type() {
            "request/header" => self.requests.header = Some(seq),
            "request/context" => self.requests.context = Some(seq),
            _ => {}
        }
        self.tracker.apply(event);
        self.locks.observe(event);
        let last = LastEvent {
            end_seed: event.event_type() == "session/end-seed",
            time: event.time(),
        };
        self.end_fold(seq, undo, last);
    }

    /// What every fold of the event at `seq` ends with: its undo kept for an atomic change
    /// (or, outside one, the usage ledger trimmed), `last` as the newest event, and the
    /// next seq.
    fn end_fold(&mut self, seq: u64, undo: SurfaceUndo, last: LastEvent) {
        match self.journal.as_mut() {
            Some(journal) => journal.push(undo),
            None => self.trim_ledger(),
        }
        self.last = Some(last);
        self.next_seq = seq + 1;
    }

    /// [`SessionState::apply_with`] of an `assistant/chunk` at `seq` with time `time`,
    /// which reaches nothing but the seq and the newest event's time: the token tally's
    /// fold of structural events (usage of settlements and summaries, request headers and
    /// contexts), the turn tracker (turn, step and call events) and the compaction locks
    /// (compaction events and summaries) all pass over a chunk.
    pub(crate) fn fold_chunk(&mut self, seq: u64, time: i64) {
        self.folded = None;
        let last = LastEvent {
            end_seed: false,
            time,
        };
        self.end_fold(seq, SurfaceUndo::None, last);
    }
}

impl SessionState {
    /// What the surface keeps about a surface event about to be folded (its message
    /// presence and, when measured, its estimate, unless `known` already says); folds it
    /// into the token tally.
    fn node_facts(
        &mut self,
        event: &Event,
        shadowed: Option<&[u64]>,
        known: Option<NodeFacts>,
    ) -> NodeFacts {
        if let Some(node) = known {
            if let Some(tokens) = self.tokens.as_mut() {
                tokens.fold_surface_with_estimate(event, node.estimate, shadowed, &self.surface);
            }
            return node;
        }
        let message = derived_message_ref(&self.version, event);
        // Kept only when the message lies in the envelope (not in an upgraded copy).
        let raw = event.raw();
        let spans = match message {
            None => Some(None),
            Some(m) => span_in(raw, m.message.raw()).and_then(|at| match m.content {
                None => Some(Some((at, None))),
                Some(c) => span_in(raw, c.raw()).map(|content| Some((at, Some(content)))),
            }),
        };
        self.folded = spans.map(|message| FoldedMessage {
            seq: event.seq().get(),
            raw: (raw.as_ptr() as usize, raw.len()),
            message,
        });
        let estimate = match self.tokens.as_mut() {
            Some(tokens) => tokens.fold_surface(event, message, shadowed, &self.surface),
            None => 0,
        };
        NodeFacts {
            message: message.is_some(),
            estimate,
        }
    }
}

/// Refuses an event whose type `version` does not know, unless it is ignorable.
pub(crate) fn check_vocabulary(version: &FormatVersion, event: &Event) -> Result<(), Error> {
    if !event.is_ignorable() && !version.is_known(event.event_type()) {
        return Err(Error::UnknownEventType {
            seq: event.seq(),
            event_type: event.event_type().to_owned(),
            version: version.name(),
        });
    }
    Ok(())
}

fn check_tool_result_replace(
    event: &Event,
    shadowed: &[u64],
    past: &dyn LookBack,
) -> Result<(), Error> {
    let fail = |detail: &str| {
        Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            Rule::ToolResultReplace,
            detail,
        ))
    };
    let [original] = shadowed else {
        return fail("a tool-result replacement must shadow exactly one node");
    };
    let Some(original) = past
        .event_at(Seq(*original))?
        .filter(|e| e.event_type() == "tool/result")
    else {
        return fail("a tool-result replacement must shadow a tool/result");
    };
    if !validate::only_tool_content_differs(original.data(), event.data()) {
        return fail("a tool-result replacement may change only content");
    }
    Ok(())
}
