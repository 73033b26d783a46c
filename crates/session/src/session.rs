//! The in-memory session: its events and the [`SessionState`] folded from them.
//!
//! The rules live in the state machine ([`SessionState`]); a `Session` adds the events
//! themselves, which the state reads back through [`LookBack`] when a rule needs an earlier
//! event. A rejected event leaves the session exactly as it was.

use crate::build::{BuildEvent, Position};
use crate::error::Error;
use crate::event::{Event, EventInput, Seq};
use crate::header::SessionHeader;
use crate::json::JsonRef;
use crate::state::SessionState;
use crate::surface::Surface;
use crate::upgrade::upgrade_event;
use crate::validate::{self, RuleSet};
use crate::version::{FormatVersion, SurfaceType};

/// A session: its state (header, surface, turn state) and its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    state: SessionState,
    events: Vec<Event>,
}

impl Session {
    /// An empty session.
    pub fn new(header: SessionHeader, version: FormatVersion) -> Session {
        Session {
            state: SessionState::new(header, version),
            events: Vec::new(),
        }
    }

    /// An empty session whose state also measures tokens with `counter` (see
    /// [`SessionState::with_tokens`]).
    pub fn with_tokens(
        header: SessionHeader,
        version: FormatVersion,
        counter: std::sync::Arc<dyn crate::tokens::TokenCounter>,
    ) -> Session {
        Session {
            state: SessionState::with_tokens(header, version, counter),
            events: Vec::new(),
        }
    }

    /// Runs `f` as one atomic change: if it fails, every event it appended is taken back
    /// and the session is exactly as it was before (surface, turn state, events), without
    /// the session ever having been copied or rebuilt. See [`SessionState::atomically`].
    pub fn atomically<R, E>(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<R, E>,
    ) -> Result<R, E> {
        let events = self.events.len();
        let savepoint = self.state.savepoint();
        let result = f(self);
        self.state.release(savepoint, result.is_err());
        if result.is_err() {
            self.events.truncate(events);
        }
        result
    }

    /// Rebuilds a session from stored events (seq 0, 1, 2, …): legacy shapes are upgraded
    /// in memory, the vocabulary is checked, then every event is validated and folded.
    /// No closers are appended; see [`Session::repair`].
    pub fn from_events(
        header: SessionHeader,
        version: FormatVersion,
        mut events: Vec<Event>,
    ) -> Result<Session, Error> {
        Session::upgrade_all(&header, &mut events)?;
        let state = Session::fold_all(header, version, &events)?;
        Ok(Session { state, events })
    }

    /// The first part of [`Session::from_events`]: legacy shapes upgraded in memory (the
    /// stored text, type and sources stay as they were).
    pub(crate) fn upgrade_all(header: &SessionHeader, events: &mut [Event]) -> Result<(), Error> {
        for index in 0..events.len() {
            let (before, rest) = events.split_at_mut(index);
            if let Some(event) = rest.first_mut() {
                upgrade_event(event, &&*before, header.id())?;
            }
        }
        Ok(())
    }

    /// The rest of [`Session::from_events`], on upgraded events: the vocabulary checked,
    /// then every event validated and folded; [`Session::from_folded`] makes the session.
    pub(crate) fn fold_all(
        header: SessionHeader,
        version: FormatVersion,
        events: &[Event],
    ) -> Result<SessionState, Error> {
        let mut state = SessionState::new(header, version);
        for event in events {
            state.check_vocabulary(event)?;
        }
        for (i, event) in events.iter().enumerate() {
            state.fold(event, RuleSet::Dsh, &events.get(..i).unwrap_or_default())?;
        }
        Ok(state)
    }

    /// The session of `events` and the state [`Session::fold_all`] folded from them.
    pub(crate) fn from_folded(state: SessionState, events: Vec<Event>) -> Session {
        Session { state, events }
    }

    /// A cold load: [`Session::from_events`] followed by [`Session::repair`]. Returns the
    /// session and the seqs of the closers appended (empty when the last turn was closed).
    pub fn open(
        header: SessionHeader,
        version: FormatVersion,
        events: Vec<Event>,
    ) -> Result<(Session, Vec<Seq>), Error> {
        let mut session = Session::from_events(header, version, events)?;
        let closers = session.repair()?;
        Ok((session, closers))
    }

