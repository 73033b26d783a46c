//! Compaction events written by a caller that runs its own summarizer.

use super::{blocks_json, int, seqs_json, usage_json, Block, BuildEvent, Position};
use crate::compaction::summary_message_data;
use crate::error::{Error, Rule};
use crate::event::{EventInput, Seq, SurfaceOp};
use crate::json::ObjectWriter;
use crate::tokens::Usage;

fn compaction_turn(position: &Position<'_>) -> String {
    position
        .open_turn()
        .map_or_else(|| "null".to_owned(), |t| t.to_string())
}

/// `compaction/start {compactionId, turn}`: takes the compaction lock (the turn is the open
/// one, or `null` between turns). [`crate::compaction::compact`] writes the whole
/// transaction; these builders are for a summarizer that runs elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionStart {
    pub(super) compaction_id: String,
    pub(super) at: Option<i64>,
}

impl CompactionStart {
    /// The start of compaction `compaction_id`.
    pub fn new(compaction_id: impl Into<String>) -> Self {
        CompactionStart {
            compaction_id: compaction_id.into(),
            at: None,
        }
    }
}

impl BuildEvent for CompactionStart {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let data = ObjectWriter::new()
            .string("compactionId", &self.compaction_id)
            .raw("turn", &compaction_turn(position))
            .finish();
        Ok(EventInput::new(
            "compaction/start",
            position.time(self.at),
            data,
        ))
    }
}

/// `compaction/end {compactionId, turn, error?}`: releases the compaction lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionEnd {
    pub(super) compaction_id: String,
    pub(super) error: Option<String>,
    pub(super) at: Option<i64>,
}

impl CompactionEnd {
    /// A successful end of compaction `compaction_id`.
    pub fn new(compaction_id: impl Into<String>) -> Self {
        CompactionEnd {
            compaction_id: compaction_id.into(),
            error: None,
            at: None,
        }
    }

    /// A failed compaction, with what went wrong.
    pub fn failed(compaction_id: impl Into<String>, error: impl Into<String>) -> Self {
        CompactionEnd {
            error: Some(error.into()),
            ..Self::new(compaction_id)
        }
    }
}

impl BuildEvent for CompactionEnd {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let mut data = ObjectWriter::new()
            .string("compactionId", &self.compaction_id)
            .raw("turn", &compaction_turn(position));
        if let Some(error) = &self.error {
            data = data.string("error", error);
        }
        Ok(EventInput::new(
            "compaction/end",
            position.time(self.at),
            data.finish(),
        ))
    }
}

/// `compaction/summary`: the summary and its provenance (`shadowedRange`, `shadowedSeqs`,
/// `shadowedTokenCount`, the summarizing `provider` and `model`, `usage?`). The summary
/// message itself is a [`SummaryMessage`] appended right after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionSummary {
    pub(super) compaction_id: String,
    pub(super) summary: String,
    pub(super) shadowed_seqs: Vec<Seq>,
    pub(super) shadowed_token_count: u64,
    pub(super) provider: String,
    pub(super) model: String,
    pub(super) usage: Option<Usage>,
    pub(super) at: Option<i64>,
}

impl CompactionSummary {
    /// The summary `summary` of the surface nodes `shadowed_seqs` (in surface order), which
    /// held `shadowed_token_count` tokens, written by `model` of `provider`.
    pub fn new(
        compaction_id: impl Into<String>,
        summary: impl Into<String>,
        shadowed_seqs: Vec<Seq>,
        shadowed_token_count: u64,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        CompactionSummary {
            compaction_id: compaction_id.into(),
            summary: summary.into(),
            shadowed_seqs,
            shadowed_token_count,
            provider: provider.into(),
            model: model.into(),
            usage: None,
            at: None,
        }
    }

    /// Records the summarizing request's usage.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

impl BuildEvent for CompactionSummary {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (Some(first), Some(last)) = (self.shadowed_seqs.first(), self.shadowed_seqs.last())
        else {
            return Err(position.refuse(
                "compaction/summary",
                Rule::Payload,
                "a summary shadows at least one surface node",
            ));
        };
        let range = ObjectWriter::new()
            .int("start", int(first.get()))
            .int("end", int(last.get()))
            .finish();
        let mut data = ObjectWriter::new()
            .string("compactionId", &self.compaction_id)
            .raw("summary", &blocks_json(&[Block::Text(self.summary)]))
            .raw("shadowedRange", &range)
            .raw("shadowedSeqs", &seqs_json(&self.shadowed_seqs))
            .int("shadowedTokenCount", int(self.shadowed_token_count))
            .string("provider", &self.provider)
            .string("model", &self.model);
        if let Some(usage) = &self.usage {
            data = data.raw("usage", &usage_json(usage));
        }
        Ok(EventInput::new(
            "compaction/summary",
            position.time(self.at),
            data.finish(),
        ))
    }
}

/// The `user/message` that replaces the shadowed surface nodes with a summary
/// (`surfaceOp {op:"replace", start, end}`, `sourceEventSeqs` citing the compaction's start,
/// its summary event and every shadowed node, `source {kind:"plugin", plugin:"compact",
/// compactionId}`, content DSH's preamble, the summary and the closing tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryMessage {
    pub(super) compaction_id: String,
    pub(super) text: String,
    pub(super) shadowed_seqs: Vec<Seq>,
    pub(super) cited: Vec<Seq>,
    pub(super) id: Option<String>,
    pub(super) at: Option<i64>,
}

impl SummaryMessage {
    /// The summary `text` of compaction `compaction_id`, replacing `shadowed_seqs` (the
    /// current surface nodes from the first to the last, in surface order). `cited` are
    /// the compaction's own events (its `compaction/start` and `compaction/summary` seqs).
    pub fn new(
        compaction_id: impl Into<String>,
        text: impl Into<String>,
        shadowed_seqs: Vec<Seq>,
        cited: Vec<Seq>,
    ) -> Self {
        SummaryMessage {
            compaction_id: compaction_id.into(),
            text: text.into(),
            shadowed_seqs,
            cited,
            id: None,
            at: None,
        }
    }
}

impl BuildEvent for SummaryMessage {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (Some(&start), Some(&end)) = (self.shadowed_seqs.first(), self.shadowed_seqs.last())
        else {
            return Err(position.refuse(
                "user/message",
                Rule::ReplaceRange,
                "a summary replaces at least one surface node",
            ));
        };
        let data = summary_message_data(&self.compaction_id, self.id.as_deref(), &[self.text]);
        let mut sources = self.cited;
        sources.extend(self.shadowed_seqs);
        Ok(
            EventInput::new("user/message", position.time(self.at), data)
                .with_surface_op(SurfaceOp::Replace { start, end })
                .with_sources(sources),
        )
    }
}
