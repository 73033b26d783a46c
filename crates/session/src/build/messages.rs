//! Surface messages (user, system, assistant, tool result) and tool calls.

use super::{blocks_json, int, surface, usage_json, Block, BuildEvent, Position};
use crate::error::{Error, Rule};
use crate::event::EventInput;
use crate::json::ObjectWriter;
use crate::tokens::Usage;

/// `user/message`: a user's message on the surface (`{id, role:"user", content, source}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMessage {
    pub(super) content: Vec<Block>,
    pub(super) source_kind: String,
    pub(super) id: Option<String>,
    pub(super) at: Option<i64>,
}

impl UserMessage {
    /// A message of one text block from the user.
    pub fn text(text: impl Into<String>) -> Self {
        UserMessage {
            content: vec![Block::Text(text.into())],
            source_kind: "user".to_owned(),
            id: None,
            at: None,
        }
    }

    /// Adds a content block.
    pub fn block(mut self, block: Block) -> Self {
        self.content.push(block);
        self
    }

    /// Sets `source.kind` (default `user`; DSH also writes `plugin` and others).
    pub fn source_kind(mut self, kind: impl Into<String>) -> Self {
        self.source_kind = kind.into();
        self
    }
}

impl BuildEvent for UserMessage {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let source = ObjectWriter::new()
            .string("kind", &self.source_kind)
            .finish();
        let data = ObjectWriter::new()
            .string("id", &position.message_id("user", self.id))
            .string("role", "user")
            .raw("content", &blocks_json(&self.content))
            .raw("source", &source)
            .finish();
        Ok(surface("user/message", position.time(self.at), data))
    }
}

/// `system/message`: the rendered system prompt as a surface node (sessionlog's current
/// format version; DSH V0 has no such type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemMessage {
    pub(super) text: String,
    pub(super) id: Option<String>,
    pub(super) at: Option<i64>,
}

impl SystemMessage {
    /// A system prompt.
    pub fn text(text: impl Into<String>) -> Self {
        SystemMessage {
            text: text.into(),
            id: None,
            at: None,
        }
    }
}

impl BuildEvent for SystemMessage {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let data = ObjectWriter::new()
            .string("id", &position.message_id("system", self.id))
            .string("role", "system")
            .raw("content", &blocks_json(&[Block::Text(self.text)]))
            .finish();
        Ok(surface("system/message", position.time(self.at), data))
    }
}

/// `assistant/message`: the model's settled reply in the open step
/// (`{turn, step, message:{id, role:"assistant", content, source:{kind:"model", provider,
/// model}}, usage?}`). Tool-call blocks announce the calls the step's `tool/call` and
/// `tool/result` events then name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantMessage {
    pub(super) provider: String,
    pub(super) model: String,
    pub(super) content: Vec<Block>,
    pub(super) usage: Option<Usage>,
    pub(super) id: Option<String>,
    pub(super) at: Option<i64>,
}

impl AssistantMessage {
    /// An empty reply from `model` of `provider`; add blocks with the methods below.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        AssistantMessage {
            provider: provider.into(),
            model: model.into(),
            content: Vec::new(),
            usage: None,
            id: None,
            at: None,
        }
    }

    /// Adds a text block.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.content.push(Block::Text(text.into()));
        self
    }

    /// Adds a reasoning block.
    pub fn reasoning(mut self, text: impl Into<String>) -> Self {
        self.content.push(Block::Reasoning(text.into()));
        self
    }

    /// Adds a tool-call block (announces call `id`).
    pub fn tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.content.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Records the provider-reported usage of the request (exact accounting).
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

