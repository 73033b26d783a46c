//! [`TokenProjection`]: per-surface-node estimates, the usage ledger and context pressure,
//! as one pure fold over the log.
//!
//! The projection keeps its own copy of the surface (the same linked list the session
//! uses) with one cached estimate per current node. An append costs one counter call; a
//! replacement subtracts the cached estimates of the nodes it shadows and adds its own, so
//! no prefix is ever re-counted. The state is a function of the events alone (and the
//! counter), which is what lets a projection cache persist it under
//! [`TokenProjection::STATE_VERSION`] and a watermark.

use std::sync::Arc;

use super::text::{count_with_overhead, estimate_message, write_derived_text};
use super::usage::{CumulativeUsage, LedgerMark, RequestKind, RequestUsage, UsageLedger};
use super::{Label, TokenCounter, TokenFigure};
use crate::error::{Error, Rule};
use crate::event::{Event, Seq, SurfaceOp};
use crate::json::JsonRef;
use crate::session::{derived_message_ref, DerivedRef, Session};
use crate::state::SessionState;
use crate::surface::{NodeFacts, RangeError, Surface};
use crate::version::FormatVersion;

/// The request envelope of the latest `request/header`: system prompt and tool schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) fingerprint: u64,
    pub(crate) tokens: u64,
}

/// The newest settlement with exact usage, and the surface estimate its request saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub(crate) seq: Seq,
    pub(crate) prompt_tokens: u64,
    pub(crate) surface_tokens_at_request: u64,
    pub(crate) envelope_fingerprint: Option<u64>,
}

/// Context pressure for the next request.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPressure {
    /// Estimated prompt tokens of the next request. Always labelled estimated, also when
    /// anchored on an exact figure, because the delta since the anchor is estimated.
    pub estimated_prompt_tokens: TokenFigure,
    /// The settlement whose exact prompt usage anchors the estimate, when the request
    /// envelope (system, tools, provider, model) is unchanged since it.
    pub anchored_on: Option<Seq>,
    /// That settlement's exact prompt tokens.
    pub anchor_prompt_tokens: Option<TokenFigure>,
    /// Estimated change of the surface since the anchored request (negative after a
    /// compaction).
    pub estimated_delta_since_anchor: i64,
    /// The context window from the latest `request/context`, if it named one.
    pub context_window: Option<u64>,
    /// `estimated_prompt_tokens / context_window`.
    pub ratio: Option<f64>,
}

/// What the projection shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenView {
    /// Current surface nodes.
    pub surface_nodes: usize,
    /// Sum of the per-node estimates of the current surface.
    pub surface_estimate: TokenFigure,
    /// Estimate of the request envelope (system prompt and tool schemas of the latest
    /// `request/header`).
    pub envelope_estimate: TokenFigure,
    /// The newest conversation request's exact usage.
    pub last_request: Option<RequestUsage>,
    /// Exact totals over every request (conversation and auxiliary).
    pub cumulative: CumulativeUsage,
    /// Context pressure for the next request.
    pub pressure: ContextPressure,
}

/// Token measurement as a pure fold: [`TokenProjection::new`] (init),
/// [`TokenProjection::apply`] (one event), [`TokenProjection::view`].
#[derive(Debug, Clone)]
pub struct TokenProjection {
    version: Arc<FormatVersion>,
    /// The projection's own surface; each node's facts carry its cached estimate.
    surface: Surface,
    next_seq: u64,
    tally: TokenTally,
}

/// Everything token measurement keeps besides the surface: the counter, the usage ledger,
/// the summed node estimates, the request envelope and window, the pressure anchor. A
/// [`TokenProjection`] pairs it with a surface of its own; a
/// [`SessionState`](crate::SessionState) measuring tokens pairs it with the session's
/// surface, so the surface is kept once.
#[derive(Debug, Clone)]
pub(crate) struct TokenTally {
    counter: Arc<dyn TokenCounter>,
    label: Label,
    /// The sum of the current nodes' estimates.
    pub(crate) surface_tokens: u64,
    pub(crate) ledger: UsageLedger,
    pub(crate) envelope: Option<Envelope>,
    pub(crate) context_window: Option<u64>,
    pub(crate) anchor: Option<Anchor>,
    scratch: String,
}

