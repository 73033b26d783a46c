//! Format versions as data: each version is a table of its vocabulary, its surface types,
//! how each surface type maps to a message, and which optional rules apply. Adding a
//! version means adding a table, not touching the fold.

use std::collections::HashSet;

/// Where the message of a surface event lives in its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageLocation {
    /// The payload is the message (`user/message`, `system/message`).
    Data,
    /// The message is `data.message` (`assistant/message`, `tool/result`).
    DataMessage,
}

/// The message-shape rule a surface type enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageRule {
    /// `role: "user"`, a source with a non-empty `kind`.
    User,
    /// `role: "assistant"`, `source {kind: "model", provider, model}`.
    Assistant,
    /// `role: "user"`, `source {kind: "tool", callId}`, one `tool-result` block for it.
    ToolResult,
    /// `role: "system"`; `source`, when present, has a non-empty `kind`.
    System,
}

/// One surface event type of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurfaceType {
    /// The event type.
    pub event_type: &'static str,
    /// Where its message lives.
    pub message: MessageLocation,
    /// Its message-shape rule.
    pub rule: MessageRule,
    /// Whether `derive_messages` skips it when its message content is empty
    /// (DSH skips usage-only assistant settlements).
    pub skip_empty_content: bool,
}

/// A session format version: vocabulary, surface table and optional rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatVersion {
    name: &'static str,
    known_types: HashSet<String>,
    surface_types: Vec<SurfaceType>,
    /// Whether `assistant/message` may carry a `stream` record that is validated.
    pub settlement_stream_record: bool,
    /// Whether `assistant/attempt` payloads are validated as attempts.
    pub attempts: bool,
}

/// The 48 event types DSH 0.1.0-rc.8 knows (`dsh-known-event-types.txt`).
pub const DSH_V0_KNOWN_TYPES: [&str; 48] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

fn v0_surface_types() -> Vec<SurfaceType> {
    vec![
        SurfaceType {
            event_type: "user/message",
            message: MessageLocation::Data,
            rule: MessageRule::User,
            skip_empty_content: false,
        },
        SurfaceType {
            event_type: "assistant/message",
            message: MessageLocation::DataMessage,
            rule: MessageRule::Assistant,
            skip_empty_content: true,
        },
        SurfaceType {
            event_type: "tool/result",
            message: MessageLocation::DataMessage,
            rule: MessageRule::ToolResult,
            skip_empty_content: false,
        },
    ]
}

impl FormatVersion {
    /// DSH format V0 as written by 0.1.0-rc.8: three surface types, 48 known types.
    pub fn dsh_v0() -> Self {
        FormatVersion {
            name: "DSH V0",
            known_types: DSH_V0_KNOWN_TYPES.iter().map(|t| (*t).to_owned()).collect(),
            surface_types: v0_surface_types(),
            settlement_stream_record: false,
            attempts: false,
        }
    }

    /// The current model: V0 plus `system/message` (the rendered system prompt as a
    /// surface node), `assistant/attempt` (a failed or cancelled provider stream,
    /// structural) and settlements carrying a compact timed `stream` record.
    pub fn current() -> Self {
        let mut version = Self::dsh_v0();
        version.name = "sessionlog V1";
        version.known_types.insert("system/message".to_owned());
        version.known_types.insert("assistant/attempt".to_owned());
        version.surface_types.insert(
            0,
            SurfaceType {
                event_type: "system/message",
                message: MessageLocation::Data,
                rule: MessageRule::System,
                skip_empty_content: false,
            },
        );
        version.settlement_stream_record = true;
        version.attempts = true;
        version
    }

    /// Adds a known type (for example a namespaced capability event).
    pub fn with_known_type(mut self, event_type: impl Into<String>) -> Self {
        self.known_types.insert(event_type.into());
        self
    }

    /// The version's display name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether `event_type` is in the vocabulary.
    pub fn is_known(&self, event_type: &str) -> bool {
        self.known_types.contains(event_type)
    }

    /// The surface entry for `event_type`, if it is a surface type.
    pub fn surface_type(&self, event_type: &str) -> Option<&SurfaceType> {
        self.surface_types
            .iter()
            .find(|s| s.event_type == event_type)
    }

    /// All surface types.
    pub fn surface_types(&self) -> &[SurfaceType] {
        &self.surface_types
    }
}

impl Default for FormatVersion {
    fn default() -> Self {
        Self::dsh_v0()
    }
}
