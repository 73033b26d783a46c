//! [`TokenProjection`]: per-surface-node estimates, the usage ledger and context pressure,
//! as one pure fold over the log.
//!
//! The projection keeps its own copy of the surface (the same linked list the session
//! uses) and one cached estimate per current node. An append costs one counter call; a
//! replacement subtracts the cached estimates of the nodes it shadows and adds its own, so
//! no prefix is ever re-counted. The state is a function of the events alone (and the
//! counter), which is what lets a projection cache persist it under
//! [`TokenProjection::STATE_VERSION`] and a watermark.

use std::collections::HashMap;
use std::sync::Arc;

use super::text::write_visible_text;
use super::usage::{CumulativeUsage, RequestKind, RequestUsage, UsageLedger};
use super::{Label, TokenCounter, TokenFigure};
use crate::error::{Error, Rule};
use crate::event::{Event, Seq, SurfaceOp};
use crate::json::JsonRef;
use crate::session::Session;
use crate::surface::{RangeError, Surface};
use crate::validate::message_of;
use crate::version::FormatVersion;

/// The request envelope of the latest `request/header`: system prompt and tool schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Envelope {
    fingerprint: u64,
    tokens: u64,
}

/// The newest settlement with exact usage, and the surface estimate its request saw.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Anchor {
    seq: Seq,
    prompt_tokens: u64,
    surface_tokens_at_request: u64,
    envelope_fingerprint: Option<u64>,
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
    counter: Arc<dyn TokenCounter>,
    label: Label,
    version: Arc<FormatVersion>,
    surface: Surface,
    estimates: HashMap<u64, u32>,
    surface_tokens: u64,
    ledger: UsageLedger,
    envelope: Option<Envelope>,
    context_window: Option<u64>,
    anchor: Option<Anchor>,
    next_seq: u64,
    scratch: String,
}

fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0xff)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

impl TokenProjection {
    /// The version of the folded state; a persisted state of another version (or made
    /// with another counter) must be rebuilt from the log.
    pub const STATE_VERSION: u32 = 1;

