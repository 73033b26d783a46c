//! The summary compaction transaction: lock, summary with provenance, replacement, end.

use super::policy::{active_turn, select_range, CompactionPolicy, SkipReason};
use super::summarizer::{Summarizer, SummarizerError, Summary, SummaryRequest};
use super::SessionSource;
use crate::build::{saturating_i64, seqs_json, usage_json};
use crate::error::Error;
use crate::event::{EventInput, Seq, SurfaceOp};
use crate::json::{write_js_string, JsonRef, ObjectWriter};
use crate::tokens::TokenProjection;

/// The fixed text that opens every summary message (DSH's wording, so the model sees the
/// same checkpoint whichever engine wrote it).
pub const SUMMARY_PREAMBLE: &str = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n<compacted-summary>";

const SUMMARY_CLOSE: &str = "</compacted-summary>";

/// Caller-supplied identity and time of a compaction (this crate reads no clock and makes
/// no ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionContext {
    /// The compaction's id (DSH uses a UUID).
    pub compaction_id: String,
    /// The replacement message's id; `compaction-<compaction_id>` when `None`.
    pub message_id: Option<String>,
    /// Epoch milliseconds for every event written.
    pub time: i64,
}

impl CompactionContext {
    /// A context with the default message id.
    pub fn new(compaction_id: impl Into<String>, time: i64) -> Self {
        CompactionContext {
            compaction_id: compaction_id.into(),
            message_id: None,
            time,
        }
    }
}

/// A planned compaction: which nodes it shadows, and the seqs its events will take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    /// The shadowed surface nodes, in surface order.
    pub shadowed: Vec<Seq>,
    /// Their summed cached estimates (written as `shadowedTokenCount`).
    pub shadowed_tokens: u64,
    /// The seq `compaction/start` takes; the summary, replacement and end follow it.
    pub start_seq: Seq,
    /// The active turn, or `None` between turns (written as `turn`).
    pub turn: Option<i64>,
    messages: Vec<String>,
    previous_summaries: Vec<String>,
}

/// A successful compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    /// The four events to append in order: start, summary, replacement, end.
    pub events: Vec<EventInput>,
    /// The shadowed nodes.
    pub shadowed: Vec<Seq>,
    /// Their estimate.
    pub shadowed_tokens: u64,
    /// The replacement message's estimate.
    pub summary_tokens: u64,
    /// Summarizer calls made.
    pub attempts: u32,
}

/// What [`compact`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionOutcome {
    /// Nothing to do.
    Skipped(SkipReason),
    /// The transaction's events.
    Compacted(CompactionReport),
    /// The summarizer failed or never got below the shadowed size: append `events`
    /// (start, then an end carrying `error`) so the attempt is on record.
    Failed {
        /// Start and error end.
        events: Vec<EventInput>,
        /// Why.
        error: String,
        /// Summarizer calls made.
        attempts: u32,
    },
}

pub(crate) fn stale(
    projection: &TokenProjection,
    session: &dyn SessionSource,
) -> Result<(), Error> {
    let next = session.state().next_seq().get();
    if projection.next_seq() != next {
        return Err(Error::SeqMismatch {
            expected: Seq(next),
            got: Seq(projection.next_seq()),
        });
    }
    Ok(())
}

/// Plans a compaction of `session` under `policy` (the trigger is not checked here; see
/// [`CompactionPolicy::should_compact`]). `projection` must have folded every event of
/// the session.
pub fn plan_compaction(
    session: &dyn SessionSource,
    projection: &TokenProjection,
    policy: &CompactionPolicy,
) -> Result<Result<CompactionPlan, SkipReason>, Error> {
    stale(projection, session)?;
    let selection = match select_range(session, projection, policy)? {
        Ok(selection) => selection,
        Err(skip) => return Ok(Err(skip)),
    };
    Ok(Ok(CompactionPlan {
        shadowed: selection.shadowed,
        shadowed_tokens: selection.shadowed_tokens,
        start_seq: session.state().next_seq(),
        turn: active_turn(session),
        messages: selection.messages,
        previous_summaries: selection.previous_summaries,
    }))
}