    /// The `session/end-seed {}` DSH appends after building a session, unless the last
    /// event already is one. The caller supplies the wall-clock `time`: this crate reads
    /// no clock.
    pub fn end_seed(&self, time: i64) -> Option<EventInput> {
        if self.state.ends_with_end_seed() {
            return None;
        }
        Some(EventInput::new("session/end-seed", time, "{}"))
    }

    /// Builds `event` (a typed builder of [`crate::build`], or a raw [`EventInput`]) at the
    /// session's position, validates it against every rule of a native append
    /// ([`RuleSet::Native`]), assigns it the next seq and appends it. A builder without a
    /// time set gets the previous event's time (this crate reads no clock; the store stamps
    /// the wall clock).
    pub fn try_append(&mut self, event: impl BuildEvent) -> Result<&Event, Error> {
        self.try_append_with(event, RuleSet::Native)
    }

    /// [`Session::try_append`] under the given rules: [`RuleSet::Dsh`] accepts what a DSH
    /// log may hold (an import, one event at a time), [`RuleSet::Native`] adds the
    /// structural rules.
    pub fn try_append_with(
        &mut self,
        event: impl BuildEvent,
        rules: RuleSet,
    ) -> Result<&Event, Error> {
        let now_ms = self.state.last_event_time().unwrap_or(0);
        let input = event.build(&self.position(now_ms))?;
        let next = self.next_seq().get();
        if let Some(seq) = input.seq {
            if seq != next {
                return Err(Error::SeqMismatch {
                    expected: Seq(next),
                    got: seq,
                });
            }
        }
        let event = input.into_event_for(next, self.header().format())?;
        self.append_checked(event, rules)
    }

    /// Validates an already-built event (its seq must be the next one) against every rule
    /// of a native append, DSH's reader's and the structural ones (turn/step nesting, results
    /// for announced calls), and appends it.
    pub fn append_event(&mut self, event: Event) -> Result<&Event, Error> {
        self.append_checked(event, RuleSet::Native)
    }

    /// [`Session::append_event`] under the given rules (see [`Session::try_append_with`]).
    pub fn append_checked(&mut self, event: Event, rules: RuleSet) -> Result<&Event, Error> {
        self.state.append(&event, rules, &self.events.as_slice())?;
        self.events.push(event);
        match self.events.last() {
            Some(event) => Ok(event),
            // Just pushed; this arm only keeps the function total.
            None => Err(Error::Decode {
                what: "event",
                detail: "append lost the event".into(),
            }),
        }
    }

    /// The closing events restart repair would append now (spec §8), without appending
    /// them: tool results for pending calls, then `step/end` if a step is open, then
    /// `turn/end {kind: interrupted}`. Empty when the last turn is closed.
    pub fn repair_closers(&self) -> Result<Vec<Event>, Error> {
        self.state.repair_closers()
    }

    /// Appends the closers of [`Session::repair_closers`]; returns their seqs.
    pub fn repair(&mut self) -> Result<Vec<Seq>, Error> {
        let closers = self.repair_closers()?;
        if closers.is_empty() {
            return Ok(Vec::new());
        }
        // Closers are validated like any event, all or none. They mirror DSH's repair of
        // whatever history was loaded, which DSH's rules (not the stricter native ones)
        // admitted.
        self.atomically(|session| {
            let mut seqs = Vec::with_capacity(closers.len());
            for closer in closers {
                seqs.push(closer.seq());
                session.append_checked(closer, RuleSet::Dsh)?;
            }
            Ok(seqs)
        })
    }

