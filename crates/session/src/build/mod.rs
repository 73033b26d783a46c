//! Typed event builders: the events of the DSH vocabulary that shape a session (turns and
//! steps, messages, tool calls and results, the provider stream, request header and context,
//! usage, compaction, todo lists) without writing JSON. The log-only plugin types (`hook/*`,
//! `approval/*`, `session/title`, …) and capability types are appended as a raw
//! [`EventInput`].
//!
//! A builder holds what only the caller knows (texts, tool names, provider and model, the
//! reason a turn ended). What the session already knows is filled in when the event is
//! appended ([`BuildEvent::build`] against the session's [`Position`]): the turn and step
//! numbers, `surfaceOp`, a tool result's step and `sourceEventSeqs`, message ids, and the
//! time when none was set with `at`. Each builder writes its payload in DSH's key order.
//!
//! ```
//! use sessionlog_session::build::{AssistantMessage, StepEnd, StepStart, ToolCall, ToolResult,
//!     TurnEnd, TurnStart, UserMessage};
//! use sessionlog_session::{FormatVersion, Session, SessionHeader};
//!
//! let mut s = Session::new(SessionHeader::new("s1", 0, None), FormatVersion::dsh_v0());
//! s.try_append(TurnStart::new())?;
//! s.try_append(StepStart::new())?;
//! s.try_append(UserMessage::text("list the files"))?;
//! s.try_append(AssistantMessage::new("deepseek", "deepseek-chat").tool_call("c1", "ls", "{}"))?;
//! s.try_append(ToolCall::new("c1", "ls", "{}"))?;
//! s.try_append(ToolResult::text("c1", "a.txt b.txt"))?;
//! s.try_append(StepEnd::new())?;
//! s.try_append(TurnEnd::completed())?;
//! assert_eq!(s.derive_messages().len(), 3);
//! # Ok::<(), sessionlog_session::Error>(())
//! ```

use crate::error::{Error, Rule};
use crate::event::{EventInput, SurfaceOp};
use crate::json::ObjectWriter;
use crate::repair::TurnTracker;

mod compaction;
mod messages;
mod request;
mod stream;
mod turns;

use crate::tokens::Usage;
pub use compaction::{CompactionEnd, CompactionStart, CompactionSummary, SummaryMessage};
pub use messages::{AssistantMessage, SystemMessage, ToolCall, ToolResult, UserMessage};
pub use request::{HeaderReason, RequestContext, RequestHeader, ToolSchema};
pub use stream::{AssistantChunk, EndSeed, TodoStatus, TodoWrite};
pub use turns::{AbortCause, StepEnd, StepStart, TurnEnd, TurnEndReason, TurnStart};

/// What a builder reads from the session when it is appended: the next seq, the turn
/// tracker (open turn and step, announced calls) and the time to use when none was set.
#[derive(Debug, Clone, Copy)]
pub struct Position<'a> {
    tracker: &'a TurnTracker,
    next_seq: u64,
    now_ms: i64,
}

impl<'a> Position<'a> {
    pub(crate) fn new(tracker: &'a TurnTracker, next_seq: u64, now_ms: i64) -> Self {
        Position {
            tracker,
            next_seq,
            now_ms,
        }
    }

    /// The seq the event will take.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The time (epoch milliseconds) an event gets when its builder set none.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// The open turn's number, if a turn is open and its number is an integer.
    pub fn open_turn(&self) -> Option<u64> {
        self.tracker.open_turn().and_then(|t| t.parse().ok())
    }

    /// The number the next `turn/start` takes (one past the highest turn so far, 1 at
    /// first), for a caller writing a whole turn as one raw atomic batch.
    pub fn next_turn(&self) -> u64 {
        self.tracker.next_turn()
    }

    /// The open step's number, if a step is open and its number is an integer.
    pub fn open_step(&self) -> Option<u64> {
        self.tracker.open_step().and_then(|s| s.parse().ok())
    }

    fn refuse(&self, event_type: &str, rule: Rule, detail: &str) -> Error {
        Error::invalid(self.next_seq, event_type, rule, detail)
    }

    fn turn(&self, event_type: &str) -> Result<u64, Error> {
        self.open_turn().ok_or_else(|| {
            self.refuse(
                event_type,
                Rule::Nesting,
                "no turn is open: append TurnStart first",
            )
        })
    }

    fn turn_and_step(&self, event_type: &str) -> Result<(u64, u64), Error> {
        let turn = self.turn(event_type)?;
        let step = self.open_step().ok_or_else(|| {
            self.refuse(
                event_type,
                Rule::Nesting,
                "no step is open: append StepStart first",
            )
        })?;
        Ok((turn, step))
    }

