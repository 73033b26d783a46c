//! The model-visible text of a message, the unit every estimate counts.
//!
//! Only what a provider request carries is counted: the text of `text` and `reasoning`
//! blocks, a tool call's name and raw argument string, and the blocks inside a
//! `tool-result`. Message ids, `source` objects and other bookkeeping are stored but never
//! sent, so counting them would inflate every estimate. An `image` block counts as the
//! placeholder `[image]` (no local counter can price an image); a block type this crate
//! does not know counts as its raw JSON, which over-estimates rather than hides it.

use super::TokenCounter;
use crate::event::Event;
use crate::json::JsonRef;
use crate::session::DerivedRef;

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
    if let Some(content) = message.get("content") {
        write_blocks(content, out);
    }
}

/// [`write_visible_text`] of the message `event` derives, as `derived` found it: its
/// blocks read from the index the event's parse made of them, where it holds them.
pub(crate) fn write_derived_text(event: &Event, derived: &DerivedRef<'_>, out: &mut String) {
    if let Some(content) = derived.content {
        write_content(
            content,
            || event.content_blocks(derived.location, content, BLOCK_KEYS),
            out,
        );
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
    write_content(blocks, || blocks.element_fields(BLOCK_KEYS), out);
}

/// Appends the visible text of `content`: its blocks as `blocks` reads them, or the text
/// of a bare string.
fn write_content<'a, I>(content: JsonRef<'a>, blocks: impl FnOnce() -> I, out: &mut String)
where
    I: Iterator<Item = (JsonRef<'a>, [Option<JsonRef<'a>>; 5])>,
{
    if let Some(text) = content.as_str() {
        // Some producers store a bare string where blocks are expected.
        push_piece(out, &text);
        return;
    }
    write_block_list(blocks(), out);
}

/// Every key any block type reads, found in the one pass over each block.
const BLOCK_KEYS: [&str; 5] = ["type", "text", "name", "arguments", "content"];

/// Appends the visible text of blocks, each with its [`BLOCK_KEYS`] values.
fn write_block_list<'a>(
    blocks: impl Iterator<Item = (JsonRef<'a>, [Option<JsonRef<'a>>; 5])>,
    out: &mut String,
) {
    for (block, [kind, text, name, arguments, inner]) in blocks {
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