    /// The state machine folded from the events.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Where the next event goes, for [`BuildEvent::build`]: the next seq, the open turn and
    /// step, the announced calls; `now_ms` is the time of builders that set none.
    pub fn position(&self, now_ms: i64) -> Position<'_> {
        self.state.position(now_ms)
    }

    /// Whether the last turn is open (a restart would append closers).
    pub fn turn_open(&self) -> bool {
        self.state.turn_open()
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        self.state.header()
    }

    /// The format version.
    pub fn version(&self) -> &FormatVersion {
        self.state.version()
    }

    /// All events, indexed by seq.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The event with `seq`.
    pub fn event(&self, seq: Seq) -> Option<&Event> {
        usize::try_from(seq.get())
            .ok()
            .and_then(|i| self.events.get(i))
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> Seq {
        self.state.next_seq()
    }

    /// The current surface, in order.
    pub fn surface(&self) -> Vec<Seq> {
        self.state.surface()
    }

    /// The surface state (for iteration without collecting).
    pub fn surface_state(&self) -> &Surface {
        self.state.surface_state()
    }

    /// How many replacements have been applied.
    pub fn replace_generation(&self) -> u64 {
        self.state.replace_generation()
    }

    /// The model history: the message of every surface node, verbatim (stored key order),
    /// skipping assistant settlements whose content is empty.
    pub fn derive_messages(&self) -> Vec<&str> {
        let surface = self.state.surface_state();
        let mut out = Vec::with_capacity(surface.len());
        for seq in surface.iter() {
            if let Some(message) = self
                .event(seq)
                .and_then(|e| derive_message(self.version(), e))
            {
                out.push(message);
            }
        }
        out
    }

    /// [`Session::derive_messages`] as one JSON array.
    pub fn derive_messages_json(&self) -> String {
        messages_json(&self.derive_messages())
    }
}

/// The message a surface event contributes to the model history under `version`, verbatim
/// (stored key order), or `None` when it contributes none (not a surface type, or an
/// assistant settlement whose content is empty). [`Session::derive_messages`] is this over the
/// surface in order; projections that fold only surface events use it directly.
pub fn derive_message<'e>(version: &FormatVersion, event: &'e Event) -> Option<&'e str> {
    derived_message_ref(version, event).map(|m| m.message.raw())
}

/// [`derive_message`] together with the message's `content` member (the first one, as
/// `JsonRef::get("content")` finds it), read from the payload index the event was parsed
/// with where it has one, so a caller rendering the content does not walk the message
/// again to find it.
pub fn derive_message_content<'e>(
    version: &FormatVersion,
    event: &'e Event,
) -> Option<(&'e str, Option<JsonRef<'e>>)> {
    derived_message_ref(version, event).map(|m| (m.message.raw(), m.content))
}

/// [`derive_message_content`] of an event of surface type `surface` (its entry in the
/// version's table, which the caller looked up already).
pub fn derive_surface_content<'e>(
    surface: &SurfaceType,
    event: &'e Event,
) -> Option<(&'e str, Option<JsonRef<'e>>)> {
    derived_surface_ref(surface, event).map(|m| (m.message.raw(), m.content))
}

/// The message a surface event contributes and its `content`, as the fold reads them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DerivedRef<'e> {
    pub(crate) message: JsonRef<'e>,
    pub(crate) content: Option<JsonRef<'e>>,
    /// Where the message lives in the event, for [`Event::content_blocks`].
    pub(crate) location: crate::MessageLocation,
}

/// [`derive_message`] as the parsed message, with its content.
pub(crate) fn derived_message_ref<'e>(
    version: &FormatVersion,
    event: &'e Event,
) -> Option<DerivedRef<'e>> {
    derived_surface_ref(version.surface_type(event.event_type())?, event)
}

/// [`derived_message_ref`] of an event of surface type `surface`.
fn derived_surface_ref<'e>(surface: &SurfaceType, event: &'e Event) -> Option<DerivedRef<'e>> {
    let message = validate::message_at(surface.message, event)?;
    let [content] = validate::message_fields(surface.message, event, ["content"]);
    let empty = content.is_some_and(|c| !c.has_elements());
    if surface.skip_empty_content && empty {
        return None;
    }
    Some(DerivedRef {
        message,
        content,
        location: surface.message,
    })
}

/// Derived messages (each one JSON value, as `derive_messages` returns them) as one JSON
/// array, verbatim.
pub fn messages_json<S: AsRef<str>>(messages: &[S]) -> String {
    let len = messages.iter().map(|m| m.as_ref().len() + 1).sum::<usize>() + 2;
    let mut out = String::with_capacity(len);
    out.push('[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(m.as_ref());
    }
    out.push(']');
    out
}
