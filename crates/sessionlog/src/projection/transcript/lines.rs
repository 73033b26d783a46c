//! The lines of a transcript's rows: a message's text blocks, reasoning, tool calls and
//! results, and the one line of a structural event, each read from the event's JSON in
//! place.

use std::borrow::Cow;

use sessionlog_session::json::{JsonKind, JsonRef};
use sessionlog_session::{Event, MessageLocation, Seq};

use super::text::{abbreviate_into, abbreviate_value, literal_inner, plain_prefix, push_u64};
use super::{SessionTranscript, ARGUMENT_CHARS, TEXT_CHARS};
use crate::projection::ProjectionError;

/// `n` things, with the plural where it belongs.
pub(super) fn count(n: u64, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// Appends the seqs a replacement cites: listed when few, counted when many.
pub(super) fn cited(out: &mut String, seqs: &[Seq]) {
    const LISTED: usize = 8;
    match seqs.len() {
        0 => out.push_str("nothing"),
        n if n <= LISTED => {
            out.push_str("seq ");
            for (i, &seq) in seqs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_u64(out, seq.get(), 0);
            }
        }
        n => {
            push_u64(out, n as u64, 0);
            out.push_str(" events");
        }
    }
}

pub(super) fn role_of(event_type: &str) -> &'static str {
    match event_type {
        "user/message" => "user",
        "assistant/message" => "assistant",
        "tool/result" => "tool",
        "system/message" => "system",
        _ => "message",
    }
}

/// A block's `type`: the kinds a transcript renders compared as they are spelled, without
/// decoding them (this runs for every block of every message folded); any other value
/// read as [`text_of`] reads it.
pub(super) fn block_kind<'a>(value: Option<JsonRef<'a>>) -> Option<Cow<'a, str>> {
    let value = value?;
    let raw = value.raw();
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or_default();
    match inner {
        known @ ("text" | "reasoning" | "tool-call" | "tool-result") => Some(Cow::Borrowed(known)),
        _ => value.as_str(),
    }
}

/// A string member's text, read in place.
pub(super) fn text_of<'a>(value: Option<JsonRef<'a>>) -> Option<std::borrow::Cow<'a, str>> {
    value.and_then(|v| v.as_str())
}

/// Appends the lines of one message's `content` (its text blocks, reasoning, tool calls
/// and tool results), each ending in a line end; whether it wrote any. Reads the message's
/// JSON in place: no tree is built per folded event.
pub(super) fn message_lines<'e>(
    out: &mut String,
    content: Option<JsonRef<'e>>,
    event: &'e Event,
    location: MessageLocation,
    transcript: &mut SessionTranscript,
) -> Result<bool, ProjectionError> {
    let Some(content) = content else {
        return Ok(false);
    };
    if content.as_str().is_some() {
        abbreviate_value(out, Some(content), TEXT_CHARS);
        out.push('\n');
        return Ok(true);
    }
    let mut written = false;
    // The members of every kind of block, found in one walk of each (or read from the
    // index the event's parse made of its blocks), each key matched once.
    for block in event.content_block_members(location, content) {
        written = true;
        let [kind, text, name, arguments, id, call_id, is_error, items] = block_fields(block);
        let kind = block_kind(kind);
        match kind.as_deref().unwrap_or("?") {
            "text" => abbreviate_value(out, text, TEXT_CHARS),
            "reasoning" => {
                out.push_str("(reasoning) ");
                abbreviate_value(out, text, TEXT_CHARS);
            }
            "tool-call" => {
                out.push_str("→ calls ");
                out.push_str(&str_or(name));
                out.push('(');
                match arguments.filter(|a| a.kind() == JsonKind::String) {
                    // A string's text, read from its literal.
                    Some(text) => abbreviate_value(out, Some(text), ARGUMENT_CHARS),
                    None => abbreviate_into(out, &arguments_line(arguments), ARGUMENT_CHARS),
                }
                out.push_str(") [");
                out.push_str(&str_or(id));
                out.push(']');
            }
            "tool-result" => {
                let id = text_of(call_id);
                let id = id.as_deref().unwrap_or("?");
                let tool = transcript.tool_name(id)?.unwrap_or("?");
                tool_result(out, id, tool, [is_error, items]);
            }
            other => {
                out.push('[');
                out.push_str(other);
                out.push_str(" block]");
            }
        }
        out.push('\n');
    }
    Ok(written)
}