impl PartialEq for TokenTally {
    /// Tallies are equal when their contents are and their counters have one name (a
    /// counter's name identifies its estimates); the scratch buffer is not content.
    fn eq(&self, other: &TokenTally) -> bool {
        self.counter.name() == other.counter.name()
            && self.label == other.label
            && self.surface_tokens == other.surface_tokens
            && self.ledger == other.ledger
            && self.envelope == other.envelope
            && self.context_window == other.context_window
            && self.anchor == other.anchor
    }
}

/// Where a [`TokenTally`] stood when an atomic change started: its scalars and the
/// ledger's mark, so a failed change is taken back without copying the ledger.
#[derive(Debug, Clone)]
pub(crate) struct TallyMark {
    surface_tokens: u64,
    ledger: LedgerMark,
    envelope: Option<Envelope>,
    context_window: Option<u64>,
    anchor: Option<Anchor>,
}

/// FNV-1a over `parts`, each followed by a 0xff byte (which UTF-8 never contains).
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash = Fnv1a::new();
    for part in parts {
        hash.part(part);
    }
    hash.finish()
}

/// [`fnv1a`] fed as it goes: text written to it (`write!` included) hashes as the bytes
/// of the part under way, and [`Fnv1a::end_part`] ends that part.
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn byte(&mut self, byte: u8) {
        self.0 ^= u64::from(byte);
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }

    /// A whole part: its bytes, then the end of it.
    pub(crate) fn part(&mut self, part: &str) {
        part.bytes().for_each(|b| self.byte(b));
        self.end_part();
    }

    pub(crate) fn end_part(&mut self) {
        self.byte(0xff);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        s.bytes().for_each(|b| self.byte(b));
        Ok(())
    }
}

impl TokenTally {
    pub(crate) fn new(counter: Arc<dyn TokenCounter>) -> TokenTally {
        TokenTally::with_ledger(counter, UsageLedger::new())
    }

    /// The tally a session state keeps: its ledger holds the totals and only the newest
    /// records, so the state stays bounded however many requests the session made.
    pub(crate) fn bounded(counter: Arc<dyn TokenCounter>) -> TokenTally {
        TokenTally::with_ledger(counter, UsageLedger::bounded())
    }

    fn with_ledger(counter: Arc<dyn TokenCounter>, ledger: UsageLedger) -> TokenTally {
        let label = Label::Estimated {
            counter: Arc::from(counter.name()),
        };
        TokenTally {
            counter,
            label,
            surface_tokens: 0,
            ledger,
            envelope: None,
            context_window: None,
            anchor: None,
            scratch: String::new(),
        }
    }

    /// A tally restored from a checkpoint; the label follows from the counter.
    pub(crate) fn from_parts(
        counter: Arc<dyn TokenCounter>,
        surface_tokens: u64,
        ledger: UsageLedger,
        envelope: Option<Envelope>,
        context_window: Option<u64>,
        anchor: Option<Anchor>,
    ) -> TokenTally {
        TokenTally {
            surface_tokens,
            ledger,
            envelope,
            context_window,
            anchor,
            ..TokenTally::new(counter)
        }
    }

    /// Folds a structural (non-surface) event.
    pub(crate) fn fold_structural(&mut self, event: &Event) {
        // Auxiliary requests (the summarizer's) are accounted but never anchor pressure:
        // their prompt is not the conversation's.
        self.ledger.fold(event);
        self.fold_request(event);
    }

