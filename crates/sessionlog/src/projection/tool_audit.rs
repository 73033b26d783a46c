//! `tool-audit`: every tool call of a session, with its arguments, the status of its result,
//! the time from call to result, and the replacement that shadowed its result, if one did.
//! spec: format-spec/cache.md#tool-audit

use std::collections::HashMap;

use std::borrow::Cow;

use sessionlog_session::codec::kind;
use sessionlog_session::json::{JsonKind, JsonRef};
use sessionlog_session::{Event, MessageLocation, SessionHeader, SurfaceOp};

use super::bytes::{put_str, put_u64, Reader};
use super::{Projection, ProjectionError, SeqMap, StoredEvent};

/// The `tool-audit` projection. Register with
/// [`StoreOptions::with_projection`](crate::StoreOptions::with_projection)`(ToolAudit)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolAudit;

impl ToolAudit {
    /// The name it is registered under.
    pub const NAME: &'static str = "tool-audit";
    /// The version of its fold and encoding.
    pub const VERSION: u32 = 1;
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The `tool/result` event's seq.
    pub seq: u64,
    /// Its time (ms).
    pub time: i64,
    /// Whether it reports an error.
    pub error: bool,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRecord {
    /// The `tool/call` event's seq.
    pub seq: u64,
    /// Its time (ms).
    pub time: i64,
    /// The turn and step it ran in.
    pub turn: i64,
    /// The step.
    pub step: i64,
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, verbatim.
    pub arguments: String,
    /// Its result, once one was appended.
    pub result: Option<ToolOutcome>,
    /// The seq of the latest replacement that shadowed its result (a shortened result, a
    /// summary), if any.
    pub shadowed_by: Option<u64>,
}

impl ToolCallRecord {
    /// Milliseconds from the call to its result.
    pub fn duration_ms(&self) -> Option<i64> {
        self.result
            .as_ref()
            .map(|r| r.time.saturating_sub(self.time))
    }
}

/// Every tool call of a session, in call order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCalls {
    /// The calls.
    pub calls: Vec<ToolCallRecord>,
    /// Call index by call id, for the calls not answered yet.
    open: HashMap<String, usize>,
    /// Call index by the seq of its result, for results a replacement may shadow.
    results: SeqMap<usize>,
}

impl Projection for ToolAudit {
    type State = ToolCalls;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> u32 {
        Self::VERSION
    }

    fn wants(&self, tag: u8) -> bool {
        // Replacements are surface events; calls and results are what is audited.
        tag == kind::TOOL_CALL || sessionlog_session::is_surface_kind(tag)
    }

    /// The fold counts no tokens.
    fn reads_estimates(&self) -> bool {
        false
    }

    /// The audit's checkpoint holds every call with its arguments, so it grows with the
    /// session.
    fn checkpoint_every(&self, _: &ToolCalls, refresh_events: u64, events: u64) -> u64 {
        super::growing_checkpoint_every(refresh_events, events)
    }

    fn init(&self, _header: &SessionHeader) -> ToolCalls {
        ToolCalls::default()
    }

    fn apply(&self, s: &mut ToolCalls, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let event = e.event;
        let replace = matches!(event.surface_op(), Some(SurfaceOp::Replace { .. }));
        if replace {
            for source in event.source_event_seqs().unwrap_or_default() {
                if let Some(call) = s
                    .results
                    .get(&source.get())
                    .and_then(|&i| s.calls.get_mut(i))
                {
                    call.shadowed_by = Some(event.seq().get());
                }
            }
        }
        if e.kind != kind::TOOL_CALL && e.kind != kind::TOOL_RESULT {
            return Ok(());
        }
        if event.event_type() == "tool/call" {
            let call = ToolCallFields::read(event)?;
            s.open.insert(call.call_id.to_string(), s.calls.len());
            s.calls.push(ToolCallRecord {
                seq: event.seq().get(),
                time: event.time(),
                turn: call.turn,
                step: call.step,
                call_id: call.call_id.into_owned(),
                name: call.name.into_owned(),
                arguments: call.arguments.into_owned(),
                result: None,
                shadowed_by: None,
            });
        } else if event.event_type() == "tool/result" && !replace {
            let result = ToolResultFields::read(event)?;
            if let Some(i) = s.open.remove(result.call_id.as_ref()) {
                if let Some(call) = s.calls.get_mut(i) {
                    call.result = Some(ToolOutcome {
                        seq: event.seq().get(),
                        time: event.time(),
                        error: result.is_error(),
                    });
                    s.results.insert(event.seq().get(), i);
                }
            }
        }
        Ok(())
    }

