//! Exact accounting: provider-reported usage folded into a per-session ledger.
//!
//! Usage is read in any [`UsageShape`] (DSH's own and the common provider conventions) into
//! the same disjoint buckets; usage in no known shape is kept as [`UnreadableUsage`] so a
//! report can say it left it out instead of showing 0.
//!
//! DSH records usage as `{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?,
//! reasoningTokens?}` on each `assistant/message` settlement (the `usage` chunk of the
//! stream repeats it; only the settlement is counted so nothing is counted twice) and on
//! `compaction/summary` for the summarizer's own request. The buckets are read as
//! disjoint: `inputTokens` is the uncached part of the prompt (the corpus has many records
//! whose `cacheReadTokens` exceeds `inputTokens`), so the prompt is
//! `input + cache_read + cache_write`. `reasoningTokens` is shown as its own bucket but not
//! added to [`Usage::total_tokens`]: in every corpus record it is at most `outputTokens`,
//! consistent with providers that report reasoning as a part of the completion, so adding
//! it would risk counting it twice.

use std::sync::Arc;

use super::TokenFigure;
use crate::event::{Event, Seq};
use crate::json::JsonRef;

/// The version of [`UsageLedger`]'s state; a persisted state with another version is
/// rebuilt from the log.
pub const USAGE_LEDGER_STATE_VERSION: u32 = 3;

/// One provider usage record, bucket by bucket (all exact).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    /// Uncached prompt tokens (`inputTokens`).
    pub input: u64,
    /// Completion tokens (`outputTokens`).
    pub output: u64,
    /// Prompt tokens served from the provider's cache (`cacheReadTokens`).
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache (`cacheWriteTokens`).
    pub cache_write: u64,
    /// Reasoning tokens as reported (`reasoningTokens`); see the module docs.
    pub reasoning: u64,
}

/// The convention a usage object was written in. Each is read into the same disjoint
/// buckets: `input` never includes cached prompt tokens, so `prompt = input + cache_read +
/// cache_write` whichever shape the provider used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UsageShape {
    /// DSH: `inputTokens`, `outputTokens`, `cacheReadTokens`, `cacheWriteTokens`,
    /// `reasoningTokens` (input excludes the cached buckets).
    Dsh,
    /// Anthropic Messages: `input_tokens`, `output_tokens`, `cache_read_input_tokens`,
    /// `cache_creation_input_tokens` (input excludes the cached buckets).
    Anthropic,
    /// OpenAI Chat Completions: `prompt_tokens` (cached included),
    /// `completion_tokens`, `prompt_tokens_details.cached_tokens`,
    /// `completion_tokens_details.reasoning_tokens`.
    OpenAiChat,
    /// OpenAI Responses: `input_tokens` (cached included), `output_tokens`,
    /// `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`.
    OpenAiResponses,
    /// DeepSeek: `prompt_tokens` = `prompt_cache_hit_tokens` + `prompt_cache_miss_tokens`,
    /// `completion_tokens`, `completion_tokens_details.reasoning_tokens`.
    DeepSeek,
    /// Gemini: `promptTokenCount` (cached included), `candidatesTokenCount`,
    /// `cachedContentTokenCount`, `thoughtsTokenCount` (billed beside the candidates, so
    /// it is added to the output and also shown as the reasoning bucket).
    Gemini,
}

impl UsageShape {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            UsageShape::Dsh => "dsh",
            UsageShape::Anthropic => "anthropic",
            UsageShape::OpenAiChat => "openai-chat",
            UsageShape::OpenAiResponses => "openai-responses",
            UsageShape::DeepSeek => "deepseek",
            UsageShape::Gemini => "gemini",
        }
    }
}

/// A bucket of a usage object: `key`, or `key.nested` when `nested` is given. Absent or
/// not a non-negative safe integer reads as 0.
fn bucket(usage: JsonRef<'_>, key: &str, nested: Option<&str>) -> u64 {
    let value = usage.get(key);
    let value = match nested {
        Some(inner) => value.and_then(|v| v.get(inner)),
        None => value,
    };
    value.and_then(|v| v.as_seq()).unwrap_or(0)
}

