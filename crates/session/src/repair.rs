//! Restart repair (spec §8): the turn tracker folded over every event, and the closing
//! events it yields when the final turn is open.
//!
//! The tracker is updated per event in O(1) amortized, so computing closers after a load
//! costs O(pending calls), not a second pass over the log.

use std::collections::HashMap;

use crate::event::Event;
use crate::json::{js_number, JsonKind, JsonRef, ObjectWriter};

/// Error name, code and message of a closer for a call whose `tool/call` was logged.
pub const TOOL_OUTCOME_UNKNOWN: (&str, &str) = ("ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN");
/// Error name and code of a closer for a call that was announced but never dispatched.
pub const TOOL_NOT_STARTED: (&str, &str) = ("ToolNotStartedError", "TOOL_NOT_STARTED");

const OUTCOME_UNKNOWN_TEXT: &str =
    "The session stopped while this tool call was running, so its outcome is unknown. \
     Check for its effects before running it again.";
const NOT_STARTED_TEXT: &str =
    "The session stopped before this tool call was started. Run it again if it is still needed.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCall {
    pub(crate) call_id: String,
    /// The `step` of the announcing settlement, as JSON text.
    pub(crate) step: String,
    pub(crate) call_seq: Option<u64>,
}

/// Open turn, open step and announced-but-unanswered tool calls, in announcement order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TurnTracker {
    pub(crate) open_turn: Option<String>,
    pub(crate) open_step: Option<String>,
    /// Insertion-ordered map; removed entries leave a hole so positions stay stable.
    pub(crate) pending: Vec<Option<PendingCall>>,
    /// Call id to slot in `pending`, for exactly the slots that hold a call.
    pub(crate) index: HashMap<String, usize>,
    /// Whether any `step/start` has been seen (DSH 0.2 gives surface events a system head
    /// only from the first step on).
    pub(crate) stepped: bool,
    /// The highest numeric turn any `turn/start` carried.
    pub(crate) last_turn: Option<u64>,
    /// The highest numeric step a `step/start` of the open turn carried.
    pub(crate) last_step: Option<u64>,
}

/// A payload value as `JSON.stringify` would write it back (numbers normalised).
fn js_value(value: Option<JsonRef<'_>>) -> Option<String> {
    let value = value?;
    match value.kind() {
        JsonKind::Null if value.raw() == "null" => None,
        // Plain digits are already how `JSON.stringify` writes the number.
        JsonKind::Number if is_plain_integer(value.raw()) => Some(value.raw().to_owned()),
        JsonKind::Number => value.as_f64().map(js_number),
        _ => Some(value.raw().to_owned()),
    }
}

