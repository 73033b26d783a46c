//! `tokens` and `compact`.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use sessionlog::session::compaction::{
    self, CompactionContext, CompactionOutcome, CompactionPolicy, DeterministicSummarizer,
    KeepRecent, PruneOptions, SkipReason, Summarizer, SummarizerError, Summary, SummaryRequest,
};
use sessionlog::session::tokens::{
    HeuristicCounter, Label, TokenCounter, TokenFigure, UnreadableUsage,
};
use sessionlog::Access;

use crate::{open_store, out, Failure};

fn label(l: &Label) -> String {
    match l {
        Label::Exact => "exact".into(),
        Label::Estimated { counter } => format!("estimated ({counter})"),
    }
}

fn figure(f: &TokenFigure) -> serde_json::Value {
    serde_json::json!({"tokens": f.tokens, "label": label(&f.label)})
}

pub(crate) fn tokens(dir: &Path, name: &str, json: bool) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let projection = store.tokens(name, counter)?;
    let view = projection.view();
    let ledger = projection.ledger();
    let p = &view.pressure;
    let mut w = io::stdout().lock();
    if let Some(warning) = unreadable_warning(ledger.unreadable()) {
        eprintln!("sessionlog: warning: {warning}");
    }
    if json {
        let requests: Vec<serde_json::Value> = ledger
            .requests()
            .iter()
            .map(|r| {
                serde_json::json!({
                    "seq": r.seq.get(), "kind": format!("{:?}", r.kind), "model": &*r.model,
                    "input": r.usage.input, "output": r.usage.output, "cacheRead": r.usage.cache_read,
                    "cacheWrite": r.usage.cache_write, "reasoning": r.usage.reasoning, "label": "exact",
                    "shape": r.shape.name(),
                })
            })
            .collect();
        let unreadable: Vec<serde_json::Value> = ledger
            .unreadable()
            .iter()
            .map(|u| serde_json::json!({"seq": u.seq.get(), "kind": format!("{:?}", u.kind), "keys": u.keys}))
            .collect();
        let cumulative = ledger.cumulative();
        let v = serde_json::json!({
            "session": name,
            "requests": requests,
            "unreadableUsage": unreadable,
            "cumulative": {"requests": cumulative.requests(), "prompt": figure(&cumulative.prompt_tokens()), "output": figure(&cumulative.output_tokens()), "total": figure(&cumulative.total_tokens())},
            "surface": {"nodes": view.surface_nodes, "estimate": figure(&view.surface_estimate)},
            "envelope": figure(&view.envelope_estimate),
            "pressure": {
                "estimatedPromptTokens": figure(&p.estimated_prompt_tokens),
                "anchoredOnSeq": p.anchored_on.map(|s| s.get()),
                "anchorPromptTokens": p.anchor_prompt_tokens.as_ref().map(figure),
                "estimatedDeltaSinceAnchor": p.estimated_delta_since_anchor,
                "contextWindow": p.context_window,
                "ratio": p.ratio,
            },
        });
        out(&mut w, format!("{v}\n").as_bytes())?;
        return Ok(0);
    }
    let cumulative = ledger.cumulative();
    let mut text = format!("session {name}\n");
    text += &format!(
        "exact usage: {} requests, prompt {} / output {} / total {} tokens (provider-reported)\n",
        cumulative.requests(),
        cumulative.prompt_tokens().tokens,
        cumulative.output_tokens().tokens,
        cumulative.total_tokens().tokens
    );
    if let Some(last) = &view.last_request {
        text += &format!(
            "last request (seq {}): prompt {} / output {} tokens (exact, per request)\n",
            last.seq.get(),
            last.usage.prompt_tokens(),
            last.usage.output
        );
    }
    text += &format!(
        "surface: {} nodes, {} tokens {}\n",
        view.surface_nodes,
        view.surface_estimate.tokens,
        label(&view.surface_estimate.label)
    );
    text += &format!(
        "next request: ~{} prompt tokens {}",
        p.estimated_prompt_tokens.tokens,
        label(&p.estimated_prompt_tokens.label)
    );
    if let Some(seq) = p.anchored_on {
        text += &format!(
            ", anchored on the exact usage of seq {} {:+}",
            seq.get(),
            p.estimated_delta_since_anchor
        );
    }
    text.push('\n');
    match (p.context_window, p.ratio) {
        (Some(window), Some(ratio)) => {
            text += &format!(
                "context window: {window} tokens, pressure {:.1}%\n",
                ratio * 100.0
            )
        }
        _ => text += "context window: unknown (no request/context)\n",
    }
    out(&mut w, text.as_bytes())?;
    w.flush()?;
    Ok(0)
}

