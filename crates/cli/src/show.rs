//! `sessionlog show`: a session as a transcript a person can read.
//!
//! One block per surface message (user, assistant, tool, system) with its role, its text
//! abbreviated, the tool calls an assistant made (name and arguments) and each tool result's
//! status. Structural events (turn and step boundaries, requests, compaction markers, …) get
//! one marked line each; a run of streamed chunks collapses into one line that names the
//! settlement it became. Surface events that a replacement shadows stay in the transcript,
//! marked, with the replacement that took their place; a replacement names what it replaced.
//! `--raw` prints the older one-line-per-event listing.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use serde_json::Value;
use sessionlog::session::{derive_message, Event, Session, SurfaceOp};

use crate::{out, Failure};

/// At most this many characters of a text on one line.
const TEXT_CHARS: usize = 100;
/// At most this many characters of a tool call's arguments.
const ARGUMENT_CHARS: usize = 60;
/// Width of the role/kind column.
const KIND_WIDTH: usize = 10;

/// Marks in the first column.
const MARK_SURFACE: char = ' ';
const MARK_SHADOWED: char = '~';
const MARK_REPLACEMENT: char = '»';
const MARK_STRUCTURAL: char = '·';

/// Prints the transcript of `session` named `name`.
pub(crate) fn transcript(name: &str, session: &Session) -> Result<(), Failure> {
    let events = session.events();
    let on_surface: HashSet<u64> = session.surface().into_iter().collect();
    let version = session.version();
    let shadowed_by = shadowed_by(events, |e| {
        version.surface_type(e.event_type()).is_some() && !on_surface.contains(&e.seq().get())
    });
    let tool_names = tool_names(events);
    let seq_width = events.len().saturating_sub(1).to_string().len().max(3);
    let mut lines = Lines {
        w: io::BufWriter::new(io::stdout().lock()),
        seq_width,
    };
    let replacements = events
        .iter()
        .filter(|e| matches!(e.surface_op(), Some(SurfaceOp::Replace { .. })))
        .count();
    lines.raw(&format!(
        "session {name}: {}, {} on the surface, {} shadowed by {}\n",
        count(events.len(), "event"),
        count(on_surface.len(), "message"),
        shadowed_by.len(),
        count(replacements, "replacement"),
    ))?;
    lines.raw(&format!(
        "{MARK_STRUCTURAL} structural event   {MARK_SHADOWED} shadowed by a replacement (kept in the log)   {MARK_REPLACEMENT} replacement\n\n"
    ))?;
    let mut k = 0;
    while let Some(e) = events.get(k) {
        let seq = e.seq().get();
        if e.event_type() == "assistant/chunk" {
            let run = events[k..]
                .iter()
                .take_while(|c| c.event_type() == "assistant/chunk")
                .count();
            let last = seq + run as u64 - 1;
            let settled = events
                .get(k + run..)
                .and_then(|rest| {
                    rest.iter()
                        .find(|n| n.event_type() == "assistant/message")
                        .map(|n| format!("settled in seq {}", n.seq().get()))
                })
                .unwrap_or_else(|| "never settled".to_owned());
            let text = if run == 1 {
                format!("1 streamed chunk (seq {seq}), {settled}")
            } else {
                format!("{run} streamed chunks (seq {seq}..={last}), {settled}")
            };
            lines.row(MARK_STRUCTURAL, seq, "stream", &text)?;
            k += run;
            continue;
        }
        k += 1;
        let Some(message) = derive_message(version, e) else {
            if version.surface_type(e.event_type()).is_some() {
                // A surface event with nothing for the model (an empty message).
                let mark = surface_mark(e, &on_surface);
                lines.row(mark, seq, role_of(e), "(empty message)")?;
            } else {
                lines.row(MARK_STRUCTURAL, seq, kind_of(e), &structural(e))?;
            }
            continue;
        };
        let mark = surface_mark(e, &on_surface);
        let message: Value = serde_json::from_str(message).unwrap_or(Value::Null);
        let mut block = message_lines(e, &message, &tool_names);
        if let Some(SurfaceOp::Replace { start, end }) = e.surface_op() {
            block.insert(
                0,
                format!(
                    "[replaces seq {start}..={end}; cites {}]",
                    cited(e.source_event_seqs().unwrap_or_default())
                ),
            );
        }
        if let Some(by) = shadowed_by.get(&seq) {
            block.push(format!("[shadowed by seq {by}]"));
        }
        let mut role = role_of(e);
        for line in block {
            lines.row(mark, seq, role, &line)?;
            // Continuation lines of a block leave the mark, seq and role columns blank.
            role = "";
        }
    }
    lines.w.flush()?;
    Ok(())
}