    fn time(&self, at: Option<i64>) -> i64 {
        at.unwrap_or(self.now_ms)
    }

    /// A message id unique within the session: `<prefix>-<seq>`.
    fn message_id(&self, prefix: &str, id: Option<String>) -> String {
        id.unwrap_or_else(|| format!("{prefix}-{}", self.next_seq))
    }
}

/// Something that becomes an [`EventInput`] once it knows where in the session it goes.
///
/// Implemented by every builder of this module and by [`EventInput`] itself (the raw form,
/// for capability and unknown types), so `append` takes either.
pub trait BuildEvent {
    /// The envelope fields (all but the seq) for an event appended at `position`. Fails when
    /// the event cannot go there (for example a [`StepStart`] with no turn open).
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error>;
}

impl BuildEvent for EventInput {
    fn build(self, _position: &Position<'_>) -> Result<EventInput, Error> {
        Ok(self)
    }
}

/// `at(time_ms)` on each builder: the event's time in epoch milliseconds (the time of the
/// envelope, `i64` like [`EventInput::time`]). Unset, the time comes from the [`Position`].
macro_rules! time_setter {
    ($($builder:ty),* $(,)?) => {$(
        impl $builder {
            /// Sets the time (epoch milliseconds).
            pub fn at(mut self, time_ms: i64) -> Self {
                self.at = Some(time_ms);
                self
            }
        }
    )*};
}

/// `id(id)` on each message builder. Unset, the id is `<kind>-<seq>` (`user-4`,
/// `assistant-5`, `tool-result-7`, `system-2`), unique in the session.
macro_rules! id_setter {
    ($($builder:ty),* $(,)?) => {$(
        impl $builder {
            /// Sets the message id.
            pub fn id(mut self, id: impl Into<String>) -> Self {
                self.id = Some(id.into());
                self
            }
        }
    )*};
}

time_setter!(
    TurnStart,
    TurnEnd,
    StepStart,
    StepEnd,
    UserMessage,
    SystemMessage,
    AssistantMessage,
    ToolCall,
    ToolResult,
    RequestHeader,
    RequestContext,
    CompactionStart,
    CompactionEnd,
    CompactionSummary,
    SummaryMessage,
    AssistantChunk,
    TodoWrite,
    EndSeed,
);
id_setter!(
    UserMessage,
    SystemMessage,
    AssistantMessage,
    ToolResult,
    SummaryMessage
);

/// A content block of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// `{type:"text", text}`.
    Text(String),
    /// `{type:"reasoning", text}`: the model's reasoning.
    Reasoning(String),
    /// `{type:"tool-call", id, name, arguments}`: a call the model asks for; `arguments` is
    /// the raw JSON text the model produced.
    ToolCall {
        /// The call id (a `tool/call` and the `tool/result` name it).
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model wrote them (JSON text, kept as a string).
        arguments: String,
    },
}

impl Block {
    fn write(&self, out: &mut String) {
        let object = match self {
            Block::Text(text) => ObjectWriter::new()
                .string("type", "text")
                .string("text", text),
            Block::Reasoning(text) => ObjectWriter::new()
                .string("type", "reasoning")
                .string("text", text),
            Block::ToolCall {
                id,
                name,
                arguments,
            } => ObjectWriter::new()
                .string("type", "tool-call")
                .string("id", id)
                .string("name", name)
                .string("arguments", arguments),
        };
        out.push_str(&object.finish());
    }
}

fn blocks_json(blocks: &[Block]) -> String {
    let mut out = String::from("[");
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        block.write(&mut out);
    }
    out.push(']');
    out
}

/// DSH's usage object: `{inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?,
/// reasoningTokens?}` (the optional buckets are written when non-zero).
pub(crate) fn usage_json(usage: &Usage) -> String {
    let mut writer = ObjectWriter::new()
        .int("inputTokens", int(usage.input))
        .int("outputTokens", int(usage.output));
    for (key, value) in [
        ("cacheReadTokens", usage.cache_read),
        ("cacheWriteTokens", usage.cache_write),
        ("reasoningTokens", usage.reasoning),
    ] {
        if value > 0 {
            writer = writer.int(key, int(value));
        }
    }
    writer.finish()
}

/// A count as a JSON integer (counts beyond `i64::MAX` cannot occur in practice; they
/// saturate rather than wrap).
pub(crate) fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

use saturating_i64 as int;

fn surface(event_type: &str, time: i64, data: String) -> EventInput {
    EventInput::new(event_type, time, data).with_surface_op(SurfaceOp::Append)
}

pub(crate) fn seqs_json(seqs: &[crate::event::Seq]) -> String {
    let items: Vec<String> = seqs.iter().map(crate::event::Seq::to_string).collect();
    format!("[{}]", items.join(","))
}
