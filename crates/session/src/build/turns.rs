//! Turn and step boundaries: numbers come from the turn tracker.

use super::{int, BuildEvent, Position};
use crate::error::Error;
use crate::event::EventInput;
use crate::json::ObjectWriter;

/// `turn/start {turn}`: opens the next turn (one past the highest turn so far, 1 at first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnStart {
    pub(super) at: Option<i64>,
}

impl TurnStart {
    /// A turn start.
    pub fn new() -> Self {
        Self::default()
    }
}

impl BuildEvent for TurnStart {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let turn = position.tracker.next_turn();
        let data = ObjectWriter::new().int("turn", int(turn)).finish();
        Ok(EventInput::new("turn/start", position.time(self.at), data))
    }
}

/// Who or what aborted a turn (`turn/end` reason `aborted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortCause {
    /// The user cancelled.
    User,
    /// The parent session cancelled this (sub-agent) session.
    Parent,
    /// The session was disposed while the turn ran.
    Disposed,
    /// A hook stopped the turn, with its reason.
    Hook(String),
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEndReason {
    /// The model finished.
    Completed,
    /// Aborted by the user, the parent, disposal or a hook.
    Aborted(AbortCause),
    /// Blocked (for example by a refused approval).
    Blocked,
    /// The provider call failed.
    Error {
        /// What failed.
        message: String,
        /// A stable error code.
        code: String,
    },
    /// The model hit its output token limit.
    MaxTokens,
}

impl TurnEndReason {
    fn json(&self) -> String {
        let kind = |k: &str| ObjectWriter::new().string("kind", k);
        match self {
            TurnEndReason::Completed => kind("completed").finish(),
            TurnEndReason::Blocked => kind("blocked").finish(),
            TurnEndReason::MaxTokens => kind("max-tokens").finish(),
            TurnEndReason::Aborted(cause) => {
                let cause = match cause {
                    AbortCause::User => kind("user").finish(),
                    AbortCause::Parent => kind("parent").finish(),
                    AbortCause::Disposed => kind("disposed").finish(),
                    AbortCause::Hook(reason) => kind("hook").string("reason", reason).finish(),
                };
                kind("aborted").raw("reason", &cause).finish()
            }
            TurnEndReason::Error { message, code } => {
                let error = ObjectWriter::new()
                    .string("message", message)
                    .string("code", code)
                    .finish();
                kind("error").raw("error", &error).finish()
            }
        }
    }
}

/// `turn/end {turn, reason}`: closes the open turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    pub(super) reason: TurnEndReason,
    pub(super) at: Option<i64>,
}

impl TurnEnd {
    /// A turn end with `reason`.
    pub fn new(reason: TurnEndReason) -> Self {
        TurnEnd { reason, at: None }
    }

    /// A turn that completed.
    pub fn completed() -> Self {
        Self::new(TurnEndReason::Completed)
    }
}

impl BuildEvent for TurnEnd {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let turn = position.turn("turn/end")?;
        let data = ObjectWriter::new()
            .int("turn", int(turn))
            .raw("reason", &self.reason.json())
            .finish();
        Ok(EventInput::new("turn/end", position.time(self.at), data))
    }
}

/// `step/start {turn, step}`: opens the next step of the open turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepStart {
    pub(super) at: Option<i64>,
}

impl StepStart {
    /// A step start.
    pub fn new() -> Self {
        Self::default()
    }
}

impl BuildEvent for StepStart {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let turn = position.turn("step/start")?;
        let data = ObjectWriter::new()
            .int("turn", int(turn))
            .int("step", int(position.tracker.next_step()))
            .finish();
        Ok(EventInput::new("step/start", position.time(self.at), data))
    }
}

/// `step/end {turn, step}`: closes the open step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepEnd {
    pub(super) at: Option<i64>,
}

impl StepEnd {
    /// A step end.
    pub fn new() -> Self {
        Self::default()
    }
}

impl BuildEvent for StepEnd {
    fn build(self, position: &Position<'_>) -> Result<EventInput, Error> {
        let (turn, step) = position.turn_and_step("step/end")?;
        let data = ObjectWriter::new()
            .int("turn", int(turn))
            .int("step", int(step))
            .finish();
        Ok(EventInput::new("step/end", position.time(self.at), data))
    }
}
