//! `tool-audit`: every tool call of a session, with its arguments, the status of its result,
//! the time from call to result, and the replacement that shadowed its result, if one did.
//! spec: format-spec/cache.md#tool-audit

use std::collections::HashMap;

use std::borrow::Cow;

use bytes::Bytes;

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
    pub const VERSION: u32 = 2;
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
///
/// Beside the calls, the state keeps what its checkpoint is made of: the fold's *entries*
/// (a call made, a call answered, a result shadowed), in the order folded, which only grow
/// at their end. The store appends what was added to them since its last checkpoint to a
/// file of their own instead of rewriting every call's arguments each time, and a
/// checkpoint is read back by replaying them. spec: format-spec/cache.md#tool-audit
#[derive(Debug, Clone, Default)]
pub struct ToolCalls {
    /// The calls.
    pub calls: Vec<ToolCallRecord>,
    /// Call index by call id, for the calls not answered yet.
    open: HashMap<String, usize>,
    /// Call index by the seq of its result, for results a replacement may shadow.
    results: SeqMap<usize>,
    /// The entries of the checkpoint the state was read from (kept as read: mapped from its
    /// file when large).
    stored: Bytes,
    /// The entries folded since, encoded as the checkpoint stores them.
    entries: Vec<u8>,
    /// Entries in `stored` and `entries` together.
    entry_count: u64,
}

/// Two states are equal when their calls are and so are the entries that made them,
/// however those are split between what was read and what was folded since.
impl PartialEq for ToolCalls {
    fn eq(&self, other: &Self) -> bool {
        self.calls == other.calls
            && self.open == other.open
            && self.results == other.results
            && self.entry_count == other.entry_count
            && self
                .stored
                .iter()
                .chain(&self.entries)
                .eq(other.stored.iter().chain(&other.entries))
    }
}

impl Eq for ToolCalls {}

/// The entry tags of the checkpoint's appended part.
const CALL: u8 = 0;
const ANSWER: u8 = 1;
const SHADOWING: u8 = 2;

/// The length of the checkpoint's rest: the entry count and the call count.
const REST_LEN: u64 = 16;

/// One entry of the fold, as its checkpoint replays it.
enum Entry {
    /// A `tool/call`.
    Call(ToolCallRecord),
    /// The result answering the call at this index.
    Answer { call: usize, outcome: ToolOutcome },
    /// A replacement (seq `by`) citing the result of the call at this index.
    Shadowing { call: usize, by: u64 },
}