/// Writes aligned rows: mark, seq, kind, text.
struct Lines<W: Write> {
    w: W,
    seq_width: usize,
}

impl<W: Write> Lines<W> {
    fn raw(&mut self, text: &str) -> Result<(), Failure> {
        out(&mut self.w, text.as_bytes())
    }

    fn row(&mut self, mark: char, seq: u64, kind: &str, text: &str) -> Result<(), Failure> {
        let width = self.seq_width;
        let line = if kind.is_empty() {
            format!("  {:width$}  {:KIND_WIDTH$}  {text}\n", "", "")
        } else {
            format!("{mark} {seq:>width$}  {kind:KIND_WIDTH$}  {text}\n")
        };
        self.raw(&line)
    }
}

/// `n` things, with the plural where it belongs.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The seqs a replacement cites: listed when few, counted when many.
fn cited(seqs: &[u64]) -> String {
    const LISTED: usize = 8;
    match seqs.len() {
        0 => "nothing".to_owned(),
        n if n <= LISTED => {
            let list: Vec<String> = seqs.iter().map(u64::to_string).collect();
            format!("seq {}", list.join(", "))
        }
        n => format!("{n} events"),
    }
}

fn surface_mark(e: &Event, on_surface: &HashSet<u64>) -> char {
    if !on_surface.contains(&e.seq().get()) {
        MARK_SHADOWED
    } else if matches!(e.surface_op(), Some(SurfaceOp::Replace { .. })) {
        MARK_REPLACEMENT
    } else {
        MARK_SURFACE
    }
}

/// The replacement that shadows each shadowed event: a replacement cites every node it
/// shadows in `sourceEventSeqs` (besides, for a summary, the compaction events it came
/// from); the latest replacement citing a shadowed event is the one that shadows it.
fn shadowed_by(events: &[Event], is_shadowed: impl Fn(&Event) -> bool) -> HashMap<u64, u64> {
    let mut by = HashMap::new();
    for e in events {
        if let (Some(SurfaceOp::Replace { .. }), Some(sources)) =
            (e.surface_op(), e.source_event_seqs())
        {
            for s in sources {
                let shadowed = events.get(*s as usize).is_some_and(&is_shadowed);
                if shadowed {
                    by.insert(*s, e.seq().get());
                }
            }
        }
    }
    by
}

/// Tool names by call id, from the assistants' tool calls and `tool/call` events.
fn tool_names(events: &[Event]) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for e in events {
        if e.event_type() == "tool/call" {
            let data = json(e);
            if let (Some(id), Some(name)) = (data["callId"].as_str(), data["name"].as_str()) {
                names.insert(id.to_owned(), name.to_owned());
            }
        }
    }
    names
}

fn json(e: &Event) -> Value {
    serde_json::from_str(e.data().raw()).unwrap_or(Value::Null)
}

fn role_of(e: &Event) -> &'static str {
    match e.event_type() {
        "user/message" => "user",
        "assistant/message" => "assistant",
        "tool/result" => "tool",
        "system/message" => "system",
        _ => "message",
    }
}

