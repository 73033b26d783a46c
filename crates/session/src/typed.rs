//! Typed, borrowed views of the core events and the compaction events.
//!
//! Views are read on demand from the validated payload (no copy of the JSON); any other
//! type is [`EventView::Opaque`] and is stored and replayed untouched. A view fails only
//! when a field it names is missing or has the wrong type.

use std::borrow::Cow;

use crate::error::{Error, Rule};
use crate::event::Event;
use crate::json::JsonRef;

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TurnEndReason<'a> {
    /// The model finished.
    Completed,
    /// Cancelled; `by` is the inner reason kind (`user`, `parent`, `hook`, `disposed`, `legacy`).
    Aborted {
        /// The inner reason kind.
        by: Option<Cow<'a, str>>,
    },
    /// A hook blocked the turn.
    Blocked,
    /// A failure with its message and code.
    Error {
        /// The failure object.
        error: Option<JsonRef<'a>>,
    },
    /// The provider hit its output limit.
    MaxTokens,
    /// Closed by restart repair.
    Interrupted,
    /// A kind this crate does not model.
    Other(Cow<'a, str>),
}

/// One element of a provider stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Chunk<'a> {
    /// A content block opens.
    BlockStart {
        /// Block index.
        index: i64,
        /// Block type (`text`, `reasoning`, `tool-call`).
        block_type: Cow<'a, str>,
    },
    /// Visible text.
    TextDelta {
        /// Block index.
        index: i64,
        /// The text piece.
        text: Cow<'a, str>,
    },
    /// Reasoning text.
    ReasoningDelta {
        /// Block index.
        index: i64,
        /// The text piece.
        text: Cow<'a, str>,
    },
    /// A piece of tool-call arguments.
    ToolCallDelta {
        /// Block index.
        index: i64,
        /// The call id.
        id: Cow<'a, str>,
        /// The tool name, on the first pieces.
        name: Option<Cow<'a, str>>,
        /// The arguments piece.
        arguments_delta: Cow<'a, str>,
    },
    /// A content block closes with its full value.
    BlockEnd {
        /// Block index.
        index: i64,
        /// The finished block.
        block: JsonRef<'a>,
    },
    /// Provider-reported usage (exact accounting).
    Usage(JsonRef<'a>),
    /// The stream finished.
    Finish {
        /// The finish reason object.
        reason: JsonRef<'a>,
    },
    /// A chunk type this crate does not model.
    Other(JsonRef<'a>),
}

/// A typed view of one event.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventView<'a> {
    /// `turn/start`
    TurnStart { turn: i64 },
    /// `turn/end`
    TurnEnd {
        turn: i64,
        reason: TurnEndReason<'a>,
    },
    /// `step/start`
    StepStart { turn: i64, step: i64 },
    /// `step/end`
    StepEnd { turn: i64, step: i64 },
    /// `assistant/chunk`
    AssistantChunk {
        turn: i64,
        step: i64,
        chunk: Chunk<'a>,
    },
    /// `assistant/message`: the settlement of one provider stream.
    AssistantMessage {
        turn: i64,
        step: i64,
        message: JsonRef<'a>,
        usage: Option<JsonRef<'a>>,
        interrupted: bool,
        stream: Option<JsonRef<'a>>,
    },
    /// `assistant/attempt`: a failed or cancelled provider stream.
    AssistantAttempt {
        turn: i64,
        step: i64,
        outcome: Cow<'a, str>,
        stream: Option<JsonRef<'a>>,
    },
    /// `tool/call`
    ToolCall {
        turn: i64,
        step: i64,
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        arguments: Cow<'a, str>,
    },
    /// `tool/result`
    ToolResult {
        turn: i64,
        step: i64,
        call_id: Cow<'a, str>,
        message: JsonRef<'a>,
        error: Option<JsonRef<'a>>,
    },
    /// `user/message`
    UserMessage { message: JsonRef<'a> },
    /// `system/message`
    SystemMessage { message: JsonRef<'a> },
    /// `todo/write`
    TodoWrite { todos: JsonRef<'a> },
    /// `request/header`
    RequestHeader {
        header: JsonRef<'a>,
        provider: Cow<'a, str>,
        model: Cow<'a, str>,
        reason: Cow<'a, str>,
    },
    /// `request/context`
    RequestContext {
        provider: Cow<'a, str>,
        model: Cow<'a, str>,
        context_window: Option<i64>,
    },
    /// `session/end-seed`
    EndSeed,
    /// `compaction/start`
    CompactionStart {
        compaction_id: Cow<'a, str>,
        turn: Option<i64>,
    },
    /// `compaction/summary`
    CompactionSummary {
        compaction_id: Cow<'a, str>,
        summary: JsonRef<'a>,
        shadowed_seqs: Vec<u64>,
        shadowed_token_count: Option<i64>,
    },
    /// `compaction/prune`
    CompactionPrune {
        shadowed_seqs: Vec<u64>,
        shadowed_token_count: Option<i64>,
    },
    /// `compaction/end`
    CompactionEnd {
        compaction_id: Cow<'a, str>,
        error: Option<Cow<'a, str>>,
    },
    /// Any other type, kept as stored.
    Opaque {
        event_type: &'a str,
        data: JsonRef<'a>,
    },
}

struct Fields<'a> {
    event: &'a Event,
    data: JsonRef<'a>,
}

impl<'a> Fields<'a> {
    fn missing(&self, key: &str, what: &str) -> Error {
        Error::invalid(
            self.event.seq().get(),
            self.event.event_type(),
            Rule::Payload,
            format!("{key} must be {what}"),
        )
    }
    fn int(&self, key: &str) -> Result<i64, Error> {
        self.data
            .get(key)
            .and_then(|v| v.as_safe_integer())
            .ok_or_else(|| self.missing(key, "a safe integer"))
    }
    fn opt_int(&self, key: &str) -> Option<i64> {
        self.data.get(key).and_then(|v| v.as_safe_integer())
    }
    fn string(&self, key: &str) -> Result<Cow<'a, str>, Error> {
        self.data
            .get(key)
            .and_then(|v| v.as_str())
            .ok_or_else(|| self.missing(key, "a string"))
    }
    fn any(&self, key: &str) -> Result<JsonRef<'a>, Error> {
        self.data
            .get(key)
            .ok_or_else(|| self.missing(key, "present"))
    }
    fn seqs(&self, key: &str) -> Result<Vec<u64>, Error> {
        let list = self
            .data
            .get(key)
            .filter(|l| l.is_array())
            .ok_or_else(|| self.missing(key, "an array"))?;
        list.elements()
            .map(|s| {
                s.as_seq()
                    .ok_or_else(|| self.missing(key, "an array of seqs"))
            })
            .collect()
    }
}