impl Usage {
    /// Reads a usage object in any [`UsageShape`]; `None` when it is not an object or has
    /// none of the keys of a known shape (the caller should say so rather than count 0).
    pub fn read(usage: JsonRef<'_>) -> Option<(Usage, UsageShape)> {
        if !usage.is_object() {
            return None;
        }
        // DSH's own shape, the one its sessions hold, is read in one pass over the members.
        let [input, output, cache_read, cache_write, reasoning] = usage.fields([
            "inputTokens",
            "outputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
            "reasoningTokens",
        ]);
        if input.is_some() || output.is_some() {
            let count = |value: Option<JsonRef<'_>>| value.and_then(|v| v.as_seq()).unwrap_or(0);
            return Some((
                Usage {
                    input: count(input),
                    output: count(output),
                    cache_read: count(cache_read),
                    cache_write: count(cache_write),
                    reasoning: count(reasoning),
                },
                UsageShape::Dsh,
            ));
        }
        let has = |key: &str| usage.get(key).is_some();
        let b = |key: &str| bucket(usage, key, None);
        let nested = |key: &str, inner: &str| bucket(usage, key, Some(inner));
        if has("prompt_cache_hit_tokens") || has("prompt_cache_miss_tokens") {
            let hit = b("prompt_cache_hit_tokens");
            return Some((
                Usage {
                    input: b("prompt_tokens").saturating_sub(hit),
                    output: b("completion_tokens"),
                    cache_read: hit,
                    cache_write: 0,
                    reasoning: nested("completion_tokens_details", "reasoning_tokens"),
                },
                UsageShape::DeepSeek,
            ));
        }
        if has("prompt_tokens") || has("completion_tokens") {
            let cached = nested("prompt_tokens_details", "cached_tokens");
            return Some((
                Usage {
                    input: b("prompt_tokens").saturating_sub(cached),
                    output: b("completion_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                    reasoning: nested("completion_tokens_details", "reasoning_tokens"),
                },
                UsageShape::OpenAiChat,
            ));
        }
        if has("input_tokens_details") || has("output_tokens_details") {
            let cached = nested("input_tokens_details", "cached_tokens");
            return Some((
                Usage {
                    input: b("input_tokens").saturating_sub(cached),
                    output: b("output_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                    reasoning: nested("output_tokens_details", "reasoning_tokens"),
                },
                UsageShape::OpenAiResponses,
            ));
        }
        if has("input_tokens") || has("output_tokens") {
            return Some((
                Usage {
                    input: b("input_tokens"),
                    output: b("output_tokens"),
                    cache_read: b("cache_read_input_tokens"),
                    cache_write: b("cache_creation_input_tokens"),
                    reasoning: 0,
                },
                UsageShape::Anthropic,
            ));
        }
        if has("promptTokenCount") || has("candidatesTokenCount") {
            let cached = b("cachedContentTokenCount");
            let thoughts = b("thoughtsTokenCount");
            return Some((
                Usage {
                    input: b("promptTokenCount").saturating_sub(cached),
                    output: b("candidatesTokenCount").saturating_add(thoughts),
                    cache_read: cached,
                    cache_write: 0,
                    reasoning: thoughts,
                },
                UsageShape::Gemini,
            ));
        }
        None
    }

    /// Reads a usage object in any known shape (see [`Usage::read`]); `None` when it cannot.
    pub fn from_json(usage: JsonRef<'_>) -> Option<Usage> {
        Usage::read(usage).map(|(usage, _)| usage)
    }

    /// The whole prompt as the provider counted it: `input + cache_read + cache_write`.
    pub fn prompt_tokens(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// Prompt plus output (reasoning not added again; see the module docs).
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens().saturating_add(self.output)
    }

    /// Adds `other` in, field by field, saturating.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
    }
}

/// Which request a usage record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// A model call of the conversation (`assistant/message` settlement).
    Settlement,
    /// The summarizer's call of a compaction (`compaction/summary`).
    CompactionSummary,
}

/// The usage of one provider request: a per-call figure, never a running total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestUsage {
    /// The event that recorded it.
    pub seq: Seq,
    /// Which request.
    pub kind: RequestKind,
    /// The turn, when recorded.
    pub turn: Option<i64>,
    /// The step, when recorded.
    pub step: Option<i64>,
    /// The provider that reported it.
    pub provider: Arc<str>,
    /// The model that served it.
    pub model: Arc<str>,
    /// The buckets.
    pub usage: Usage,
    /// The convention the usage was written in.
    pub shape: UsageShape,
}

/// A usage object the ledger found but could not read: its figures are not in any total,
/// and a report should say so instead of showing 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableUsage {
    /// The event that recorded it.
    pub seq: Seq,
    /// Which request.
    pub kind: RequestKind,
    /// Its top-level keys (empty when it is not an object), for the report.
    pub keys: Vec<String>,
}

impl RequestUsage {
    /// This request's prompt tokens (exact).
    pub fn prompt_tokens(&self) -> TokenFigure {
        TokenFigure::exact(self.usage.prompt_tokens())
    }

    /// This request's output tokens (exact).
    pub fn output_tokens(&self) -> TokenFigure {
        TokenFigure::exact(self.usage.output)
    }
}

/// A running total over requests. Only the ledger builds one, by adding
/// [`RequestUsage`] records, so a cumulative figure cannot be mistaken for a per-call one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CumulativeUsage {
    requests: u64,
    usage: Usage,
}

