//! What the writers of the append workloads commit: the same events for every store.
//!
//! Two feeds: `Fixed`, one 1 KiB event again and again (the peers get a 1 KiB JSON line;
//! the `Store` gets a `user/message` whose envelope is 1 KiB, inside one open turn and step),
//! and `Agent`, the seeded workload generator's agent traffic (turns, steps, streamed chunks,
//! tool calls and results), which the `Store` appends as events, validated and folded, and
//! every other store gets as the envelope bytes DeepSeek Harness would write for them.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io;

use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog_session::{EventInput, SurfaceOp};

use crate::appends::EVENT_BYTES;
use crate::stats::event_json;

/// Event time of every generated event (ms since the epoch).
const TIME: i64 = 1_760_000_000_000;

/// Which events a workload commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedKind {
    /// One 1 KiB event per commit.
    Fixed,
    /// The workload generator's agent traffic, one event per commit.
    Agent,
}

impl FeedKind {
    /// Events a session gets before the measured ones (the `Store` only: a message needs an
    /// open turn and step).
    pub fn prologue(self) -> Vec<EventInput> {
        match self {
            FeedKind::Fixed => vec![
                EventInput::new("turn/start", TIME, r#"{"turn":1}"#),
                EventInput::new("step/start", TIME, r#"{"turn":1,"step":1}"#),
            ],
            FeedKind::Agent => Vec::new(),
        }
    }

    /// The feed of session `seed`.
    pub fn feed(self, seed: u64) -> Feed {
        match self {
            FeedKind::Fixed => Feed::Fixed {
                bytes: event_json(seed, EVENT_BYTES),
                text: user_text(),
                n: 0,
            },
            FeedKind::Agent => Feed::Agent {
                workload: Workload::new(
                    seed,
                    WorkloadConfig::default().with_compact_every_turns(None),
                ),
                pending: VecDeque::new(),
                next_seq: 0,
            },
        }
    }
}

/// One writer's source of events.
#[derive(Debug)]
pub enum Feed {
    /// See [`FeedKind::Fixed`].
    Fixed {
        /// The peers' 1 KiB line.
        bytes: Vec<u8>,
        /// The text of the `Store`'s `user/message`.
        text: String,
        /// Messages made so far.
        n: u64,
    },
    /// See [`FeedKind::Agent`].
    Agent {
        /// The generator.
        workload: Workload,
        /// Generated events not yet committed.
        pending: VecDeque<EventInput>,
        /// Seq of the next event (the prologue is empty).
        next_seq: u64,
    },
}

fn user_message(text: &str, n: u64) -> EventInput {
    let mut js = String::with_capacity(text.len() + 2);
    js.push('"');
    js.push_str(text); // plain words: nothing to escape
    js.push('"');
    EventInput::new(
        "user/message",
        TIME,
        format!(
            r#"{{"content":[{{"type":"text","text":{js}}}],"source":{{"kind":"user"}},"role":"user","id":"u-{n}"}}"#
        ),
    )
    .with_surface_op(SurfaceOp::Append)
}

/// Text that makes a `user/message` envelope about [`EVENT_BYTES`] long.
fn user_text() -> String {
    let empty = user_message("", 1_000_000)
        .into_event(1_000_000)
        .map_or(200, |e| e.raw().len());
    let room = EVENT_BYTES.saturating_sub(empty);
    let words = ["session", "log", "tool", "result", "model", "turn", "step"];
    let mut text = String::with_capacity(room + 8);
    let mut i = 0;
    while text.len() < room {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(words[i % words.len()]);
        i += 1;
    }
    text.truncate(room);
    text
}

impl Feed {
    /// The next event, for the `Store`.
    pub fn next_input(&mut self) -> io::Result<EventInput> {
        match self {
            Feed::Fixed { text, n, .. } => {
                *n += 1;
                Ok(user_message(text, *n))
            }
            Feed::Agent {
                workload,
                pending,
                next_seq,
            } => {
                if pending.is_empty() && *next_seq == 0 {
                    pending.extend(workload.session_start(TIME));
                }
                // The generator opens a session with nothing of its own now (the request
                // envelope comes inside the first turn), so an empty start falls through to it.
                if pending.is_empty() {
                    pending.extend(workload.turn(*next_seq, TIME, None));
                }
                *next_seq += 1;
                pending
                    .pop_front()
                    .ok_or_else(|| io::Error::other("the workload generated no events"))
            }
        }
    }

    /// The next event's bytes, for every other store.
    pub fn next_bytes(&mut self) -> io::Result<Cow<'_, [u8]>> {
        let seq = match self {
            Feed::Fixed { bytes, .. } => return Ok(Cow::Borrowed(bytes)),
            Feed::Agent { next_seq, .. } => *next_seq,
        };
        let event = self
            .next_input()?
            .into_event(seq)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Cow::Owned(event.raw().as_bytes().to_vec()))
    }
}