    /// Folds an accepted surface event whose derived message is `message`; `shadowed` are
    /// the nodes a replacement shadows, still on `surface`. Returns the new node's
    /// estimate, which the caller stores in the node's facts.
    pub(crate) fn fold_surface(
        &mut self,
        event: &Event,
        message: Option<DerivedRef<'_>>,
        shadowed: Option<&[u64]>,
        surface: &Surface,
    ) -> u32 {
        let estimate = message.map_or(0, |m| self.estimate_derived_scratch(event, &m));
        self.fold_surface_with_estimate(event, estimate, shadowed, surface);
        estimate
    }

    /// [`TokenTally::fold_surface`] with the new node's estimate already made with this
    /// tally's counter (by [`crate::LoadPreparer`], on another thread); the ledger and the
    /// request envelope are folded as there.
    pub(crate) fn fold_surface_with_estimate(
        &mut self,
        event: &Event,
        estimate: u32,
        shadowed: Option<&[u64]>,
        surface: &Surface,
    ) {
        // A settlement's request saw the surface as it was before the settlement itself.
        if let Some(request) = self.ledger.fold(event) {
            if request.kind == RequestKind::Settlement && request.usage.prompt_tokens() > 0 {
                self.anchor = Some(Anchor {
                    seq: request.seq,
                    prompt_tokens: request.usage.prompt_tokens(),
                    surface_tokens_at_request: self.surface_tokens,
                    envelope_fingerprint: self.envelope.as_ref().map(|e| e.fingerprint),
                });
            }
        }
        for node in shadowed.unwrap_or_default() {
            let old = surface.facts(*node).map_or(0, |f| f.estimate);
            self.surface_tokens = self.surface_tokens.saturating_sub(u64::from(old));
        }
        self.surface_tokens += u64::from(estimate);
        self.fold_request(event);
    }

    fn fold_request(&mut self, event: &Event) {
        match event.event_type() {
            "request/header" => self.apply_header(event),
            "request/context" => {
                self.context_window = event.data().get("contextWindow").and_then(|w| w.as_seq());
            }
            _ => {}
        }
    }

    fn apply_header(&mut self, event: &Event) {
        let Some(header) = event.data().get("header") else {
            return;
        };
        let system = header.get("system");
        let tools = header.get("tools");
        let config = header.get("config");
        let field = |key: &str| {
            config
                .and_then(|c| c.get(key))
                .map(|v| v.raw())
                .unwrap_or("")
        };
        let fingerprint = fnv1a(&[
            system.map(|s| s.raw()).unwrap_or(""),
            tools.map(|t| t.raw()).unwrap_or(""),
            field("provider"),
            field("model"),
        ]);
        let mut tokens = 0u64;
        if let Some(system) = system {
            let text = system
                .as_str()
                .unwrap_or(std::borrow::Cow::Borrowed(system.raw()));
            tokens +=
                u64::from(self.counter.count(&text)) + u64::from(self.counter.message_overhead());
        }
        if let Some(tools) = tools {
            // Tool schemas travel as JSON, so their JSON text is what gets tokenized.
            tokens += u64::from(self.counter.count(tools.raw()));
        }
        self.envelope = Some(Envelope {
            fingerprint,
            tokens,
        });
    }

    /// The estimate of one model-visible message: its visible text counted, plus the
    /// counter's per-message overhead.
    pub(crate) fn estimate_message(&self, message: JsonRef<'_>) -> u32 {
        estimate_message(self.counter.as_ref(), message, &mut String::new())
    }

    // The fold reuses one buffer so an append allocates nothing once warmed up.
    fn estimate_derived_scratch(&mut self, event: &Event, derived: &DerivedRef<'_>) -> u32 {
        let mut text = std::mem::take(&mut self.scratch);
        text.clear();
        write_derived_text(event, derived, &mut text);
        let tokens = count_with_overhead(self.counter.as_ref(), &text);
        self.scratch = text;
        tokens
    }

    pub(crate) fn mark(&self) -> TallyMark {
        TallyMark {
            surface_tokens: self.surface_tokens,
            ledger: self.ledger.mark(),
            envelope: self.envelope.clone(),
            context_window: self.context_window,
            anchor: self.anchor.clone(),
        }
    }