/// The lines of one message: its text blocks, reasoning, tool calls and tool results.
fn message_lines(e: &Event, message: &Value, tools: &HashMap<String, String>) -> Vec<String> {
    let mut lines = Vec::new();
    let blocks: &[Value] = match &message["content"] {
        Value::Array(blocks) => blocks,
        Value::String(text) => {
            lines.push(abbreviate(text, TEXT_CHARS));
            &[]
        }
        _ => &[],
    };
    for block in blocks {
        let kind = block["type"].as_str().unwrap_or("?");
        let line = match kind {
            "text" => abbreviate(block["text"].as_str().unwrap_or(""), TEXT_CHARS),
            "reasoning" => format!(
                "(reasoning) {}",
                abbreviate(block["text"].as_str().unwrap_or(""), TEXT_CHARS)
            ),
            "tool-call" => format!(
                "→ calls {}({}) [{}]",
                block["name"].as_str().unwrap_or("?"),
                abbreviate(&arguments(&block["arguments"]), ARGUMENT_CHARS),
                block["id"].as_str().unwrap_or("?")
            ),
            "tool-result" => tool_result(block, tools),
            other => format!("[{other} block]"),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        lines.push(format!("({} with no content)", e.event_type()));
    }
    lines
}

/// Arguments as one line: a JSON string's text, or any other value's JSON.
fn arguments(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn tool_result(block: &Value, tools: &HashMap<String, String>) -> String {
    let id = block["toolCallId"].as_str().unwrap_or("?");
    let name = tools.get(id).map_or("?", String::as_str);
    let status = if block["isError"].as_bool() == Some(true) {
        "error"
    } else {
        "ok"
    };
    let text: Vec<&str> = block["content"]
        .as_array()
        .map(|items| items.iter().filter_map(|i| i["text"].as_str()).collect())
        .unwrap_or_default();
    format!(
        "← {name} [{id}] {status}: {}",
        abbreviate(&text.join(" "), TEXT_CHARS)
    )
}

/// The kind column of a structural event: the part of its type before the slash.
fn kind_of(e: &Event) -> &str {
    e.event_type()
        .split('/')
        .next()
        .unwrap_or_else(|| e.event_type())
}

/// One line for a structural event: what it says, in words where its type is common.
fn structural(e: &Event) -> String {
    let d = json(e);
    let num = |v: &Value| v.as_u64().map_or_else(|| "?".to_owned(), |n| n.to_string());
    let ty = e.event_type();
    match ty {
        // The legacy upgrade spreads `trigger` into the payload; older logs nest it.
        "turn/start" => {
            let trigger = d["kind"].as_str().or_else(|| d["trigger"]["kind"].as_str());
            match trigger {
                Some(t) => format!("turn {} starts ({t})", num(&d["turn"])),
                None => format!("turn {} starts", num(&d["turn"])),
            }
        }
        "turn/end" => format!(
            "turn {} ends: {}",
            num(&d["turn"]),
            d["reason"]["kind"]
                .as_str()
                .or_else(|| d["reason"].as_str())
                .unwrap_or("?")
        ),
        "step/start" => format!("step {}.{} starts", num(&d["turn"]), num(&d["step"])),
        "step/end" => format!("step {}.{} ends", num(&d["turn"]), num(&d["step"])),
        "request/header" => {
            let config = &d["header"]["config"];
            format!(
                "request to {}/{} ({})",
                config["provider"].as_str().unwrap_or("?"),
                config["model"].as_str().unwrap_or("?"),
                d["reason"].as_str().unwrap_or("?")
            )
        }
        "tool/call" => format!(
            "tool call {} [{}]",
            d["name"].as_str().unwrap_or("?"),
            d["callId"].as_str().unwrap_or("?")
        ),
        // Anything else: the type and its payload as written, abbreviated.
        _ => format!("{ty} {}", abbreviate(e.data().raw(), ARGUMENT_CHARS)),
    }
}

/// `text` on one line (control characters as spaces, runs of whitespace as one space), cut
/// to `max` characters with an ellipsis.
pub(crate) fn abbreviate(text: &str, max: usize) -> String {
    let mut one_line = String::with_capacity(text.len().min(max * 4));
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !one_line.is_empty();
            continue;
        }
        if space {
            one_line.push(' ');
            space = false;
        }
        one_line.push(c);
        if one_line.chars().count() > max {
            break;
        }
    }
    if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::abbreviate;

    #[test]
    fn abbreviation_keeps_one_line_and_marks_the_cut() {
        assert_eq!(abbreviate("a\n\n b\tc", 10), "a b c");
        assert_eq!(abbreviate("abcdefghijk", 5), "abcde…");
        assert_eq!(abbreviate("  lead", 10), "lead");
        assert_eq!(abbreviate("", 10), "");
    }
}
