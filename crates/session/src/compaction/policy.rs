//! When to compact and which surface range to shadow.

use std::collections::HashSet;

use super::transaction::summary_text;
use super::SessionSource;
use crate::error::Error;
use crate::event::Seq;
use crate::tokens::{ContextPressure, TokenProjection};
use crate::validate::message_of;

/// How much of the newest surface to keep verbatim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeepRecent {
    /// Keep the newest nodes whose estimates add up to at least this fraction of the
    /// current surface estimate (clamped to 0..=1).
    Fraction(f64),
    /// Keep the newest nodes whose estimates add up to at least this many tokens.
    Tokens(u64),
}

/// The compaction policy.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompactionPolicy {
    /// Compact when the estimated prompt reaches this fraction of the context window.
    pub trigger_fraction: f64,
    /// The recent tail kept verbatim.
    pub keep_recent: KeepRecent,
    /// Summarizer calls per compaction: the first try plus one retry after a failure or
    /// a summary that is not smaller than what it shadows.
    pub max_attempts: u32,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            trigger_fraction: 0.8,
            keep_recent: KeepRecent::Fraction(0.25),
            max_attempts: 2,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `CompactionPolicy::default().with_...(...)`.
impl CompactionPolicy {
    /// Sets [`trigger_fraction`](Self::trigger_fraction).
    #[must_use]
    pub fn with_trigger_fraction(mut self, trigger_fraction: f64) -> Self {
        self.trigger_fraction = trigger_fraction;
        self
    }

    /// Sets [`keep_recent`](Self::keep_recent).
    #[must_use]
    pub fn with_keep_recent(mut self, keep_recent: KeepRecent) -> Self {
        self.keep_recent = keep_recent;
        self
    }

    /// Sets [`max_attempts`](Self::max_attempts).
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }
}

/// Why no compaction was planned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Pressure is below the trigger (or the context window is unknown).
    BelowTrigger,
    /// No node can be shadowed: everything is in the kept tail, in an unbalanced tool
    /// exchange, or is the active turn's newest tool result.
    NothingToCompact,
    /// The only candidate is a single earlier summary; summarizing it again gains nothing.
    AlreadyCompact,
    /// The span that may be shadowed is no larger than a summary message holding no
    /// summary at all (the fixed preamble and tags): no summary can be smaller than what it
    /// shadows, so no summarizer is asked.
    SummaryCannotBeSmaller {
        /// Estimated tokens of the span.
        shadowed_tokens: u64,
        /// Estimated tokens of the replacement message with an empty summary.
        summary_floor_tokens: u64,
    },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::BelowTrigger => f.write_str("the context pressure is below the trigger"),
            SkipReason::NothingToCompact => f.write_str(
                "no surface node may be summarized: all are in the kept recent tail, in a tool \
                 call not yet answered, or the open turn's newest tool result",
            ),
            SkipReason::AlreadyCompact => {
                f.write_str("the only span that may be summarized is an earlier summary")
            }
            SkipReason::SummaryCannotBeSmaller {
                shadowed_tokens,
                summary_floor_tokens,
            } => write!(
                f,
                "the span that may be summarized holds about {shadowed_tokens} estimated tokens, \
                 and a summary message costs at least {summary_floor_tokens}"
            ),
        }
    }
}

impl CompactionPolicy {
    /// Whether `pressure` calls for a compaction.
    pub fn should_compact(&self, pressure: &ContextPressure) -> bool {
        pressure
            .ratio
            .is_some_and(|ratio| ratio >= self.trigger_fraction)
    }

    fn keep_tokens(&self, surface_tokens: u64) -> u64 {
        match self.keep_recent {
            KeepRecent::Tokens(n) => n,
            KeepRecent::Fraction(f) => {
                let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
                (surface_tokens as f64 * f).ceil() as u64
            }
        }
    }
}

/// The active turn's number, when the last turn is open.
pub(crate) fn active_turn(session: &dyn SessionSource) -> Option<i64> {
    session.state().open_turn_number()
}

/// The newest `tool/result` surface node of the active turn, if the turn is open.
pub(crate) fn protected_tool_result(
    session: &dyn SessionSource,
    nodes: &[Seq],
) -> Result<Option<Seq>, Error> {
    let Some(turn) = active_turn(session) else {
        return Ok(None);
    };
    for seq in nodes.iter().rev() {
        let protected = session.event_at(*seq)?.is_some_and(|e| {
            e.event_type() == "tool/result"
                && e.data().get("turn").and_then(|t| t.as_safe_integer()) == Some(turn)
        });
        if protected {
            return Ok(Some(*seq));
        }
    }
    Ok(None)
}