impl CumulativeUsage {
    /// A total restored from a checkpoint.
    pub(crate) fn from_parts(requests: u64, usage: Usage) -> CumulativeUsage {
        CumulativeUsage { requests, usage }
    }

    /// How many requests were added.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// The summed buckets.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// Summed prompt tokens (exact).
    pub fn prompt_tokens(&self) -> TokenFigure {
        TokenFigure::exact(self.usage.prompt_tokens())
    }

    /// Summed output tokens (exact).
    pub fn output_tokens(&self) -> TokenFigure {
        TokenFigure::exact(self.usage.output)
    }

    /// Summed prompt plus output tokens (exact).
    pub fn total_tokens(&self) -> TokenFigure {
        TokenFigure::exact(self.usage.total_tokens())
    }

    fn add(&mut self, request: &RequestUsage) {
        self.requests += 1;
        self.usage.add(&request.usage);
    }
}

/// How many of the newest requests, and of the newest unreadable usage objects, a bounded
/// ledger (the one a [`SessionState`](crate::SessionState) keeps) holds besides its totals.
pub const LEDGER_RECENT: usize = 32;

/// The per-session usage ledger: a pure fold over events (`new`, [`UsageLedger::apply`],
/// accessors as the view), state version [`USAGE_LEDGER_STATE_VERSION`].
///
/// The totals, the newest settlement and the count of unreadable usage objects are always
/// exact. The records themselves are all kept by a ledger made with [`UsageLedger::new`]
/// (a report over the whole log); a bounded ledger keeps only the newest
/// [`LEDGER_RECENT`] of each, so the state of a session resumed for writing stays the
/// same size however many requests the session made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageLedger {
    requests: Vec<RequestUsage>,
    settlements: CumulativeUsage,
    auxiliary: CumulativeUsage,
    last_settlement: Option<RequestUsage>,
    unreadable: Vec<UnreadableUsage>,
    unreadable_total: u64,
    bounded: bool,
}

/// Where a [`UsageLedger`] stood; see [`UsageLedger::mark`]. Between a mark and its
/// rewind the ledger only appends (the state trims it when a change is kept), so the
/// lengths of its record lists and its totals are all a mark needs.
#[derive(Debug, Clone)]
pub(crate) struct LedgerMark {
    requests: usize,
    unreadable: usize,
    settlements: CumulativeUsage,
    auxiliary: CumulativeUsage,
    last_settlement: Option<RequestUsage>,
    unreadable_total: u64,
}

/// The newest [`LEDGER_RECENT`] of `records` when `bounded`, else all of them.
fn kept<T>(records: &[T], bounded: bool) -> &[T] {
    if bounded {
        records
            .get(records.len().saturating_sub(LEDGER_RECENT)..)
            .unwrap_or_default()
    } else {
        records
    }
}

/// Drops the records of a bounded list beyond the newest [`LEDGER_RECENT`].
fn trim_records<T>(records: &mut Vec<T>, bounded: bool) {
    if bounded && records.len() > LEDGER_RECENT {
        records.drain(..records.len() - LEDGER_RECENT);
    }
}

fn text_at(value: Option<JsonRef<'_>>, previous: Option<&Arc<str>>) -> Arc<str> {
    let text = value.and_then(|v| v.as_str()).unwrap_or_default();
    // Consecutive requests almost always name the same provider and model; share the
    // allocation so a ledger of many requests stays small.
    match previous {
        Some(p) if **p == *text => Arc::clone(p),
        _ => Arc::from(text.as_ref()),
    }
}

impl UsageLedger {
    /// An empty ledger that keeps every record.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty ledger that keeps the newest [`LEDGER_RECENT`] records of each kind.
    pub fn bounded() -> Self {
        UsageLedger {
            bounded: true,
            ..Self::default()
        }
    }

    /// Whether this ledger keeps only the newest records.
    pub fn is_bounded(&self) -> bool {
        self.bounded
    }

    /// Folds one event; returns the request it recorded, if any. Events without usage
    /// change nothing; usage in no known [`UsageShape`] is kept in
    /// [`UsageLedger::unreadable`] and counted in no total.
    pub fn apply(&mut self, event: &Event) -> Option<&RequestUsage> {
        let recorded = self.fold(event).is_some();
        self.trim();
        if recorded {
            self.requests.last()
        } else {
            None
        }
    }