    pub(crate) fn rewind(&mut self, mark: TallyMark) {
        self.surface_tokens = mark.surface_tokens;
        self.ledger.rewind(mark.ledger);
        self.envelope = mark.envelope;
        self.context_window = mark.context_window;
        self.anchor = mark.anchor;
    }

    /// Drops the usage records a bounded ledger no longer keeps (see
    /// [`UsageLedger::trim`]); the state calls it when no change can be taken back.
    pub(crate) fn trim_ledger(&mut self) {
        self.ledger.trim();
    }

    pub(crate) fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    pub(crate) fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    pub(crate) fn label(&self) -> &Label {
        &self.label
    }

    pub(crate) fn surface_tokens(&self) -> u64 {
        self.surface_tokens
    }

    fn estimated(&self, tokens: u64) -> TokenFigure {
        TokenFigure {
            tokens,
            label: self.label.clone(),
        }
    }

    /// Context pressure for the next request.
    pub(crate) fn pressure(&self) -> ContextPressure {
        let envelope_tokens = self.envelope.as_ref().map(|e| e.tokens).unwrap_or(0);
        let fingerprint = self.envelope.as_ref().map(|e| e.fingerprint);
        let anchor = self
            .anchor
            .as_ref()
            .filter(|a| a.envelope_fingerprint == fingerprint);
        let (tokens, delta) = match anchor {
            Some(a) => {
                let delta =
                    i128::from(self.surface_tokens) - i128::from(a.surface_tokens_at_request);
                let tokens = (i128::from(a.prompt_tokens) + delta).max(0);
                (
                    u64::try_from(tokens).unwrap_or(u64::MAX),
                    i64::try_from(delta).unwrap_or(i64::MAX),
                )
            }
            None => (envelope_tokens.saturating_add(self.surface_tokens), 0),
        };
        ContextPressure {
            estimated_prompt_tokens: self.estimated(tokens),
            anchored_on: anchor.map(|a| a.seq),
            anchor_prompt_tokens: anchor.map(|a| TokenFigure::exact(a.prompt_tokens)),
            estimated_delta_since_anchor: delta,
            context_window: self.context_window,
            ratio: self
                .context_window
                .filter(|w| *w > 0)
                .map(|w| tokens as f64 / w as f64),
        }
    }

    /// The view of a surface of `surface_nodes` nodes.
    pub(crate) fn view(&self, surface_nodes: usize) -> TokenView {
        TokenView {
            surface_nodes,
            surface_estimate: self.estimated(self.surface_tokens),
            envelope_estimate: self
                .estimated(self.envelope.as_ref().map(|e| e.tokens).unwrap_or(0)),
            last_request: self.ledger.last_settlement().cloned(),
            cumulative: self.ledger.cumulative(),
            pressure: self.pressure(),
        }
    }
}

impl TokenProjection {
    /// The version of the folded state; a persisted state of another version (or made
    /// with another counter) must be rebuilt from the log.
    pub const STATE_VERSION: u32 = 1;