fn chunk_view<'a>(f: &Fields<'a>, chunk: JsonRef<'a>) -> Result<Chunk<'a>, Error> {
    let c = Fields {
        event: f.event,
        data: chunk,
    };
    let kind = c.string("type")?;
    Ok(match kind.as_ref() {
        "block-start" => Chunk::BlockStart {
            index: c.int("index")?,
            block_type: c.string("blockType")?,
        },
        "text-delta" => Chunk::TextDelta {
            index: c.int("index")?,
            text: c.string("text")?,
        },
        "reasoning-delta" => Chunk::ReasoningDelta {
            index: c.int("index")?,
            text: c.string("text")?,
        },
        "tool-call-delta" => Chunk::ToolCallDelta {
            index: c.int("index")?,
            id: c.string("id")?,
            name: chunk.get("name").and_then(|n| n.as_str()),
            arguments_delta: c.string("argumentsDelta")?,
        },
        "block-end" => Chunk::BlockEnd {
            index: c.int("index")?,
            block: c.any("block")?,
        },
        "usage" => Chunk::Usage(c.any("usage")?),
        "finish" => Chunk::Finish {
            reason: c.any("reason")?,
        },
        _ => Chunk::Other(chunk),
    })
}

fn turn_end_reason<'a>(f: &Fields<'a>) -> Result<TurnEndReason<'a>, Error> {
    let reason = f.any("reason")?;
    let r = Fields {
        event: f.event,
        data: reason,
    };
    let kind = r.string("kind")?;
    Ok(match kind.as_ref() {
        "completed" => TurnEndReason::Completed,
        "aborted" => TurnEndReason::Aborted {
            by: reason
                .get("reason")
                .and_then(|i| i.get("kind"))
                .and_then(|k| k.as_str()),
        },
        "blocked" => TurnEndReason::Blocked,
        "error" => TurnEndReason::Error {
            error: reason.get("error"),
        },
        "max-tokens" => TurnEndReason::MaxTokens,
        "interrupted" => TurnEndReason::Interrupted,
        _ => TurnEndReason::Other(kind),
    })
}

