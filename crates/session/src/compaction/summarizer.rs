//! The [`Summarizer`] seam and the deterministic built-in summarizer.

use std::fmt;

use super::floor_boundary;
use crate::json::JsonRef;
use crate::tokens::{visible_text, Usage};

/// What a summarizer is asked to condense.
#[derive(Debug, Clone)]
pub struct SummaryRequest<'a> {
    /// The compaction's id.
    pub compaction_id: &'a str,
    /// The shadowed nodes' messages, in surface order, verbatim JSON. Earlier summaries
    /// appear here as the user messages they are.
    pub messages: Vec<&'a str>,
    /// The text of earlier compaction summaries among the shadowed nodes (nested
    /// compaction), oldest first, so the new summary can carry them forward.
    pub previous_summaries: Vec<String>,
    /// Estimated tokens of the shadowed nodes.
    pub shadowed_tokens: u64,
    /// The summary must come in under this many estimated tokens (the replacement
    /// message, preamble included, must be smaller than what it shadows).
    pub max_summary_tokens: u64,
    /// 1 for the first try, 2 for the retry after a refused summary.
    pub attempt: u32,
}

/// A summarizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The summary as text blocks.
    pub blocks: Vec<String>,
    /// The provider that produced it.
    pub provider: String,
    /// The model that produced it.
    pub model: String,
    /// The summarizer request's exact usage, when a provider reported one.
    pub usage: Option<Usage>,
    /// The output limit the request used, if any.
    pub max_tokens: Option<u64>,
}

impl Summary {
    /// A summary with no text, by no model: the smallest replacement a compaction can write.
    pub fn empty() -> Summary {
        Summary {
            blocks: Vec::new(),
            provider: String::new(),
            model: String::new(),
            usage: None,
            max_tokens: None,
        }
    }
}

/// Why a summarizer produced nothing; recorded as the `error` of `compaction/end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizerError(pub String);

impl fmt::Display for SummarizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SummarizerError {}

/// Produces summary text. The engine calls it between writing the lock and the summary;
/// it may call a model (the caller's business) but the engine itself never does.
pub trait Summarizer {
    /// Summarizes `request`.
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError>;
}

/// A deterministic summarizer for tests and demos: earlier summaries carried forward,
/// then one line per message (`role: first words`), cut to a byte budget of
/// `max_summary_tokens` (a quarter of what the heuristic counter would allow, shrinking
/// by half on the retry) so its output is smaller than what it shadows.
#[derive(Debug, Clone, Default)]
pub struct DeterministicSummarizer {
    /// Bytes of each message kept on its line.
    pub line_bytes: usize,
}

impl DeterministicSummarizer {
    /// A summarizer keeping 80 bytes per message.
    pub fn new() -> Self {
        DeterministicSummarizer { line_bytes: 80 }
    }
}

impl Summarizer for DeterministicSummarizer {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        let line_bytes = if self.line_bytes == 0 {
            80
        } else {
            self.line_bytes
        };
        let mut text = String::new();
        for earlier in &request.previous_summaries {
            text.push_str("Earlier: ");
            text.push_str(earlier);
            text.push('\n');
        }
        text.push_str(&format!("{} messages condensed.\n", request.messages.len()));
        for raw in &request.messages {
            let message = JsonRef::new(raw);
            let role = message
                .get("role")
                .and_then(|r| r.as_str())
                .unwrap_or_default();
            let body = visible_text(message).replace('\n', " ");
            let cut = floor_boundary(&body, line_bytes);
            text.push_str(&format!("- {role}: {}\n", body.get(..cut).unwrap_or("")));
        }
        let divisor = if request.attempt > 1 { 2 } else { 1 };
        let budget = usize::try_from(request.max_summary_tokens / divisor)
            .unwrap_or(usize::MAX)
            .max(1);
        let cut = floor_boundary(&text, budget);
        text.truncate(cut);
        Ok(Summary {
            blocks: vec![text],
            provider: "sessionlog".to_owned(),
            model: "deterministic-summarizer".to_owned(),
            usage: None,
            max_tokens: None,
        })
    }
}