/// The members of a block that some kind of block is rendered from, the first of each
/// key: `type`, `text`, `name`, `arguments`, `id`, `toolCallId`, `isError`, `content`.
pub(super) fn block_fields(block: sessionlog_session::json::Block<'_>) -> [Option<JsonRef<'_>>; 8] {
    fn place(key: &str) -> Option<usize> {
        Some(match key {
            "type" => 0,
            "text" => 1,
            "name" => 2,
            "arguments" => 3,
            "id" => 4,
            "toolCallId" => 5,
            "isError" => 6,
            "content" => 7,
            _ => return None,
        })
    }
    let mut found = [None; 8];
    for (key, value) in block {
        let at = match key.plain() {
            Some(plain) => place(plain),
            None => place(&key.text()),
        };
        if let Some(slot) = at.and_then(|at| found.get_mut(at)) {
            slot.get_or_insert(value);
        }
    }
    found
}

/// Arguments that are no string as one line: nothing for null or none, or any other
/// value's JSON written compactly. (A string's text is read from its literal.)
pub(super) fn arguments_line(value: Option<JsonRef<'_>>) -> String {
    let Some(value) = value else {
        return String::new();
    };
    if value.raw() == "null" {
        return String::new();
    }
    serde_json::from_str::<serde_json::Value>(value.raw())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| value.raw().to_owned())
}

/// The line of a `tool-result` block answering call `id` of tool `name`, from its
/// `isError` and `content`.
pub(super) fn tool_result(
    out: &mut String,
    id: &str,
    name: &str,
    [is_error, content]: [Option<JsonRef<'_>>; 2],
) {
    let status = if is_error.and_then(|v| v.as_bool()) == Some(true) {
        "error"
    } else {
        "ok"
    };
    out.push_str("← ");
    out.push_str(name);
    out.push_str(" [");
    out.push_str(id);
    out.push_str("] ");
    out.push_str(status);
    out.push_str(": ");
    // The texts are shown joined by spaces, abbreviated. When the first alone is longer
    // than a line (a tool's output usually is), the line is its start: read from where the
    // first item's text begins, neither its end nor the other texts are looked for.
    let head = content
        .and_then(|items| items.first_element_value_onward("text"))
        .and_then(|onward| onward.strip_prefix('"'))
        .and_then(|inner| inner.get(..=TEXT_CHARS))
        .filter(|head| !head.contains('"'));
    if let Some(prefix) = head.and_then(|head| plain_prefix(head, TEXT_CHARS)) {
        // More than `TEXT_CHARS` bytes, none a quote or a backslash: the string goes on.
        if prefix.cut {
            out.push_str(prefix.text);
            out.push('…');
            return;
        }
    }
    let mut texts = content
        .into_iter()
        .flat_map(|items| items.element_fields(["text"]))
        .filter_map(|(_, [text])| text.filter(|t| t.kind() == JsonKind::String));
    let first = texts.next();
    // The first text found may still be longer than a line (it was not the first item's,
    // or its start holds an escape): then the others are neither found nor decoded.
    if let Some(prefix) = first.and_then(|t| plain_prefix(literal_inner(t), TEXT_CHARS)) {
        if prefix.cut {
            out.push_str(prefix.text);
            out.push('…');
            return;
        }
    }
    let text: Vec<std::borrow::Cow<'_, str>> = first
        .into_iter()
        .chain(texts)
        .filter_map(|t| t.as_str())
        .collect();
    abbreviate_into(out, &text.join(" "), TEXT_CHARS);
}

/// The kind column of a structural event: the part of its type before the slash. Types are
/// short: their bytes are looked through in place (a `split` sets up a searcher per row).
pub(super) fn kind_of(event_type: &str) -> &str {
    match event_type.bytes().position(|b| b == b'/') {
        Some(slash) => event_type.get(..slash).unwrap_or(event_type),
        None => event_type,
    }
}

/// A string member's text, or `?`.
pub(super) fn str_or<'a>(value: Option<JsonRef<'a>>) -> std::borrow::Cow<'a, str> {
    text_of(value).unwrap_or(std::borrow::Cow::Borrowed("?"))
}

