//! Token measurement: exact provider accounting kept apart from estimates.
//!
//! Two kinds of figure exist and the types keep them apart (architecture idea 6):
//!
//! - **Exact** figures are what the provider reported with each assistant settlement
//!   (`assistant/message.data.usage`) or auxiliary request (`compaction/summary.usage`).
//!   [`UsageLedger`] folds them into per-request [`RequestUsage`] records and one
//!   [`CumulativeUsage`]; the two are different types, so a per-call figure can never be
//!   added to, or shown as, a running total by mistake.
//! - **Estimated** figures come from a [`TokenCounter`]: the documented
//!   [`HeuristicCounter`] or, with the `tokenizer` cargo feature, `TokenizerCounter` over a
//!   `tokenizer.json` the user supplies. [`TokenProjection`] caches one estimate per surface
//!   node, so measuring after one more event costs one counter call.
//!
//! Every figure handed out is a [`TokenFigure`] whose [`Label`] says which kind it is and,
//! for estimates, which counter produced it.

mod counter;
pub(crate) mod projection;
pub(crate) mod text;
mod usage;

use std::fmt;
use std::sync::Arc;

#[cfg(feature = "tokenizer")]
pub use counter::TokenizerCounter;
pub use counter::{HeuristicCounter, TokenCounter};
pub use projection::{ContextPressure, TokenProjection, TokenView};
pub use text::{estimate_message, visible_text, write_visible_text};
pub use usage::{
    CumulativeUsage, RequestKind, RequestUsage, UnreadableUsage, Usage, UsageLedger, UsageShape,
    LEDGER_RECENT, USAGE_LEDGER_STATE_VERSION,
};

/// Where a token figure comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Label {
    /// Reported by the provider and logged with the request's settlement.
    Exact,
    /// Computed locally by the named counter ([`TokenCounter::name`]).
    Estimated {
        /// The counter's name.
        counter: Arc<str>,
    },
}

impl Label {
    /// Whether the figure is provider-reported.
    pub fn is_exact(&self) -> bool {
        matches!(self, Label::Exact)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::Exact => f.write_str("exact"),
            Label::Estimated { counter } => write!(f, "estimated ({counter})"),
        }
    }
}

/// A token count together with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenFigure {
    /// The number of tokens.
    pub tokens: u64,
    /// Exact or estimated, and by which counter.
    pub label: Label,
}

impl TokenFigure {
    /// A provider-reported figure.
    pub fn exact(tokens: u64) -> Self {
        TokenFigure {
            tokens,
            label: Label::Exact,
        }
    }

    /// A figure estimated by `counter`.
    pub fn estimated(tokens: u64, counter: Arc<str>) -> Self {
        TokenFigure {
            tokens,
            label: Label::Estimated { counter },
        }
    }
}

impl fmt::Display for TokenFigure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens, {}", self.tokens, self.label)
    }
}
