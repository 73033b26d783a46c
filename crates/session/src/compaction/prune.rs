//! The tool-result pruner: oversized results shortened to head, marker and tail.
//!
//! Each pruned result becomes two events, as DSH's pruner writes them: a
//! `compaction/prune` record (shadowed range and seq, shadowed token count) and a
//! `tool/result` replacement of that single node whose payload is the original's with only
//! `message.content[0].content` swapped, so the message id, call id, error and meta stay
//! (the session's tool-result replacement rule checks exactly this). The original stays in
//! the log.

use super::policy::protected_tool_result;
use super::SessionSource;
use super::{ceil_boundary, floor_boundary};
use crate::error::Error;
use crate::event::{EventInput, Seq, SurfaceOp};
use crate::json::{write_js_string, JsonRef, ObjectWriter};
use crate::tokens::{visible_text, TokenProjection};

/// What the pruner shortens and how much it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Results whose text exceeds this many bytes are shortened.
    pub threshold_bytes: usize,
    /// Bytes kept from the start.
    pub head_bytes: usize,
    /// Bytes kept from the end.
    pub tail_bytes: usize,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            threshold_bytes: 16 * 1024,
            head_bytes: 2 * 1024,
            tail_bytes: 1024,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `PruneOptions::default().with_...(...)`.
impl PruneOptions {
    /// Sets [`threshold_bytes`](Self::threshold_bytes).
    #[must_use]
    pub fn with_threshold_bytes(mut self, threshold_bytes: usize) -> Self {
        self.threshold_bytes = threshold_bytes;
        self
    }

    /// Sets [`head_bytes`](Self::head_bytes).
    #[must_use]
    pub fn with_head_bytes(mut self, head_bytes: usize) -> Self {
        self.head_bytes = head_bytes;
        self
    }

    /// Sets [`tail_bytes`](Self::tail_bytes).
    #[must_use]
    pub fn with_tail_bytes(mut self, tail_bytes: usize) -> Self {
        self.tail_bytes = tail_bytes;
        self
    }
}

/// Room left for the marker line, so a pruned result is always under the threshold and
/// is never pruned again.
const MARKER_ROOM: usize = 160;

/// The prune events for every current tool result over the threshold, in surface order,
/// with seqs from the session's next seq on (two per result). The active turn's newest
/// tool result is left alone: the model has not seen it yet.
pub fn prune_tool_results(
    session: &dyn SessionSource,
    projection: &TokenProjection,
    options: &PruneOptions,
    time: i64,
) -> Result<Vec<EventInput>, Error> {
    super::transaction::stale(projection, session)?;
    let budget = options.threshold_bytes.saturating_sub(MARKER_ROOM);
    let head_bytes = options.head_bytes.min(budget / 2);
    let tail_bytes = options.tail_bytes.min(budget - head_bytes);
    let nodes = session.state().surface_state().to_vec();
    let protected = protected_tool_result(session, &nodes)?;
    let mut next = session.state().next_seq().get();
    let mut out = Vec::new();
    for seq in nodes {
        if Some(seq) == protected {
            continue;
        }
        let Some(event) = session.event_at(seq)? else {
            continue;
        };
        if event.event_type() != "tool/result" {
            continue;
        }
        let data = event.data();
        let Some(inner) = data.get("message").and_then(result_content) else {
            continue;
        };
        let text = inner_text(inner);
        if text.len() <= options.threshold_bytes {
            continue;
        }
        let Some(new_data) = splice(data, inner, &shortened(&text, seq, head_bytes, tail_bytes))
        else {
            continue;
        };
        let prune = ObjectWriter::new()
            .raw(
                "shadowedRange",
                &format!("{{\"start\":{seq},\"end\":{seq}}}"),
            )
            .raw("shadowedSeqs", &format!("[{seq}]"))
            .int(
                "shadowedTokenCount",
                i64::from(projection.node_estimate(seq).unwrap_or(0)),
            )
            .finish();
        let mut prune_event = EventInput::new("compaction/prune", time, prune);
        prune_event.seq = Some(Seq(next));
        let mut replacement = EventInput::new("tool/result", time, new_data)
            .with_surface_op(SurfaceOp::Replace {
                start: seq,
                end: seq,
            })
            .with_sources(vec![seq]);
        replacement.seq = Some(Seq(next + 1));
        next += 2;
        out.push(prune_event);
        out.push(replacement);
    }
    Ok(out)
}

/// The blocks of a tool result's message: a V4 `role: "tool"` message holds them as its
/// content; an older one wraps them in its one `tool-result` block.
fn result_content(message: JsonRef<'_>) -> Option<JsonRef<'_>> {
    let content = message.get("content")?;
    if crate::validate::is_tool_message(message) {
        return Some(content);
    }
    content.elements().next()?.get("content")
}

fn inner_text(inner: JsonRef<'_>) -> String {
    // Wrap the blocks as a message so the shared visible-text walk reads them.
    let wrapped = format!("{{\"content\":{}}}", inner.raw());
    visible_text(JsonRef::new(&wrapped))
}

fn shortened(text: &str, seq: Seq, head_bytes: usize, tail_bytes: usize) -> String {
    let head_end = floor_boundary(text, head_bytes);
    let tail_start = ceil_boundary(text, text.len().saturating_sub(tail_bytes)).max(head_end);
    let removed = tail_start - head_end;
    let marker = format!(
        "\n[… {removed} bytes pruned; the full tool result is kept in the session log at seq {seq} …]\n"
    );
    let mut text_out = String::with_capacity(head_end + marker.len() + text.len() - tail_start);
    text_out.push_str(text.get(..head_end).unwrap_or(""));
    text_out.push_str(&marker);
    text_out.push_str(text.get(tail_start..).unwrap_or(""));
    let mut blocks = String::from("[{\"type\":\"text\",\"text\":");
    write_js_string(&mut blocks, &text_out);
    blocks.push_str("}]");
    blocks
}

/// `data` with the bytes of `inner` (a value inside it) replaced by `replacement`.
fn splice(data: JsonRef<'_>, inner: JsonRef<'_>, replacement: &str) -> Option<String> {
    let base = data.raw();
    let start = (inner.raw().as_ptr() as usize).checked_sub(base.as_ptr() as usize)?;
    let end = start.checked_add(inner.raw().len())?;
    Some(format!(
        "{}{}{}",
        base.get(..start)?,
        replacement,
        base.get(end..)?
    ))
}