/// Appends a JSON number that is a non-negative integer in decimal, or `?`.
pub(super) fn push_number(out: &mut String, value: Option<JsonRef<'_>>) {
    let digits = value
        .map(|v| v.raw())
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    // Up to 19 digits without a leading zero are below 2^64 and read as they are written.
    if let Some(d) = digits.filter(|d| d.len() <= 19 && (d.len() == 1 || !d.starts_with('0'))) {
        out.push_str(d);
        return;
    }
    match digits.and_then(|d| d.parse::<u64>().ok()) {
        Some(n) => push_u64(out, n, 0),
        None => out.push('?'),
    }
}

/// Appends the line of a `tool/call` event from its `name` and `callId` (`?` for either
/// when it is missing or no string), without its line end.
pub(super) fn tool_call_line(
    out: &mut String,
    name: &Option<Cow<'_, str>>,
    id: &Option<Cow<'_, str>>,
) {
    out.push_str("tool call ");
    out.push_str(name.as_deref().unwrap_or("?"));
    out.push_str(" [");
    out.push_str(id.as_deref().unwrap_or("?"));
    out.push(']');
}

/// Appends one line for a structural event (without its line end): what it says, in words
/// where its type (`ty`) is common. Reads the payload in place. A tool call is not handed
/// here: the fold writes its line with [`tool_call_line`] from the name and id it read.
pub(super) fn structural(out: &mut String, ty: &str, e: &Event) {
    match ty {
        // The legacy upgrade spreads `trigger` into the payload; older logs nest it.
        "turn/start" => {
            let [turn, kind, trigger] = e.data_fields(["turn", "kind", "trigger"]);
            out.push_str("turn ");
            push_number(out, turn);
            out.push_str(" starts");
            let trigger = text_of(kind).or_else(|| text_of(trigger.and_then(|t| t.get("kind"))));
            if let Some(t) = trigger {
                out.push_str(" (");
                out.push_str(&t);
                out.push(')');
            }
        }
        "turn/end" => {
            let [turn, reason] = e.data_fields(["turn", "reason"]);
            out.push_str("turn ");
            push_number(out, turn);
            out.push_str(" ends: ");
            let reason = text_of(reason.and_then(|r| r.get("kind"))).or_else(|| text_of(reason));
            out.push_str(reason.as_deref().unwrap_or("?"));
        }
        "step/start" | "step/end" => {
            let [turn, step] = e.data_fields(["turn", "step"]);
            out.push_str("step ");
            push_number(out, turn);
            out.push('.');
            push_number(out, step);
            out.push_str(if ty == "step/start" {
                " starts"
            } else {
                " ends"
            });
        }
        "request/header" => {
            let [header, reason] = e.data_fields(["header", "reason"]);
            let config = header.and_then(|h| h.get("config"));
            let [provider, model] =
                config.map_or([None, None], |c| c.fields(["provider", "model"]));
            out.push_str("request to ");
            out.push_str(&str_or(provider));
            out.push('/');
            out.push_str(&str_or(model));
            out.push_str(" (");
            out.push_str(&str_or(reason));
            out.push(')');
        }
        // Anything else: the type and its payload as written, abbreviated.
        _ => {
            out.push_str(ty);
            out.push(' ');
            abbreviate_into(out, e.data().raw(), ARGUMENT_CHARS);
        }
    }
}