impl ToolCalls {
    /// Encodes `entry` after the entries folded so far and applies it.
    fn fold_in(&mut self, entry: Entry) -> Result<(), &'static str> {
        let out = &mut self.entries;
        match &entry {
            Entry::Call(c) => {
                out.push(CALL);
                put_u64(out, c.seq);
                put_u64(out, c.time as u64);
                put_u64(out, c.turn as u64);
                put_u64(out, c.step as u64);
                put_str(out, &c.call_id);
                put_str(out, &c.name);
                put_str(out, &c.arguments);
            }
            Entry::Answer { call, outcome } => {
                out.push(ANSWER);
                put_u64(out, *call as u64);
                put_u64(out, outcome.seq);
                put_u64(out, outcome.time as u64);
                out.push(u8::from(outcome.error));
            }
            Entry::Shadowing { call, by } => {
                out.push(SHADOWING);
                put_u64(out, *call as u64);
                put_u64(out, *by);
            }
        }
        self.apply(entry)
    }

    /// Applies `entry`, refusing one the fold could not have made at this point (a replay
    /// of bytes it did not write).
    fn apply(&mut self, entry: Entry) -> Result<(), &'static str> {
        self.entry_count += 1;
        match entry {
            Entry::Call(c) => {
                // A call id reused while open answers its latest call.
                self.open.insert(c.call_id.clone(), self.calls.len());
                self.calls.push(c);
            }
            Entry::Answer { call, outcome } => {
                let c = self
                    .calls
                    .get_mut(call)
                    .ok_or("an answer to a call not made")?;
                if self.open.remove(&c.call_id) != Some(call) {
                    return Err("an answer to a call not open under its id");
                }
                if self.results.insert(outcome.seq, call).is_some() {
                    return Err("a result answering two calls");
                }
                c.result = Some(outcome);
            }
            Entry::Shadowing { call, by } => {
                let c = self
                    .calls
                    .get_mut(call)
                    .filter(|c| c.result.is_some())
                    .ok_or("a shadowing of a call not answered")?;
                c.shadowed_by = Some(by);
            }
        }
        Ok(())
    }

    /// The state the entries `stored` make, keeping them.
    fn replay(stored: Bytes) -> Result<ToolCalls, ProjectionError> {
        let bad = |what: &str| ProjectionError::Undecodable(what.to_owned());
        let mut s = ToolCalls::default();
        let mut r = Reader::new(&stored);
        while !r.rest().is_empty() {
            let entry = match r.u8()? {
                CALL => Entry::Call(ToolCallRecord {
                    seq: r.u64()?,
                    time: r.u64()? as i64,
                    turn: r.u64()? as i64,
                    step: r.u64()? as i64,
                    call_id: r.str()?,
                    name: r.str()?,
                    arguments: r.str()?,
                    result: None,
                    shadowed_by: None,
                }),
                ANSWER => {
                    let call = usize::try_from(r.u64()?).map_err(|_| bad("a call index"))?;
                    let seq = r.u64()?;
                    let time = r.u64()? as i64;
                    let error = match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return Err(bad("an error flag other than 0 or 1")),
                    };
                    Entry::Answer {
                        call,
                        outcome: ToolOutcome { seq, time, error },
                    }
                }
                SHADOWING => Entry::Shadowing {
                    call: usize::try_from(r.u64()?).map_err(|_| bad("a call index"))?,
                    by: r.u64()?,
                },
                _ => return Err(bad("an entry tag other than 0, 1 or 2")),
            };
            s.apply(entry).map_err(bad)?;
        }
        s.stored = stored;
        Ok(s)
    }

    /// The checkpoint's rest: the entry count and the call count, which its entries must
    /// make.
    fn rest(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REST_LEN as usize);
        put_u64(&mut out, self.entry_count);
        put_u64(&mut out, self.calls.len() as u64);
        out
    }

    /// A checkpoint's state: its entries replayed, checked against its rest.
    fn decode_parts(rest: &[u8], entries: Bytes) -> Result<ToolCalls, ProjectionError> {
        let s = ToolCalls::replay(entries)?;
        let mut r = Reader::new(rest);
        let (entry_count, calls) = (r.u64()?, r.u64()?);
        r.finish()?;
        if entry_count != s.entry_count || calls != s.calls.len() as u64 {
            return Err(ProjectionError::Undecodable(
                "entries that do not make the counts of the rest".to_owned(),
            ));
        }
        Ok(s)
    }
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

    /// The audit's entries are an appended part and its rest is two counts, so a
    /// checkpoint costs the entries folded since the last one.
    fn checkpoint_every(&self, _: &ToolCalls, refresh_events: u64, events: u64) -> u64 {
        super::appended_checkpoint_every(refresh_events, events, REST_LEN)
    }

    fn init(&self, _header: &SessionHeader) -> ToolCalls {
        ToolCalls::default()
    }

    fn apply(&self, s: &mut ToolCalls, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let event = e.event;
        let refused = |what: &str| ProjectionError::refused(event, what);
        let replace = matches!(event.surface_op(), Some(SurfaceOp::Replace { .. }));
        if replace {
            for source in event.source_event_seqs().unwrap_or_default() {
                if let Some(&call) = s.results.get(&source.get()) {
                    s.fold_in(Entry::Shadowing {
                        call,
                        by: event.seq().get(),
                    })
                    .map_err(refused)?;
                }
            }
        }
        if e.kind != kind::TOOL_CALL && e.kind != kind::TOOL_RESULT {
            return Ok(());
        }
        if event.event_type() == "tool/call" {
            let call = ToolCallFields::read(event)?;
            s.fold_in(Entry::Call(ToolCallRecord {
                seq: event.seq().get(),
                time: event.time(),
                turn: call.turn,
                step: call.step,
                call_id: call.call_id.into_owned(),
                name: call.name.into_owned(),
                arguments: call.arguments.into_owned(),
                result: None,
                shadowed_by: None,
            }))
            .map_err(refused)?;
        } else if event.event_type() == "tool/result" && !replace {
            let result = ToolResultFields::read(event)?;
            if let Some(&call) = s.open.get(result.call_id.as_ref()) {
                s.fold_in(Entry::Answer {
                    call,
                    outcome: ToolOutcome {
                        seq: event.seq().get(),
                        time: event.time(),
                        error: result.is_error(),
                    },
                })
                .map_err(refused)?;
            }
        }
        Ok(())
    }

    /// The checkpoint in one buffer: the entries after their length (8 bytes), then the
    /// rest.
    fn encode(&self, s: &ToolCalls, out: &mut Vec<u8>) {
        super::encode_with_parts(self, s, out);
    }

    /// The rest of the checkpoint, after its entries.
    fn encode_pieces<'s>(&self, s: &'s ToolCalls, pieces: &mut Vec<Cow<'s, [u8]>>) {
        pieces.push(Cow::Owned(s.rest()));
    }

    fn decode(&self, bytes: &[u8]) -> Result<ToolCalls, ProjectionError> {
        self.decode_shared(Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(&self, bytes: Bytes) -> Result<ToolCalls, ProjectionError> {
        super::decode_with_parts(self, bytes)
    }

    /// The entries.
    fn appended_parts(&self) -> usize {
        1
    }

    fn appended<'s>(&self, s: &'s ToolCalls, parts: &mut Vec<Vec<&'s [u8]>>) {
        parts.push(vec![&s.stored[..], &s.entries[..]]);
    }

    fn decode_appended(
        &self,
        rest: Bytes,
        parts: Vec<Bytes>,
    ) -> Result<ToolCalls, ProjectionError> {
        let [entries]: [Bytes; 1] = parts
            .try_into()
            .map_err(|_| ProjectionError::Undecodable("not one appended part".into()))?;
        ToolCalls::decode_parts(&rest, entries)
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