/// The summary text of an earlier summary message: its blocks between the preamble and
/// the closing tag.
pub(crate) fn summary_text(message: JsonRef<'_>) -> String {
    let blocks: Vec<String> = message
        .get("content")
        .iter()
        .flat_map(|c| c.elements())
        .filter_map(|b| {
            b.get("text")
                .and_then(|t| t.as_str())
                .map(|t| t.into_owned())
        })
        .collect();
    let inner = match blocks.as_slice() {
        [_, middle @ .., _] => middle.to_vec(),
        other => other.to_vec(),
    };
    inner.join("\n")
}

/// The payload of a summary's replacement `user/message`: DSH's preamble, the summary
/// blocks and the closing tag as text blocks, `source {kind:"plugin", plugin:"compact",
/// compactionId}`, id `compaction-<compactionId>` unless `message_id` is given.
pub(crate) fn summary_message_data(
    compaction_id: &str,
    message_id: Option<&str>,
    summary_blocks: &[String],
) -> String {
    let mut blocks = vec![text_block(SUMMARY_PREAMBLE)];
    blocks.extend(summary_blocks.iter().map(|b| text_block(b)));
    blocks.push(text_block(SUMMARY_CLOSE));
    let source = ObjectWriter::new()
        .string("kind", "plugin")
        .string("plugin", "compact")
        .string("compactionId", compaction_id)
        .finish();
    let message_id =
        message_id.map_or_else(|| format!("compaction-{compaction_id}"), str::to_owned);
    ObjectWriter::new()
        .raw("content", &format!("[{}]", blocks.join(",")))
        .raw("source", &source)
        .string("role", "user")
        .string("id", &message_id)
        .finish()
}

fn text_block(text: &str) -> String {
    let mut out = String::from("{\"type\":\"text\",\"text\":");
    write_js_string(&mut out, text);
    out.push('}');
    out
}

impl CompactionPlan {
    fn turn_json(&self) -> String {
        self.turn
            .map_or_else(|| "null".to_owned(), |t| t.to_string())
    }

    fn range(&self) -> (Seq, Seq) {
        (
            self.shadowed.first().copied().unwrap_or_default(),
            self.shadowed.last().copied().unwrap_or_default(),
        )
    }

    /// The request handed to the summarizer.
    pub fn summary_request<'a>(
        &'a self,
        context: &'a CompactionContext,
        attempt: u32,
    ) -> SummaryRequest<'a> {
        SummaryRequest {
            compaction_id: &context.compaction_id,
            messages: self.messages.iter().map(String::as_str).collect(),
            previous_summaries: self.previous_summaries.clone(),
            shadowed_tokens: self.shadowed_tokens,
            // The preamble, the tags and the message overhead cost tokens too; leave
            // room for them so a summary inside the budget is smaller than the span.
            max_summary_tokens: self.shadowed_tokens.saturating_sub(80).max(1),
            attempt,
        }
    }

    /// `compaction/start`, the lock (seq [`CompactionPlan::start_seq`]).
    pub fn start_event(&self, context: &CompactionContext) -> EventInput {
        let data = ObjectWriter::new()
            .string("compactionId", &context.compaction_id)
            .raw("turn", &self.turn_json())
            .finish();
        let mut event = EventInput::new("compaction/start", context.time, data);
        event.seq = Some(self.start_seq);
        event
    }

    /// The `compaction/end` that closes a failed attempt (seq `start_seq + 1`).
    pub fn failure_event(&self, context: &CompactionContext, error: &str) -> EventInput {
        let data = ObjectWriter::new()
            .string("compactionId", &context.compaction_id)
            .raw("turn", &self.turn_json())
            .string("error", error)
            .finish();
        let mut event = EventInput::new("compaction/end", context.time, data);
        event.seq = Some(self.start_seq + 1);
        event
    }

    /// The replacement `user/message` for `summary` (seq `start_seq + 2`).
    pub fn replacement_event(&self, context: &CompactionContext, summary: &Summary) -> EventInput {
        let data = summary_message_data(
            &context.compaction_id,
            context.message_id.as_deref(),
            &summary.blocks,
        );
        let (start, end) = self.range();
        let mut sources = vec![self.start_seq, self.start_seq + 1];
        sources.extend_from_slice(&self.shadowed);
        let mut event = EventInput::new("user/message", context.time, data)
            .with_surface_op(SurfaceOp::Replace { start, end })
            .with_sources(sources);
        event.seq = Some(self.start_seq + 2);
        event
    }

    /// Summary, replacement and end for an accepted `summary` (seqs `start_seq + 1..=3`);
    /// append them after [`CompactionPlan::start_event`].
    pub fn finish(&self, context: &CompactionContext, summary: &Summary) -> Vec<EventInput> {
        let (start, end) = self.range();
        let summary_blocks: Vec<String> = summary.blocks.iter().map(|b| text_block(b)).collect();
        let mut writer = ObjectWriter::new()
            .string("compactionId", &context.compaction_id)
            .raw("summary", &format!("[{}]", summary_blocks.join(",")))
            .raw(
                "shadowedRange",
                &ObjectWriter::new()
                    .int("start", saturating_i64(start.get()))
                    .int("end", saturating_i64(end.get()))
                    .finish(),
            )
            .raw("shadowedSeqs", &seqs_json(&self.shadowed))
            .int("shadowedTokenCount", saturating_i64(self.shadowed_tokens))
            .string("provider", &summary.provider)
            .string("model", &summary.model);
        if let Some(max) = summary.max_tokens {
            writer = writer.int("maxTokens", saturating_i64(max));
        }
        if let Some(usage) = &summary.usage {
            writer = writer.raw("usage", &usage_json(usage));
        }
        let mut summary_event =
            EventInput::new("compaction/summary", context.time, writer.finish());
        summary_event.seq = Some(self.start_seq + 1);
        let end_data = ObjectWriter::new()
            .string("compactionId", &context.compaction_id)
            .raw("turn", &self.turn_json())
            .finish();
        let mut end_event = EventInput::new("compaction/end", context.time, end_data);
        end_event.seq = Some(self.start_seq + 3);
        vec![
            summary_event,
            self.replacement_event(context, summary),
            end_event,
        ]
    }

    /// The replacement message's estimate under `projection`'s counter.
    pub fn summary_tokens(
        &self,
        projection: &TokenProjection,
        context: &CompactionContext,
        summary: &Summary,
    ) -> u64 {
        let replacement = self.replacement_event(context, summary);
        u64::from(projection.estimate_message(JsonRef::new(&replacement.data)))
    }
}