/// One line saying which usage records could not be read, so a total that leaves them
/// out is not taken for the whole.
fn unreadable_warning(unreadable: &[UnreadableUsage]) -> Option<String> {
    let first = unreadable.first()?;
    let keys = if first.keys.is_empty() {
        "not an object".to_owned()
    } else {
        format!("keys {}", first.keys.join(", "))
    };
    Some(format!(
        "{} usage record(s) in no known shape are left out of the exact totals (first: seq {}, {keys}); known shapes: DSH, Anthropic, OpenAI chat and responses, DeepSeek, Gemini",
        unreadable.len(),
        first.seq.get()
    ))
}

/// A summarizer that returns the text of a file.
struct FileSummarizer(String);

impl Summarizer for FileSummarizer {
    fn summarize(&mut self, _request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        Ok(Summary {
            blocks: vec![self.0.clone()],
            provider: "user".into(),
            model: "summary-file".into(),
            usage: None,
            max_tokens: None,
        })
    }
}

pub(crate) fn compact(
    dir: &Path,
    name: &str,
    keep_tokens: Option<u64>,
    prune_over: Option<usize>,
    summary_file: Option<&Path>,
) -> Result<u8, Failure> {
    // Everything that can refuse is checked before anything is written.
    let mut summarizer: Box<dyn Summarizer> = match summary_file {
        Some(path) => Box::new(FileSummarizer(
            std::fs::read_to_string(path)
                .map_err(|e| Failure::new(2, format!("reading {}: {e}", path.display())))?,
        )),
        None => Box::new(DeterministicSummarizer::new()),
    };
    let store = open_store(dir, Access::Existing)?;
    let mut handle = store.open_session_as_is(name)?;
    if handle.has_open_compaction() {
        return Err(Failure::new(
            3,
            format!(
                "session {name:?} has a compaction left open by an earlier writer; run `sessionlog open --store {} --session {name}` to close it first",
                dir.display()
            ),
        ));
    }
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut w = io::stdout().lock();
    let mut pruned = 0;
    if let Some(threshold) = prune_over {
        pruned = handle.prune(
            &PruneOptions::default().with_threshold_bytes(threshold),
            counter.clone(),
            now,
        )?;
        out(
            &mut w,
            format!("pruned {pruned} tool results over {threshold} bytes\n").as_bytes(),
        )?;
    }
    let policy = CompactionPolicy::default()
        .with_keep_recent(keep_tokens.map_or(KeepRecent::Fraction(0.25), KeepRecent::Tokens));
    let projection = handle.tokens(counter)?;
    let context = CompactionContext::new(format!("{name}-{}", handle.next_seq().get()), now);
    // Both summarizers here are local and deterministic, so a summary that is refused
    // would be refused again: the attempt is not put on record, nothing is written.
    let outcome = compaction::compact(
        &handle.source(),
        &projection,
        &policy,
        summarizer.as_mut(),
        &context,
    )
    .map_err(sessionlog::Error::from)?;
    let report = match outcome {
        CompactionOutcome::Compacted(report) => report,
        CompactionOutcome::Skipped(reason) if pruned > 0 => {
            out(&mut w, format!("nothing compacted: {reason}\n").as_bytes())?;
            return Ok(0);
        }
        CompactionOutcome::Skipped(reason) => {
            let hint = match reason {
                SkipReason::NothingToCompact | SkipReason::SummaryCannotBeSmaller { .. }
                    if keep_tokens != Some(0) =>
                {
                    "; a smaller --keep-tokens lets more of the recent surface be summarized"
                }
                _ => "",
            };
            return Err(Failure::new(
                3,
                format!("nothing compacted and nothing written: {reason}{hint}"),
            ));
        }
        CompactionOutcome::Failed {
            error, attempts, ..
        } => {
            return Err(Failure::new(
                3,
                format!("compaction refused after {attempts} attempt(s), nothing written: {error}"),
            ));
        }
    };
    handle.append_atomic(report.events.clone())?;
    handle.commit()?;
    let line = format!(
        "compacted: {} surface nodes ({} estimated tokens) replaced by a summary of {} estimated tokens in {} attempt(s); originals kept in the log\n",
        report.shadowed.len(),
        report.shadowed_tokens,
        report.summary_tokens,
        report.attempts
    );
    out(&mut w, line.as_bytes())?;
    Ok(0)
}