    /// [`UsageLedger::apply`] without dropping the oldest records of a bounded ledger, so
    /// that a change can be taken back by truncating; [`UsageLedger::trim`] drops them.
    pub(crate) fn fold(&mut self, event: &Event) -> Option<&RequestUsage> {
        let (kind, usage, provider, model, turn, step) = match event.event_type() {
            "assistant/message" => {
                let [usage, turn, step] = event.data_fields(["usage", "turn", "step"]);
                let [source] = event.message_fields(["source"]);
                let [provider, model] = source
                    .map(|s| s.fields(["provider", "model"]))
                    .unwrap_or_default();
                (RequestKind::Settlement, usage?, provider, model, turn, step)
            }
            "compaction/summary" => {
                let [usage, provider, model, turn, step] =
                    event.data_fields(["usage", "provider", "model", "turn", "step"]);
                (
                    RequestKind::CompactionSummary,
                    usage?,
                    provider,
                    model,
                    turn,
                    step,
                )
            }
            _ => return None,
        };
        let Some((usage_read, shape)) = Usage::read(usage) else {
            let keys = usage.members().map(|(k, _)| k.into_owned()).collect();
            self.unreadable_total += 1;
            self.unreadable.push(UnreadableUsage {
                seq: event.seq(),
                kind,
                keys,
            });
            return None;
        };
        let usage = usage_read;
        let previous = self.requests.last();
        let request = RequestUsage {
            seq: event.seq(),
            kind,
            turn: turn.and_then(|t| t.as_safe_integer()),
            step: step.and_then(|t| t.as_safe_integer()),
            provider: text_at(provider, previous.map(|r| &r.provider)),
            model: text_at(model, previous.map(|r| &r.model)),
            usage,
            shape,
        };
        match kind {
            RequestKind::Settlement => {
                self.settlements.add(&request);
                self.last_settlement = Some(request.clone());
            }
            RequestKind::CompactionSummary => self.auxiliary.add(&request),
        }
        self.requests.push(request);
        self.requests.last()
    }

    /// Drops a bounded ledger's records beyond the newest [`LEDGER_RECENT`] of each list.
    pub(crate) fn trim(&mut self) {
        trim_records(&mut self.requests, self.bounded);
        trim_records(&mut self.unreadable, self.bounded);
    }

    /// A bounded ledger restored from its parts (a checkpoint): the kept records in log
    /// order, the totals, the newest settlement and the count of unreadable usage objects.
    pub(crate) fn from_parts(
        requests: Vec<RequestUsage>,
        totals: [CumulativeUsage; 2],
        last_settlement: Option<RequestUsage>,
        unreadable: Vec<UnreadableUsage>,
        unreadable_total: u64,
    ) -> UsageLedger {
        let [settlements, auxiliary] = totals;
        UsageLedger {
            requests,
            settlements,
            auxiliary,
            last_settlement,
            unreadable,
            unreadable_total,
            bounded: true,
        }
    }

    /// Where the ledger stands, for [`UsageLedger::rewind`].
    pub(crate) fn mark(&self) -> LedgerMark {
        LedgerMark {
            requests: self.requests.len(),
            unreadable: self.unreadable.len(),
            settlements: self.settlements.clone(),
            auxiliary: self.auxiliary.clone(),
            last_settlement: self.last_settlement.clone(),
            unreadable_total: self.unreadable_total,
        }
    }

    /// Takes back everything folded since `mark` was taken: the ledger only appended
    /// since, so truncating and restoring the totals is exact.
    pub(crate) fn rewind(&mut self, mark: LedgerMark) {
        self.requests.truncate(mark.requests);
        self.unreadable.truncate(mark.unreadable);
        self.settlements = mark.settlements;
        self.auxiliary = mark.auxiliary;
        self.last_settlement = mark.last_settlement;
        self.unreadable_total = mark.unreadable_total;
    }

    /// Usage objects found in no known shape, in log order: all of them, or the newest
    /// [`LEDGER_RECENT`] in a bounded ledger (see [`UsageLedger::unreadable_count`]).
    pub fn unreadable(&self) -> &[UnreadableUsage] {
        kept(&self.unreadable, self.bounded)
    }

    /// How many usage objects were found in no known shape, kept or not.
    pub fn unreadable_count(&self) -> u64 {
        self.unreadable_total
    }

    /// The requests, in log order: every one, or the newest [`LEDGER_RECENT`] in a bounded
    /// ledger (the totals count them all).
    pub fn requests(&self) -> &[RequestUsage] {
        kept(&self.requests, self.bounded)
    }

    /// The newest conversation request (the anchor for context pressure).
    pub fn last_settlement(&self) -> Option<&RequestUsage> {
        self.last_settlement.as_ref()
    }

    /// The total over conversation requests.
    pub fn settlements(&self) -> &CumulativeUsage {
        &self.settlements
    }

    /// The total over auxiliary requests (compaction summaries).
    pub fn auxiliary(&self) -> &CumulativeUsage {
        &self.auxiliary
    }

    /// The total over every request.
    pub fn cumulative(&self) -> CumulativeUsage {
        let mut all = self.settlements.clone();
        all.requests += self.auxiliary.requests;
        all.usage.add(&self.auxiliary.usage);
        all
    }
}