/// Whether `raw` is a number `JSON.stringify` writes the same way: up to 15 digits (an
/// exact double) without a leading zero, optionally negative but not `-0`.
fn is_plain_integer(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    (1..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !(digits.starts_with('0') && (digits.len() > 1 || raw.starts_with('-')))
}

impl TurnTracker {
    fn clear_pending(&mut self) {
        self.pending.clear();
        self.index.clear();
    }

    pub(crate) fn apply(&mut self, event: &Event) {
        // Most events (chunks above all) change nothing here: the payload is looked at
        // only by the types that read it, through the index its parse made.
        match event.event_type() {
            "turn/start" => {
                let [turn] = event.data_fields(["turn"]);
                self.open_turn = js_value(turn);
                self.open_step = None;
                self.last_step = None;
                self.clear_pending();
                self.last_turn = self.last_turn.max(turn.and_then(|t| t.as_seq()));
            }
            "turn/end" => {
                self.open_turn = None;
                self.open_step = None;
                self.clear_pending();
            }
            "step/start" => {
                let [step] = event.data_fields(["step"]);
                self.open_step = js_value(step);
                self.stepped = true;
                self.last_step = self.last_step.max(step.and_then(|s| s.as_seq()));
            }
            "step/end" => {
                self.clear_pending();
                self.open_step = None;
            }
            "assistant/message" => {
                let [step] = event.data_fields(["step"]);
                let step = js_value(step).unwrap_or_else(|| "null".to_owned());
                let [content] = event.message_fields(["content"]);
                for (_, [block_type, id]) in content.into_iter().flat_map(|c| {
                    event.content_blocks(crate::MessageLocation::DataMessage, c, ["type", "id"])
                }) {
                    if block_type.and_then(|t| t.as_str()).as_deref() != Some("tool-call") {
                        continue;
                    }
                    let Some(id) = id.and_then(|i| i.as_str()) else {
                        continue;
                    };
                    let call = PendingCall {
                        call_id: id.to_string(),
                        step: step.clone(),
                        call_seq: None,
                    };
                    match self.index.get(id.as_ref()) {
                        Some(&slot) => {
                            if let Some(entry) = self.pending.get_mut(slot) {
                                *entry = Some(call);
                            }
                        }
                        None => {
                            self.index.insert(id.into_owned(), self.pending.len());
                            self.pending.push(Some(call));
                        }
                    }
                }
            }
            "tool/call" => {
                let [id] = event.data_fields(["callId"]);
                if let Some(id) = id.and_then(|c| c.as_str()) {
                    if let Some(&slot) = self.index.get(id.as_ref()) {
                        if let Some(Some(call)) = self.pending.get_mut(slot) {
                            call.call_seq = Some(event.seq().get());
                        }
                    }
                }
            }
            "tool/result" => {
                let [source] = event.message_fields(["source"]);
                let id = source.and_then(|s| s.get("callId"));
                if let Some(id) = id.and_then(|i| i.as_str()) {
                    if let Some(slot) = self.index.remove(id.as_ref()) {
                        if let Some(entry) = self.pending.get_mut(slot) {
                            *entry = None;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether the last turn is open.
    pub(crate) fn turn_open(&self) -> bool {
        self.open_turn.is_some()
    }

    /// The open turn's `turn` value as `JSON.stringify` writes it, if a turn is open.
    pub(crate) fn open_turn(&self) -> Option<&str> {
        self.open_turn.as_deref()
    }

    /// The open step's `step` value as `JSON.stringify` writes it, if a step is open.
    pub(crate) fn open_step(&self) -> Option<&str> {
        self.open_step.as_deref()
    }

    /// Whether any `step/start` has been seen.
    pub(crate) fn has_stepped(&self) -> bool {
        self.stepped
    }

    /// The `step` of the settlement that announced `call_id` and the seq of its
    /// `tool/call`, if the call is announced and not yet answered.
    pub(crate) fn pending_call(&self, call_id: &str) -> Option<(&str, Option<u64>)> {
        let slot = *self.index.get(call_id)?;
        let call = self.pending.get(slot)?.as_ref()?;
        Some((call.step.as_str(), call.call_seq))
    }

    /// The turn number a new `turn/start` takes: one past the highest seen, 1 at first.
    pub(crate) fn next_turn(&self) -> u64 {
        self.last_turn.map_or(1, |t| t.saturating_add(1))
    }

    /// The step number a new `step/start` of the open turn takes: one past the highest
    /// of this turn, 1 at first.
    pub(crate) fn next_step(&self) -> u64 {
        self.last_step.map_or(1, |s| s.saturating_add(1))
    }

    /// The closer envelopes (as JSON text) for a log whose last event has `last_seq` and
    /// `last_time`; empty when no turn is open. `tool_messages` shapes the tool results as
    /// DSH V4 does (a `role: "tool"` message naming its call) instead of a user message
    /// wrapping one `tool-result` block.
    pub(crate) fn closers(
        &self,
        last_seq: u64,
        last_time: i64,
        tool_messages: bool,
    ) -> Vec<(u64, String)> {
        let Some(turn) = &self.open_turn else {
            return Vec::new();
        };
        let mut seq = last_seq + 1;
        let mut out = Vec::new();
        for call in self.pending.iter().flatten() {
            out.push((
                seq,
                tool_result_closer(turn, call, seq, last_time, tool_messages),
            ));
            seq += 1;
        }
        if let Some(step) = &self.open_step {
            let data = ObjectWriter::new()
                .raw("turn", turn)
                .raw("step", step)
                .finish();
            out.push((seq, envelope("step/end", seq, last_time, &data)));
            seq += 1;
        }
        let reason = ObjectWriter::new().string("kind", "interrupted").finish();
        let data = ObjectWriter::new()
            .raw("turn", turn)
            .raw("reason", &reason)
            .finish();
        out.push((seq, envelope("turn/end", seq, last_time, &data)));
        out
    }
}

fn envelope(event_type: &str, seq: u64, time: i64, data: &str) -> String {
    ObjectWriter::new()
        .string("type", event_type)
        .int("seq", seq as i64)
        .int("time", time)
        .raw("data", data)
        .finish()
}

/// A result for a call the log left pending. At V4 it is the message DSH's V3 -> V4
/// migration makes of the older shape: `role: "tool"`, the call named by `toolCallId`, the
/// block's content and `isError` lifted onto the message.
fn tool_result_closer(
    turn: &str,
    call: &PendingCall,
    seq: u64,
    time: i64,
    tool_message: bool,
) -> String {
    let ((name, code), text) = match call.call_seq {
        Some(_) => (TOOL_OUTCOME_UNKNOWN, OUTCOME_UNKNOWN_TEXT),
        None => (TOOL_NOT_STARTED, NOT_STARTED_TEXT),
    };
    let text_block = ObjectWriter::new()
        .string("type", "text")
        .string("text", text)
        .finish();
    let source = ObjectWriter::new()
        .string("kind", "tool")
        .string("callId", &call.call_id)
        .finish();
    let id = format!("interrupted-tool-result-{}-{seq}", call.call_id);
    let message = if tool_message {
        ObjectWriter::new()
            .string("role", "tool")
            .raw("source", &source)
            .string("toolCallId", &call.call_id)
            .raw("content", &format!("[{text_block}]"))
            .raw("isError", "true")
            .string("id", &id)
            .finish()
    } else {
        let block = ObjectWriter::new()
            .string("type", "tool-result")
            .string("toolCallId", &call.call_id)
            .raw("isError", "true")
            .raw("content", &format!("[{text_block}]"))
            .finish();
        ObjectWriter::new()
            .string("id", &id)
            .string("role", "user")
            .raw("source", &source)
            .raw("content", &format!("[{block}]"))
            .finish()
    };
    let error = ObjectWriter::new()
        .string("name", name)
        .string("code", code)
        .finish();
    let data = ObjectWriter::new()
        .raw("turn", turn)
        .raw("step", &call.step)
        .raw("message", &message)
        .raw("error", &error)
        .finish();
    let mut closer = ObjectWriter::new()
        .string("type", "tool/result")
        .int("seq", seq as i64)
        .int("time", time)
        .raw("data", &data)
        .string("surfaceOp", "append");
    if let Some(call_seq) = call.call_seq {
        closer = closer.raw("sourceEventSeqs", &format!("[{call_seq}]"));
    }
    closer.finish()
}