/// The chosen range: `nodes[start..end]` of the surface, with what the plan needs of its
/// events, taken as the range was chosen so that no event is read twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) shadowed: Vec<Seq>,
    pub(crate) shadowed_tokens: u64,
    /// The message of each shadowed node that has one, as stored, in surface order.
    pub(crate) messages: Vec<String>,
    /// The summary text of each shadowed message that is an earlier summary.
    pub(crate) previous_summaries: Vec<String>,
}

/// Picks the range to shadow: after leading system messages, before the kept tail and
/// the active turn's newest tool result, ending where no tool call is left unanswered.
pub(crate) fn select_range(
    session: &dyn SessionSource,
    projection: &TokenProjection,
    policy: &CompactionPolicy,
) -> Result<Result<Selection, SkipReason>, Error> {
    let nodes = session.state().surface_state().to_vec();
    let version = session.state().version();
    let mut first = nodes.len();
    for (index, seq) in nodes.iter().enumerate() {
        let system = session
            .event_at(*seq)?
            .is_some_and(|e| e.event_type() == "system/message");
        if !system {
            first = index;
            break;
        }
    }
    // The kept tail: walk back from the newest node until enough tokens are kept.
    let keep = policy.keep_tokens(projection.surface_tokens());
    let mut limit = nodes.len();
    let mut kept = 0u64;
    while limit > first && kept < keep {
        limit -= 1;
        kept += projection.estimate_nodes(&nodes[limit..=limit]);
    }
    if let Some(protected) = protected_tool_result(session, &nodes)? {
        if let Some(at) = nodes.iter().position(|s| *s == protected) {
            limit = limit.min(at);
        }
    }
    // The range may end only where every call it contains is answered inside it and no
    // result in it answers a call outside it.
    let mut open: HashSet<String> = HashSet::new();
    let mut end = first;
    // Each scanned node's message, kept for the plan: (node index, message, summary text).
    let mut scanned: Vec<(usize, String, Option<String>)> = Vec::new();
    for (index, seq) in nodes.iter().enumerate().take(limit).skip(first) {
        let Some(event) = session.event_at(*seq)? else {
            break;
        };
        let message = message_of(version, &event);
        if let Some(m) = message {
            let summary = super::is_summary_message(m).then(|| summary_text(m));
            scanned.push((index, m.raw().to_owned(), summary));
        }
        match event.event_type() {
            "assistant/message" => {
                let blocks = message.and_then(|m| m.get("content"));
                for block in blocks.iter().flat_map(|c| c.elements()) {
                    if block.get("type").and_then(|t| t.as_str()).as_deref() == Some("tool-call") {
                        if let Some(id) = block.get("id").and_then(|i| i.as_str()) {
                            open.insert(id.into_owned());
                        }
                    }
                }
            }
            "tool/result" => {
                let call = message
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("callId"))
                    .and_then(|c| c.as_str());
                match call {
                    Some(call) if open.remove(call.as_ref()) => {}
                    // A result whose call lies outside the range: no later end is valid.
                    _ => break,
                }
            }
            _ => {}
        }
        if open.is_empty() {
            end = index + 1;
        }
    }
    let shadowed: Vec<Seq> = nodes.get(first..end).unwrap_or(&[]).to_vec();
    let shadowed_tokens = projection.estimate_nodes(&shadowed);
    if shadowed.is_empty() || shadowed_tokens == 0 {
        return Ok(Err(SkipReason::NothingToCompact));
    }
    scanned.retain(|(index, _, _)| *index < end);
    if let ([_], [(_, _, Some(_))]) = (shadowed.as_slice(), scanned.as_slice()) {
        return Ok(Err(SkipReason::AlreadyCompact));
    }
    let mut messages = Vec::with_capacity(scanned.len());
    let mut previous_summaries = Vec::new();
    for (_, message, summary) in scanned {
        messages.push(message);
        previous_summaries.extend(summary);
    }
    Ok(Ok(Selection {
        shadowed,
        shadowed_tokens,
        messages,
        previous_summaries,
    }))
}
