//! The request envelope (`request/header`) and the context window (`request/context`).

use super::{int, BuildEvent, Position};
use crate::error::Error;
use crate::event::EventInput;
use crate::json::ObjectWriter;

/// Why a request header was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderReason {
    /// The first request of the session.
    Initial,
    /// The first request after the session was resumed.
    Resume,
    /// The provider, model, system prompt or tools changed.
    Change,
}

/// A tool the model may call, as offered in a request header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its parameters as a JSON Schema object (JSON text).
    pub parameters: String,
}

/// `request/header {header:{config:{provider, model, reasoningEffort?, maxTokens?}, system?,
/// tools?}, reason}`: the envelope of the provider requests that follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub(super) provider: String,
    pub(super) model: String,
    pub(super) reason: HeaderReason,
    pub(super) reasoning_effort: Option<String>,
    pub(super) max_tokens: Option<u64>,
    pub(super) system: Option<String>,
    pub(super) tools: Vec<ToolSchema>,
    pub(super) at: Option<i64>,
}

impl RequestHeader {
    /// A header for `model` of `provider`.
    pub fn new(
        provider: impl Into<String>,
        model: impl Into<String>,
        reason: HeaderReason,
    ) -> Self {
        RequestHeader {
            provider: provider.into(),
            model: model.into(),
            reason,
            reasoning_effort: None,
            max_tokens: None,
            system: None,
            tools: Vec::new(),
            at: None,
        }
    }

    /// Sets `config.reasoningEffort`.
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
        self
    }

    /// Sets `config.maxTokens`.
    pub fn max_tokens(mut self, max_tokens: u64) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Offers a tool.
    pub fn tool(mut self, tool: ToolSchema) -> Self {
        self.tools.push(tool);
        self
    }
}

impl BuildEvent for RequestHeader {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let mut config = ObjectWriter::new()
            .string("provider", &self.provider)
            .string("model", &self.model);
        if let Some(effort) = &self.reasoning_effort {
            config = config.string("reasoningEffort", effort);
        }
        if let Some(max) = self.max_tokens {
            config = config.int("maxTokens", int(max));
        }
        let mut header = ObjectWriter::new().raw("config", &config.finish());
        if let Some(system) = &self.system {
            header = header.string("system", system);
        }
        if !self.tools.is_empty() {
            let mut tools = String::from("[");
            for (i, tool) in self.tools.iter().enumerate() {
                if i > 0 {
                    tools.push(',');
                }
                tools.push_str(
                    &ObjectWriter::new()
                        .string("name", &tool.name)
                        .string("description", &tool.description)
                        .raw("parameters", &tool.parameters)
                        .finish(),
                );
            }
            tools.push(']');
            header = header.raw("tools", &tools);
        }
        let reason = match self.reason {
            HeaderReason::Initial => "initial",
            HeaderReason::Resume => "resume",
            HeaderReason::Change => "change",
        };
        let data = ObjectWriter::new()
            .raw("header", &header.finish())
            .string("reason", reason)
            .finish();
        Ok(EventInput::new(
            "request/header",
            position.time(self.at),
            data,
        ))
    }
}

/// `request/context {provider, model, contextWindow?}`: the model's context window, for
/// context pressure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    pub(super) provider: String,
    pub(super) model: String,
    pub(super) context_window: Option<u64>,
    pub(super) at: Option<i64>,
}

impl RequestContext {
    /// The context of `model` of `provider`.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        RequestContext {
            provider: provider.into(),
            model: model.into(),
            context_window: None,
            at: None,
        }
    }

    /// Sets the context window in tokens.
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }
}

impl BuildEvent for RequestContext {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let mut data = ObjectWriter::new()
            .string("provider", &self.provider)
            .string("model", &self.model);
        if let Some(window) = self.context_window {
            data = data.int("contextWindow", int(window));
        }
        Ok(EventInput::new(
            "request/context",
            position.time(self.at),
            data.finish(),
        ))
    }
}
