//! The model-visible text of a message, the unit every estimate counts.
//!
//! Only what a provider request carries is counted: the text of `text` and `reasoning`
//! blocks, a tool call's name and raw argument string, and the blocks inside a
//! `tool-result`. Message ids, `source` objects and other bookkeeping are stored but never
//! sent, so counting them would inflate every estimate. An `image` block counts as the
//! placeholder `[image]` (no local counter can price an image); a block type this crate
//! does not know counts as its raw JSON, which over-estimates rather than hides it.

use super::TokenCounter;
use crate::json::JsonRef;

/// The estimate of one model-visible message under `counter`: its visible text counted,
/// plus the counter's per-message overhead. `scratch` is cleared and holds the text after.
pub fn estimate_message(
    counter: &dyn TokenCounter,
    message: JsonRef<'_>,
    scratch: &mut String,
) -> u32 {
    scratch.clear();
    write_visible_text(message, scratch);
    count_with_overhead(counter, scratch)
}

/// Tokens of one message whose visible text is `text`: counted, plus the counter's
/// per-message overhead.
pub(crate) fn count_with_overhead(counter: &dyn TokenCounter, text: &str) -> u32 {
    counter
        .count(text)
        .saturating_add(counter.message_overhead())
}

/// Appends the model-visible text of `message` (an object with a `content` array) to
/// `out`, pieces separated by `\n`.
pub fn write_visible_text(message: JsonRef<'_>, out: &mut String) {
    write_content_text(message.get("content"), out);
}

/// [`write_visible_text`] given the message's `content` (already looked up).
pub(crate) fn write_content_text(content: Option<JsonRef<'_>>, out: &mut String) {
    if let Some(content) = content {
        write_blocks(content, out);
    }
}

/// The model-visible text of `message`; see [`write_visible_text`].
pub fn visible_text(message: JsonRef<'_>) -> String {
    let mut out = String::new();
    write_visible_text(message, &mut out);
    out
}

fn push_piece(out: &mut String, piece: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(piece);
}

fn write_blocks(blocks: JsonRef<'_>, out: &mut String) {
    if let Some(text) = blocks.as_str() {
        // Some producers store a bare string where blocks are expected.
        push_piece(out, &text);
        return;
    }
    // Every key any block type reads, found in the one pass over each block.
    for (block, [kind, text, name, arguments, inner]) in
        blocks.element_fields(["type", "text", "name", "arguments", "content"])
    {
        match kind.and_then(|t| t.as_str()).as_deref() {
            Some("text" | "reasoning") => {
                if let Some(text) = text.and_then(|t| t.as_str()) {
                    push_piece(out, &text);
                }
            }
            Some("tool-call") => {
                if let Some(name) = name.and_then(|t| t.as_str()) {
                    push_piece(out, &name);
                }
                if let Some(arguments) = arguments {
                    match arguments.as_str() {
                        Some(raw) => push_piece(out, &raw),
                        None => push_piece(out, arguments.raw()),
                    }
                }
            }
            Some("tool-result") => {
                if let Some(inner) = inner {
                    write_blocks(inner, out);
                }
            }
            Some("image") => push_piece(out, "[image]"),
            _ => push_piece(out, block.raw()),
        }
    }
}
