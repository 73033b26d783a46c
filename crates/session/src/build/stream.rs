//! The provider stream (`assistant/chunk`) and the log-only events a turn may write
//! (`todo/write`, `session/end-seed`).

use super::{int, usage_json, Block, BuildEvent, Position};
use crate::error::Error;
use crate::event::EventInput;
use crate::json::ObjectWriter;
use crate::tokens::Usage;

/// One chunk of a provider stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Chunk {
    BlockStart {
        index: u32,
        block_type: String,
    },
    Delta {
        kind: &'static str,
        index: u32,
        text: String,
    },
    ToolCallDelta {
        index: u32,
        id: String,
        name: Option<String>,
        arguments_delta: String,
    },
    BlockEnd {
        index: u32,
        block: Block,
    },
    Usage(Usage),
    Finish {
        kind: String,
    },
}

/// `assistant/chunk {turn, step, chunk}`: one piece of the open step's provider stream
/// (runs of deltas are packed into chunk rows on export).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantChunk {
    chunk: Chunk,
    pub(super) at: Option<i64>,
}

impl AssistantChunk {
    fn new(chunk: Chunk) -> Self {
        AssistantChunk { chunk, at: None }
    }

    /// `block-start {index, blockType}`: content block `index` (`text`, `reasoning`,
    /// `tool-call`) begins.
    pub fn block_start(index: u32, block_type: impl Into<String>) -> Self {
        Self::new(Chunk::BlockStart {
            index,
            block_type: block_type.into(),
        })
    }

    /// `text-delta {index, text}`.
    pub fn text_delta(index: u32, text: impl Into<String>) -> Self {
        Self::new(Chunk::Delta {
            kind: "text-delta",
            index,
            text: text.into(),
        })
    }

    /// `reasoning-delta {index, text}`.
    pub fn reasoning_delta(index: u32, text: impl Into<String>) -> Self {
        Self::new(Chunk::Delta {
            kind: "reasoning-delta",
            index,
            text: text.into(),
        })
    }

    /// `tool-call-delta {index, id, name?, argumentsDelta}`: part of a tool call's arguments
    /// (the name usually comes with the first delta only).
    pub fn tool_call_delta(
        index: u32,
        id: impl Into<String>,
        name: Option<&str>,
        arguments_delta: impl Into<String>,
    ) -> Self {
        Self::new(Chunk::ToolCallDelta {
            index,
            id: id.into(),
            name: name.map(str::to_owned),
            arguments_delta: arguments_delta.into(),
        })
    }

    /// `block-end {index, block}`: content block `index` is complete.
    pub fn block_end(index: u32, block: Block) -> Self {
        Self::new(Chunk::BlockEnd { index, block })
    }

    /// `usage {usage}`: the provider's usage report in the stream.
    pub fn usage(usage: Usage) -> Self {
        Self::new(Chunk::Usage(usage))
    }

    /// `finish {reason: {kind}}` with `kind` `stop`, `tool-calls` or `max-tokens`.
    pub fn finish(kind: impl Into<String>) -> Self {
        Self::new(Chunk::Finish { kind: kind.into() })
    }
}

impl Chunk {
    fn json(&self) -> String {
        let index = |kind: &str, index: &u32| {
            ObjectWriter::new()
                .string("type", kind)
                .int("index", i64::from(*index))
        };
        match self {
            Chunk::BlockStart {
                index: i,
                block_type,
            } => index("block-start", i)
                .string("blockType", block_type)
                .finish(),
            Chunk::Delta {
                kind,
                index: i,
                text,
            } => index(kind, i).string("text", text).finish(),
            Chunk::ToolCallDelta {
                index: i,
                id,
                name,
                arguments_delta,
            } => {
                let mut chunk = index("tool-call-delta", i).string("id", id);
                if let Some(name) = name {
                    chunk = chunk.string("name", name);
                }
                chunk.string("argumentsDelta", arguments_delta).finish()
            }
            Chunk::BlockEnd { index: i, block } => {
                let mut out = String::new();
                block.write(&mut out);
                index("block-end", i).raw("block", &out).finish()
            }
            Chunk::Usage(usage) => ObjectWriter::new()
                .string("type", "usage")
                .raw("usage", &usage_json(usage))
                .finish(),
            Chunk::Finish { kind } => {
                let reason = ObjectWriter::new().string("kind", kind).finish();
                ObjectWriter::new()
                    .string("type", "finish")
                    .raw("reason", &reason)
                    .finish()
            }
        }
    }
}

impl BuildEvent for AssistantChunk {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (turn, step) = position.turn_and_step("assistant/chunk")?;
        let data = ObjectWriter::new()
            .int("turn", int(turn))
            .int("step", int(step))
            .raw("chunk", &self.chunk.json())
            .finish();
        Ok(EventInput::new(
            "assistant/chunk",
            position.time(self.at),
            data,
        ))
    }
}

/// The state of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// `todo/write {todos: [{content, status}]}`: the agent's todo list, replaced whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoWrite {
    pub(super) todos: Vec<(String, TodoStatus)>,
    pub(super) at: Option<i64>,
}

impl TodoWrite {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an item.
    pub fn todo(mut self, content: impl Into<String>, status: TodoStatus) -> Self {
        self.todos.push((content.into(), status));
        self
    }
}

impl BuildEvent for TodoWrite {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let items: Vec<String> = self
            .todos
            .iter()
            .map(|(content, status)| {
                let status = match status {
                    TodoStatus::Pending => "pending",
                    TodoStatus::InProgress => "in_progress",
                    TodoStatus::Completed => "completed",
                };
                ObjectWriter::new()
                    .string("content", content)
                    .string("status", status)
                    .finish()
            })
            .collect();
        let data = ObjectWriter::new()
            .raw("todos", &format!("[{}]", items.join(",")))
            .finish();
        Ok(EventInput::new("todo/write", position.time(self.at), data))
    }
}

/// `session/end-seed {}`: the marker DSH writes after building a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndSeed {
    pub(super) at: Option<i64>,
}

impl EndSeed {
    /// The marker.
    pub fn new() -> Self {
        Self::default()
    }
}

impl BuildEvent for EndSeed {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        Ok(EventInput::new(
            "session/end-seed",
            position.time(self.at),
            "{}",
        ))
    }
}