    /// The initial state for sessions of `version`, estimating with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>, version: FormatVersion) -> Self {
        TokenProjection {
            version: Arc::new(version),
            surface: Surface::default(),
            next_seq: 0,
            tally: TokenTally::new(counter),
        }
    }

    /// Folds every event of `session`.
    pub fn from_session(session: &Session, counter: Arc<dyn TokenCounter>) -> Result<Self, Error> {
        let mut projection = Self::new(counter, session.version().clone());
        for event in session.events() {
            projection.apply(event)?;
        }
        Ok(projection)
    }

    /// The projection a state that measures tokens holds (its surface with the per-node
    /// estimates, its tally, its next seq): what folding the same events would give, without
    /// folding them. `None` when the state measures no tokens.
    pub fn from_state(state: &SessionState) -> Option<Self> {
        Some(TokenProjection {
            version: Arc::clone(&state.version),
            surface: state.surface.clone(),
            next_seq: state.next_seq,
            tally: state.tokens.clone()?,
        })
    }

    /// Folds one event. Events must come in seq order from a session that accepted them;
    /// an event out of order or a replacement the surface cannot take is refused and
    /// leaves the state unchanged.
    pub fn apply(&mut self, event: &Event) -> Result<(), Error> {
        let seq = event.seq().get();
        if seq != self.next_seq {
            return Err(Error::SeqMismatch {
                expected: Seq(self.next_seq),
                got: Seq(seq),
            });
        }
        if self.version.surface_type(event.event_type()).is_some() {
            self.apply_surface(event)?;
        } else {
            self.tally.fold_structural(event);
        }
        self.next_seq = seq + 1;
        Ok(())
    }

    fn apply_surface(&mut self, event: &Event) -> Result<(), Error> {
        let seq = event.seq().get();
        let shadowed = match event.surface_op() {
            Some(SurfaceOp::Replace { start, end }) => {
                let sources = event.source_event_seqs().unwrap_or(&[]);
                let planned = self.surface.plan_replace(start.get(), end.get(), sources);
                Some(planned.map_err(|e| {
                    let detail = match e {
                        RangeError::NotOnSurface(s) => format!("seq {s} is not on the surface"),
                        RangeError::Reversed { start, end } => {
                            format!("node {start} comes after node {end}")
                        }
                        RangeError::MissingSource(s) => format!("missing shadowed node {s}"),
                    };
                    Error::invalid(seq, event.event_type(), Rule::ReplaceRange, detail)
                })?)
            }
            Some(SurfaceOp::Append) => None,
            None => {
                return Err(Error::invalid(
                    seq,
                    event.event_type(),
                    Rule::SurfaceOp,
                    "surfaceOp is mandatory on surface events",
                ))
            }
        };
        let message = derived_message_ref(&self.version, event);
        let estimate = self
            .tally
            .fold_surface(event, message, shadowed.as_deref(), &self.surface);
        let node = NodeFacts {
            message: message.is_some(),
            estimate,
        };
        match shadowed {
            Some(shadowed) => {
                self.surface.apply_replace(&shadowed, seq, node);
            }
            None => self.surface.append(seq, node),
        }
        Ok(())
    }

    /// The estimate of one model-visible message: its visible text counted, plus the
    /// counter's per-message overhead. This is the figure cached per surface node.
    pub fn estimate_message(&self, message: JsonRef<'_>) -> u32 {
        self.tally.estimate_message(message)
    }

    /// The cached estimate of a current surface node.
    pub fn node_estimate(&self, seq: Seq) -> Option<u32> {
        self.surface.facts(seq.get()).map(|f| f.estimate)
    }

    /// The summed cached estimates of `nodes` (current surface nodes; others count 0).
    pub fn estimate_nodes(&self, nodes: &[Seq]) -> u64 {
        estimate_nodes(&self.surface, nodes)
    }

    /// The projection's copy of the surface.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// The usage ledger (exact figures).
    pub fn ledger(&self) -> &UsageLedger {
        self.tally.ledger()
    }

    /// The counter.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        self.tally.counter()
    }

    /// The label of every estimate this projection makes.
    pub fn label(&self) -> &Label {
        self.tally.label()
    }

    /// The seq the next applied event must have (the watermark).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The sum of the current node estimates.
    pub fn surface_tokens(&self) -> u64 {
        self.tally.surface_tokens()
    }

    /// Context pressure for the next request.
    pub fn pressure(&self) -> ContextPressure {
        self.tally.pressure()
    }

    /// The view: surface and envelope estimates, exact usage, pressure.
    pub fn view(&self) -> TokenView {
        self.tally.view(self.surface.len())
    }
}

/// The summed cached estimates of `nodes` on `surface` (nodes not on it count 0).
pub(crate) fn estimate_nodes(surface: &Surface, nodes: &[Seq]) -> u64 {
    nodes
        .iter()
        .map(|n| u64::from(surface.facts(n.get()).map_or(0, |f| f.estimate)))
        .sum()
}