impl Event {
    /// The typed view of this event (after any legacy upgrade).
    pub fn view(&self) -> Result<EventView<'_>, Error> {
        let f = Fields {
            event: self,
            data: self.data(),
        };
        let message = || f.any("message");
        Ok(match self.event_type() {
            "turn/start" => EventView::TurnStart {
                turn: f.int("turn")?,
            },
            "turn/end" => EventView::TurnEnd {
                turn: f.int("turn")?,
                reason: turn_end_reason(&f)?,
            },
            "step/start" => EventView::StepStart {
                turn: f.int("turn")?,
                step: f.int("step")?,
            },
            "step/end" => EventView::StepEnd {
                turn: f.int("turn")?,
                step: f.int("step")?,
            },
            "assistant/chunk" => EventView::AssistantChunk {
                turn: f.int("turn")?,
                step: f.int("step")?,
                chunk: chunk_view(&f, f.any("chunk")?)?,
            },
            "assistant/message" => EventView::AssistantMessage {
                turn: f.int("turn")?,
                step: f.int("step")?,
                message: message()?,
                usage: f.data.get("usage"),
                interrupted: f.data.get("interrupted").and_then(|i| i.as_bool()) == Some(true),
                stream: f.data.get("stream"),
            },
            "assistant/attempt" => EventView::AssistantAttempt {
                turn: f.int("turn")?,
                step: f.int("step")?,
                outcome: f.string("outcome")?,
                stream: f.data.get("stream"),
            },
            "tool/call" => EventView::ToolCall {
                turn: f.int("turn")?,
                step: f.int("step")?,
                call_id: f.string("callId")?,
                name: f.string("name")?,
                arguments: f.string("arguments")?,
            },
            "tool/result" => {
                let message = message()?;
                let source = Fields {
                    event: self,
                    data: message.get("source").unwrap_or(message),
                };
                EventView::ToolResult {
                    turn: f.int("turn")?,
                    step: f.int("step")?,
                    call_id: source.string("callId")?,
                    message,
                    error: f.data.get("error"),
                }
            }
            "user/message" => EventView::UserMessage { message: f.data },
            "system/message" => EventView::SystemMessage { message: f.data },
            "todo/write" => EventView::TodoWrite {
                todos: f.any("todos")?,
            },
            "request/header" => {
                let header = f.any("header")?;
                let config = Fields {
                    event: self,
                    data: header.get("config").unwrap_or(header),
                };
                EventView::RequestHeader {
                    header,
                    provider: config.string("provider")?,
                    model: config.string("model")?,
                    reason: f.string("reason")?,
                }
            }
            "request/context" => EventView::RequestContext {
                provider: f.string("provider")?,
                model: f.string("model")?,
                context_window: f.opt_int("contextWindow"),
            },
            "session/end-seed" => EventView::EndSeed,
            "compaction/start" => EventView::CompactionStart {
                compaction_id: f.string("compactionId")?,
                turn: f.opt_int("turn"),
            },
            "compaction/summary" => EventView::CompactionSummary {
                compaction_id: f.string("compactionId")?,
                summary: f.any("summary")?,
                shadowed_seqs: f.seqs("shadowedSeqs")?,
                shadowed_token_count: f.opt_int("shadowedTokenCount"),
            },
            "compaction/prune" => EventView::CompactionPrune {
                shadowed_seqs: f.seqs("shadowedSeqs")?,
                shadowed_token_count: f.opt_int("shadowedTokenCount"),
            },
            "compaction/end" => EventView::CompactionEnd {
                compaction_id: f.string("compactionId")?,
                error: f.data.get("error").and_then(|e| e.as_str()),
            },
            other => EventView::Opaque {
                event_type: other,
                data: f.data,
            },
        })
    }
}