    fn encode(&self, s: &ToolCalls, out: &mut Vec<u8>) {
        put_u64(out, s.calls.len() as u64);
        for c in &s.calls {
            put_u64(out, c.seq);
            put_u64(out, c.time as u64);
            put_u64(out, c.turn as u64);
            put_u64(out, c.step as u64);
            put_str(out, &c.call_id);
            put_str(out, &c.name);
            put_str(out, &c.arguments);
            match &c.result {
                None => out.push(0),
                Some(r) => {
                    out.push(if r.error { 2 } else { 1 });
                    put_u64(out, r.seq);
                    put_u64(out, r.time as u64);
                }
            }
            match c.shadowed_by {
                None => out.push(0),
                Some(by) => {
                    out.push(1);
                    put_u64(out, by);
                }
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<ToolCalls, ProjectionError> {
        let bad = |what: &str| ProjectionError::Undecodable(what.to_owned());
        let mut r = Reader::new(bytes);
        let mut s = ToolCalls::default();
        for i in 0..r.count(58)? {
            let seq = r.u64()?;
            let time = r.u64()? as i64;
            let turn = r.u64()? as i64;
            let step = r.u64()? as i64;
            let call_id = r.str()?;
            let name = r.str()?;
            let arguments = r.str()?;
            let result = match r.u8()? {
                0 => None,
                flag @ (1 | 2) => Some(ToolOutcome {
                    seq: r.u64()?,
                    time: r.u64()? as i64,
                    error: flag == 2,
                }),
                _ => return Err(bad("a result flag other than 0, 1 or 2")),
            };
            let shadowed_by = match r.u8()? {
                0 => None,
                1 => Some(r.u64()?),
                _ => return Err(bad("a presence flag other than 0 or 1")),
            };
            match &result {
                // A call id reused while open answers its latest call, as in the fold.
                None => {
                    s.open.insert(call_id.clone(), i);
                }
                Some(outcome) => {
                    if s.results.insert(outcome.seq, i).is_some() {
                        return Err(bad("a result answering two calls"));
                    }
                }
            }
            s.calls.push(ToolCallRecord {
                seq,
                time,
                turn,
                step,
                call_id,
                name,
                arguments,
                result,
                shadowed_by,
            });
        }
        r.finish()?;
        Ok(s)
    }
}

/// What the projections read of a `tool/call`, found in one pass over its data.
pub(crate) struct ToolCallFields<'a> {
    pub(crate) turn: i64,
    pub(crate) step: i64,
    pub(crate) call_id: Cow<'a, str>,
    pub(crate) name: Cow<'a, str>,
    pub(crate) arguments: Cow<'a, str>,
}

/// A member a fold needs is missing or of another type.
fn missing(event: &Event, key: &str, what: &str) -> ProjectionError {
    ProjectionError::refused(event, format!("its {key} is not {what}"))
}

/// A string member.
fn string<'a>(
    event: &Event,
    value: Option<JsonRef<'a>>,
    key: &str,
) -> Result<Cow<'a, str>, ProjectionError> {
    value
        .and_then(|v| v.as_str())
        .ok_or_else(|| missing(event, key, "a string"))
}

/// An integer member.
fn integer(event: &Event, value: Option<JsonRef<'_>>, key: &str) -> Result<i64, ProjectionError> {
    value
        .and_then(|v| v.as_safe_integer())
        .ok_or_else(|| missing(event, key, "a safe integer"))
}

impl<'a> ToolCallFields<'a> {
    /// The fields of `event`, a `tool/call`.
    pub(crate) fn read(event: &'a Event) -> Result<ToolCallFields<'a>, ProjectionError> {
        let [turn, step, call_id, name, arguments] =
            event.data_fields(["turn", "step", "callId", "name", "arguments"]);
        Ok(ToolCallFields {
            turn: integer(event, turn, "turn")?,
            step: integer(event, step, "step")?,
            call_id: string(event, call_id, "callId")?,
            name: string(event, name, "name")?,
            arguments: string(event, arguments, "arguments")?,
        })
    }

    /// The call id and the tool name of `event`, a `tool/call`, alone: its arguments (a
    /// JSON text escaped into a string, often long) are neither found nor decoded.
    pub(crate) fn names(event: &'a Event) -> Result<(Cow<'a, str>, Cow<'a, str>), ProjectionError> {
        let [call_id, name] = event.data_fields(["callId", "name"]);
        Ok((
            string(event, call_id, "callId")?,
            string(event, name, "name")?,
        ))
    }
}

/// What the projections read of a `tool/result`, found in the payload index the event
/// was parsed with, not by walking its message again.
pub(crate) struct ToolResultFields<'a> {
    /// The event the fields were read from.
    event: &'a Event,
    /// The call it answers: its message's `source.callId` (or the message's own).
    pub(crate) call_id: Cow<'a, str>,
    /// Its message's `content`.
    content: Option<JsonRef<'a>>,
    error: Option<JsonRef<'a>>,
}

impl<'a> ToolResultFields<'a> {
    /// The fields of `event`, a `tool/result`.
    pub(crate) fn read(event: &'a Event) -> Result<ToolResultFields<'a>, ProjectionError> {
        let [message, error] = event.data_fields(["message", "error"]);
        if message.is_none() {
            return Err(missing(event, "message", "present"));
        }
        let [source, own_call_id, content] = event.message_fields(["source", "callId", "content"]);
        let call_id = match source {
            Some(source) => source.get("callId"),
            None => own_call_id,
        };
        Ok(ToolResultFields {
            event,
            call_id: string(event, call_id, "callId")?,
            content,
            error,
        })
    }

    /// Whether the result reports an error: an `error` in its data, or a block of its
    /// message's `content` marked `isError`. The blocks are read from the payload index the
    /// event was parsed with (walked only when it has none), so a long output in them is
    /// not scanned again.
    pub(crate) fn is_error(&self) -> bool {
        if self.error.is_some_and(|e| e.kind() != JsonKind::Null) {
            return true;
        }
        self.content.is_some_and(|content| {
            self.event
                .content_blocks(MessageLocation::DataMessage, content, ["isError"])
                .any(|(_, [is_error])| is_error.and_then(|v| v.as_bool()) == Some(true))
        })
    }
}
