//! `stats --session` and `tools`: the shipped projections of one session, read from their
//! checkpoints plus the events after them (folded from the whole log when no checkpoint
//! can be used; a read-only command writes none).

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};
use sessionlog::projection::{SessionStats, Stats, StoreTotals, ToolAudit, ToolCalls, Totals};
use sessionlog::session::tokens::Usage;
use sessionlog::{Access, CacheUse, Projected, Store, StoreProjected};

use crate::{open_store, out, Failure};

/// How a projection was built, for `--json` and stderr-free reports.
fn cache_json(cache: &CacheUse) -> Value {
    match cache {
        CacheUse::Hit { folded } => json!({"checkpoint": true, "foldedAfter": folded}),
        CacheUse::Rebuilt(why) => json!({"checkpoint": false, "why": why.to_string()}),
        CacheUse::Disabled => json!({"checkpoint": false, "why": "disabled"}),
    }
}

pub(crate) fn stats(dir: &Path, name: &str, json_out: bool) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let p: Projected<SessionStats> = store.projection::<Stats>(Stats::NAME, name)?;
    let s = &p.state;
    let mut w = io::BufWriter::new(io::stdout().lock());
    if json_out {
        let by_type: serde_json::Map<String, Value> = s
            .by_type
            .iter()
            .map(|(t, c)| (t.to_owned(), json!({"events": c.events, "bytes": c.bytes})))
            .collect();
        let tools: serde_json::Map<String, Value> = s
            .tools
            .iter()
            .map(|(t, c)| {
                (
                    t.clone(),
                    json!({"calls": c.calls, "results": c.results, "errors": c.errors}),
                )
            })
            .collect();
        let u = &s.usage;
        let v = json!({
            "session": name,
            "events": s.events,
            "bytes": s.bytes,
            "byType": by_type,
            "turns": s.turns,
            "turnEnds": s.turn_ends,
            "steps": s.steps,
            "replacements": s.replacements,
            "tools": tools,
            "openToolCalls": s.open_calls.len(),
            "usage": usage_json(u.requests, &u.usage, u.unreadable),
            "estimatedTokens": {
                "tokens": s.estimated_tokens,
                "label": format!("estimated ({})", s.estimate_counter()),
            },
            "firstTime": s.first_time,
            "lastTime": s.last_time,
            "cache": cache_json(&p.cache),
        });
        out(&mut w, format!("{v}\n").as_bytes())?;
        w.flush()?;
        return Ok(0);
    }
    let mut text = format!(
        "session {name}: {} events, {} record bytes\n",
        s.events, s.bytes
    );
    let ends: Vec<String> = s
        .turn_ends
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    text.push_str(&format!(
        "turns: {} (ended: {}), steps: {}, replacements: {}\n",
        s.turns,
        if ends.is_empty() {
            "none".to_owned()
        } else {
            ends.join(", ")
        },
        s.steps,
        s.replacements
    ));
    text.push_str("events by type (events, bytes):\n");
    for (t, c) in &s.by_type {
        text.push_str(&format!("  {t:<28} {:>10} {:>14}\n", c.events, c.bytes));
    }
    if !s.tools.is_empty() {
        text.push_str("tools (calls, results, errors):\n");
        for (t, c) in &s.tools {
            text.push_str(&format!(
                "  {t:<28} {:>10} {:>10} {:>10}\n",
                c.calls, c.results, c.errors
            ));
        }
    }
    let u = &s.usage;
    text.push_str(&format!(
        "usage {}\n",
        usage_text(u.requests, &u.usage, u.unreadable)
    ));
    text.push_str(&format!(
        "surface messages appended: {} tokens (estimated, {})\n",
        s.estimated_tokens,
        s.estimate_counter()
    ));
    out(&mut w, text.as_bytes())?;
    w.flush()?;
    Ok(0)
}

/// Exact provider usage as `--json` shows it.
fn usage_json(requests: u64, u: &Usage, unreadable: u64) -> Value {
    json!({
        "label": "exact",
        "requests": requests,
        "input": u.input,
        "output": u.output,
        "cacheRead": u.cache_read,
        "cacheWrite": u.cache_write,
        "reasoning": u.reasoning,
        "unreadable": unreadable,
    })
}

/// Exact provider usage as text.
fn usage_text(requests: u64, u: &Usage, unreadable: u64) -> String {
    let mut text = format!(
        "(exact, {requests} requests): input {}, output {}, cache read {}, cache write {}, reasoning {}",
        u.input, u.output, u.cache_read, u.cache_write, u.reasoning
    );
    if unreadable > 0 {
        text.push_str(&format!(
            "; usage objects in no known shape (not counted): {unreadable}"
        ));
    }
    text
}

/// The store-wide `totals` projection, as `stats` without `--session` adds it to the log's
/// figures: for `--json`, and as text.
pub(crate) fn store_totals(store: &Store) -> Result<(Value, String), Failure> {
    let p: StoreProjected<StoreTotals> = store.store_projection::<Totals>(Totals::NAME)?;
    let c = &p.total.counts;
    let models: serde_json::Map<String, Value> = c
        .models
        .iter()
        .map(|(m, u)| (m.clone(), usage_json(u.requests, &u.usage, u.unreadable)))
        .collect();
    let v = json!({
        "sessions": p.total.sessions,
        "events": c.events,
        "bytes": c.bytes,
        "turns": c.turns,
        "usageByModel": models,
        "cache": cache_json(&p.cache),
    });
    let mut text = format!(
        "totals: {} sessions, {} events, {} record bytes, {} turns\n",
        p.total.sessions, c.events, c.bytes, c.turns
    );
    for (m, u) in &c.models {
        text.push_str(&format!(
            "  usage of {m} {}\n",
            usage_text(u.requests, &u.usage, u.unreadable)
        ));
    }
    Ok((v, text))
}

pub(crate) fn tools(dir: &Path, name: &str, json_out: bool) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let p: Projected<ToolCalls> = store.projection::<ToolAudit>(ToolAudit::NAME, name)?;
    let mut w = io::BufWriter::new(io::stdout().lock());
    for c in &p.state.calls {
        let status = match &c.result {
            None => "open",
            Some(r) if r.error => "error",
            Some(_) => "ok",
        };
        let line = if json_out {
            let v = json!({
                "seq": c.seq,
                "turn": c.turn,
                "step": c.step,
                "callId": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": status,
                "resultSeq": c.result.as_ref().map(|r| r.seq),
                "durationMs": c.duration_ms(),
                "shadowedBy": c.shadowed_by,
            });
            format!("{v}\n")
        } else {
            let duration = c
                .duration_ms()
                .map_or_else(|| "-".to_owned(), |d| format!("{d} ms"));
            let shadowed = c
                .shadowed_by
                .map_or_else(String::new, |by| format!(" [result shadowed by seq {by}]"));
            format!(
                "{:>8}  {:<24} {:<5} {:>10}  [{}] {}{shadowed}\n",
                c.seq,
                c.name,
                status,
                duration,
                c.call_id,
                sessionlog::projection::transcript::abbreviate(&c.arguments, 60)
            )
        };
        out(&mut w, line.as_bytes())?;
    }
    w.flush()?;
    Ok(0)
}