    /// The initial state for sessions of `version`, estimating with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>, version: FormatVersion) -> Self {
        let label = Label::Estimated {
            counter: Arc::from(counter.name()),
        };
        TokenProjection {
            counter,
            label,
            version: Arc::new(version),
            surface: Surface::default(),
            estimates: HashMap::new(),
            surface_tokens: 0,
            ledger: UsageLedger::new(),
            envelope: None,
            context_window: None,
            anchor: None,
            next_seq: 0,
            scratch: String::new(),
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

    /// Folds one event. Events must come in seq order from a session that accepted them;
    /// an event out of order or a replacement the surface cannot take is refused and
    /// leaves the state unchanged.
    pub fn apply(&mut self, event: &Event) -> Result<(), Error> {
        let seq = event.seq().get();
        if seq != self.next_seq {
            return Err(Error::SeqMismatch {
                expected: self.next_seq,
                got: seq,
            });
        }
        if self.version.surface_type(event.event_type()).is_some() {
            self.apply_surface(event)?;
        } else {
            // Auxiliary requests (the summarizer's) are accounted but never anchor
            // pressure: their prompt is not the conversation's.
            self.ledger.apply(event);
        }
        match event.event_type() {
            "request/header" => self.apply_header(event),
            "request/context" => {
                self.context_window = event.data().get("contextWindow").and_then(|w| w.as_seq());
            }
            _ => {}
        }
        self.next_seq = seq + 1;
        Ok(())
    }

    fn apply_surface(&mut self, event: &Event) -> Result<(), Error> {
        let seq = event.seq().get();
        let shadowed = match event.surface_op() {
            Some(SurfaceOp::Replace { start, end }) => {
                let sources = event.source_event_seqs().unwrap_or(&[]);
                let planned = self.surface.plan_replace(start, end, sources);
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
        // A settlement's request saw the surface as it was before the settlement itself.
        if let Some(request) = self.ledger.apply(event) {
            if request.kind == RequestKind::Settlement && request.usage.prompt_tokens() > 0 {
                self.anchor = Some(Anchor {
                    seq: request.seq,
                    prompt_tokens: request.usage.prompt_tokens(),
                    surface_tokens_at_request: self.surface_tokens,
                    envelope_fingerprint: self.envelope.as_ref().map(|e| e.fingerprint),
                });
            }
        }
        let estimate = self.estimate_event(event);
        match shadowed {
            Some(shadowed) => {
                for node in &shadowed {
                    let old = self.estimates.remove(node).unwrap_or(0);
                    self.surface_tokens = self.surface_tokens.saturating_sub(u64::from(old));
                }
                self.surface.apply_replace(&shadowed, seq);
            }
            None => self.surface.append(seq),
        }
        self.estimates.insert(seq, estimate);
        self.surface_tokens += u64::from(estimate);
        Ok(())
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

    /// The estimate of one surface event's message: 0 when `derive_messages` skips it.
    fn estimate_event(&mut self, event: &Event) -> u32 {
        let Some(surface) = self.version.surface_type(event.event_type()) else {
            return 0;
        };
        let Some(message) = message_of(&self.version, event) else {
            return 0;
        };
        let empty = message
            .get("content")
            .is_some_and(|c| c.elements().next().is_none());
        if surface.skip_empty_content && empty {
            return 0;
        }
        self.estimate_message_scratch(message)
    }

    /// The estimate of one model-visible message: its visible text counted, plus the
    /// counter's per-message overhead. This is the figure cached per surface node.
    pub fn estimate_message(&self, message: JsonRef<'_>) -> u32 {
        let mut text = String::new();
        write_visible_text(message, &mut text);
        self.count_with_overhead(&text)
    }

    fn count_with_overhead(&self, text: &str) -> u32 {
        self.counter
            .count(text)
            .saturating_add(self.counter.message_overhead())
    }

    // The fold reuses one buffer so an append allocates nothing once warmed up.
    fn estimate_message_scratch(&mut self, message: JsonRef<'_>) -> u32 {
        let mut text = std::mem::take(&mut self.scratch);
        text.clear();
        write_visible_text(message, &mut text);
        let tokens = self.count_with_overhead(&text);
        self.scratch = text;
        tokens
    }

    /// The cached estimate of a current surface node.
    pub fn node_estimate(&self, seq: u64) -> Option<u32> {
        self.estimates.get(&seq).copied()
    }

    /// The summed cached estimates of `nodes` (current surface nodes; others count 0).
    pub fn estimate_nodes(&self, nodes: &[u64]) -> u64 {
        nodes
            .iter()
            .map(|n| u64::from(self.node_estimate(*n).unwrap_or(0)))
            .sum()
    }

    /// The projection's copy of the surface.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// The usage ledger (exact figures).
    pub fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    /// The counter.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    /// The label of every estimate this projection makes.
    pub fn label(&self) -> &Label {
        &self.label
    }

    /// The seq the next applied event must have (the watermark).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The sum of the current node estimates.
    pub fn surface_tokens(&self) -> u64 {
        self.surface_tokens
    }

    fn estimated(&self, tokens: u64) -> TokenFigure {
        TokenFigure {
            tokens,
            label: self.label.clone(),
        }
    }

    /// Context pressure for the next request.
    pub fn pressure(&self) -> ContextPressure {
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

    /// The view: surface and envelope estimates, exact usage, pressure.
    pub fn view(&self) -> TokenView {
        TokenView {
            surface_nodes: self.surface.len(),
            surface_estimate: self.estimated(self.surface_tokens),
            envelope_estimate: self
                .estimated(self.envelope.as_ref().map(|e| e.tokens).unwrap_or(0)),
            last_request: self.ledger.last_settlement().cloned(),
            cumulative: self.ledger.cumulative(),
            pressure: self.pressure(),
        }
    }
}