/// Plans and runs one compaction: the summarizer is called (at most
/// `policy.max_attempts` times) and a summary is accepted only when its replacement
/// message is estimated smaller than the nodes it shadows. Returns the events to append;
/// nothing is appended here.
pub fn compact(
    session: &dyn SessionSource,
    projection: &TokenProjection,
    policy: &CompactionPolicy,
    summarizer: &mut dyn Summarizer,
    context: &CompactionContext,
) -> Result<CompactionOutcome, Error> {
    let plan = match plan_compaction(session, projection, policy)? {
        Ok(plan) => plan,
        Err(skip) => return Ok(CompactionOutcome::Skipped(skip)),
    };
    // A foreseeable failure is not tried: when even an empty summary is not smaller than
    // the span, no summarizer can help and no lock should be written.
    let summary_floor_tokens = plan.summary_tokens(projection, context, &Summary::empty());
    if summary_floor_tokens >= plan.shadowed_tokens {
        return Ok(CompactionOutcome::Skipped(
            SkipReason::SummaryCannotBeSmaller {
                shadowed_tokens: plan.shadowed_tokens,
                summary_floor_tokens,
            },
        ));
    }
    let mut error = String::from("the summarizer was not called");
    let attempts = policy.max_attempts.max(1);
    for attempt in 1..=attempts {
        let request = plan.summary_request(context, attempt);
        match summarizer.summarize(&request) {
            Ok(summary) => {
                let summary_tokens = plan.summary_tokens(projection, context, &summary);
                if summary_tokens < plan.shadowed_tokens {
                    let mut events = vec![plan.start_event(context)];
                    events.extend(plan.finish(context, &summary));
                    return Ok(CompactionOutcome::Compacted(CompactionReport {
                        events,
                        shadowed: plan.shadowed.clone(),
                        shadowed_tokens: plan.shadowed_tokens,
                        summary_tokens,
                        attempts: attempt,
                    }));
                }
                error = format!(
                    "summary not smaller than what it shadows ({summary_tokens} >= {} estimated tokens)",
                    plan.shadowed_tokens
                );
            }
            Err(SummarizerError(message)) => error = format!("summarizer failed: {message}"),
        }
    }
    Ok(CompactionOutcome::Failed {
        events: vec![
            plan.start_event(context),
            plan.failure_event(context, &error),
        ],
        error,
        attempts,
    })
}