impl BuildEvent for AssistantMessage {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (turn, step) = position.turn_and_step("assistant/message")?;
        let source = ObjectWriter::new()
            .string("kind", "model")
            .string("provider", &self.provider)
            .string("model", &self.model)
            .finish();
        let message = ObjectWriter::new()
            .string("id", &position.message_id("assistant", self.id))
            .string("role", "assistant")
            .raw("content", &blocks_json(&self.content))
            .raw("source", &source)
            .finish();
        let mut data = ObjectWriter::new()
            .int("turn", int(turn))
            .int("step", int(step))
            .raw("message", &message);
        if let Some(usage) = &self.usage {
            data = data.raw("usage", &usage_json(usage));
        }
        Ok(surface(
            "assistant/message",
            position.time(self.at),
            data.finish(),
        ))
    }
}

/// `tool/call {turn, step, callId, name, arguments}`: the tool is about to run (the call was
/// announced by a tool-call block of this step's [`AssistantMessage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) arguments: String,
    pub(super) at: Option<i64>,
}

impl ToolCall {
    /// A dispatch of call `call_id` to tool `name` with `arguments` (JSON text).
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
            at: None,
        }
    }
}

impl BuildEvent for ToolCall {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (turn, step) = position.turn_and_step("tool/call")?;
        let data = ObjectWriter::new()
            .int("turn", int(turn))
            .int("step", int(step))
            .string("callId", &self.call_id)
            .string("name", &self.name)
            .string("arguments", &self.arguments)
            .finish();
        Ok(EventInput::new("tool/call", position.time(self.at), data))
    }
}

/// `tool/result`: a tool's output on the surface, answering an announced call. The step is
/// the announcing step's, and `sourceEventSeqs` cites the call's `tool/call` when one was
/// logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub(super) call_id: String,
    pub(super) content: Vec<Block>,
    pub(super) error: Option<(String, String)>,
    pub(super) id: Option<String>,
    pub(super) at: Option<i64>,
}

impl ToolResult {
    /// A successful result of one text block for call `call_id`.
    pub fn text(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        ToolResult {
            call_id: call_id.into(),
            content: vec![Block::Text(text.into())],
            error: None,
            id: None,
            at: None,
        }
    }

    /// A failed call: the block is marked `isError` and the event carries
    /// `error {name, code}`.
    pub fn error(
        call_id: impl Into<String>,
        text: impl Into<String>,
        name: impl Into<String>,
        code: impl Into<String>,
    ) -> Self {
        ToolResult {
            error: Some((name.into(), code.into())),
            ..Self::text(call_id, text)
        }
    }

    /// Adds a content block.
    pub fn block(mut self, block: Block) -> Self {
        self.content.push(block);
        self
    }
}

impl BuildEvent for ToolResult {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let turn = position.turn("tool/result")?;
        let Some((step, call_seq)) = position.tracker.pending_call(&self.call_id) else {
            return Err(position.refuse(
                "tool/result",
                Rule::ToolPairing,
                &format!(
                    "call {:?} was not announced by an AssistantMessage tool call of this turn, or already has a result",
                    self.call_id
                ),
            ));
        };
        let mut block = ObjectWriter::new()
            .string("type", "tool-result")
            .string("toolCallId", &self.call_id);
        if self.error.is_some() {
            block = block.raw("isError", "true");
        }
        let block = block.raw("content", &blocks_json(&self.content)).finish();
        let source = ObjectWriter::new()
            .string("kind", "tool")
            .string("callId", &self.call_id)
            .finish();
        let message = ObjectWriter::new()
            .string("id", &position.message_id("tool-result", self.id))
            .string("role", "user")
            .raw("content", &format!("[{block}]"))
            .raw("source", &source)
            .finish();
        let mut data = ObjectWriter::new()
            .int("turn", int(turn))
            .raw("step", step)
            .raw("message", &message);
        if let Some((name, code)) = &self.error {
            let error = ObjectWriter::new()
                .string("name", name)
                .string("code", code)
                .finish();
            data = data.raw("error", &error);
        }
        let mut input = surface("tool/result", position.time(self.at), data.finish());
        if let Some(call_seq) = call_seq {
            input = input.with_sources(vec![crate::event::Seq(call_seq)]);
        }
        Ok(input)
    }
}
