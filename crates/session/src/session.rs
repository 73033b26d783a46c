//! The in-memory session: its events, the surface fold, the turn tracker and the rules
//! checked at append.
//!
//! Every append is split into a read-only check that plans the change and an apply that
//! cannot fail, so a rejected event leaves the session exactly as it was.

use std::sync::Arc;

use crate::build::{BuildEvent, Position};
use crate::error::{Error, Rule};
use crate::event::{Event, EventInput, Seq, SurfaceOp};
use crate::header::SessionHeader;
use crate::repair::TurnTracker;
use crate::surface::{RangeError, ShadowedLinks, Surface};
use crate::upgrade::upgrade_event;
use crate::validate::{self, RuleSet};
use crate::version::FormatVersion;

/// What an accepted event does to the surface.
enum SurfacePlan {
    None,
    Append,
    Replace(Vec<u64>),
}

/// How to take back one applied event's surface change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SurfaceUndo {
    None,
    Append(u64),
    Replace(u64, ShadowedLinks),
}

/// The undo record of an open [`Session::atomically`]: enough to put the session back as it
/// was at its start without having copied it. The turn tracker is small (open turn and step,
/// calls of the open step), so it is saved whole; the surface is journaled per event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Journal {
    events: usize,
    tracker: TurnTracker,
    surface: Vec<SurfaceUndo>,
}

/// A session: header, events, current surface and turn state.
#[derive(Debug, Clone)]
pub struct Session {
    header: SessionHeader,
    version: Arc<FormatVersion>,
    events: Vec<Event>,
    surface: Surface,
    tracker: TurnTracker,
    /// Present only inside [`Session::atomically`].
    journal: Option<Journal>,
}

impl PartialEq for Session {
    /// Sessions are equal when their contents are; an open undo journal is not content.
    fn eq(&self, other: &Session) -> bool {
        self.header == other.header
            && self.version == other.version
            && self.events == other.events
            && self.surface == other.surface
            && self.tracker == other.tracker
    }
}

impl Eq for Session {}

impl Session {
    /// An empty session.
    pub fn new(header: SessionHeader, version: FormatVersion) -> Session {
        Session {
            header,
            version: Arc::new(version),
            events: Vec::new(),
            surface: Surface::default(),
            tracker: TurnTracker::default(),
            journal: None,
        }
    }

    /// Runs `f` as one atomic change: if it fails, every event it appended is taken back
    /// and the session is exactly as it was before (surface, turn state, events), without
    /// the session ever having been copied or rebuilt. Undo costs O(events appended inside),
    /// plus the nodes their replacements shadowed. Nested calls roll back to their own start.
    pub fn atomically<R, E>(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<R, E>,
    ) -> Result<R, E> {
        let outermost = self.journal.is_none();
        let start = match &self.journal {
            Some(journal) => journal.surface.len(),
            None => {
                self.journal = Some(Journal {
                    events: self.events.len(),
                    tracker: self.tracker.clone(),
                    surface: Vec::new(),
                });
                0
            }
        };
        let saved = (!outermost).then(|| (self.events.len(), self.tracker.clone()));
        let result = f(self);
        if result.is_err() {
            self.undo_to(start, saved);
        }
        if outermost {
            self.journal = None;
        }
        result
    }

    /// Takes back the surface changes journaled after `start` and restores the events and
    /// tracker (from `saved` for a nested call, else from the journal).
    fn undo_to(&mut self, start: usize, saved: Option<(usize, TurnTracker)>) {
        let Some(journal) = self.journal.as_mut() else {
            return;
        };
        for undo in journal.surface.drain(start..).rev() {
            match undo {
                SurfaceUndo::None => {}
                SurfaceUndo::Append(seq) => self.surface.undo_append(seq),
                SurfaceUndo::Replace(seq, links) => self.surface.undo_replace(seq, links),
            }
        }
        let (events, tracker) = saved.unwrap_or_else(|| (journal.events, journal.tracker.clone()));
        self.events.truncate(events);
        self.tracker = tracker;
    }

    /// Rebuilds a session from stored events (seq 0, 1, 2, …): legacy shapes are upgraded
    /// in memory, the vocabulary is checked, then every event is validated and folded.
    /// No closers are appended; see [`Session::repair`].
    pub fn from_events(
        header: SessionHeader,
        version: FormatVersion,
        mut events: Vec<Event>,
    ) -> Result<Session, Error> {
        for index in 0..events.len() {
            upgrade_event(&mut events, index, header.id())?;
        }
        let mut session = Session::new(header, version);
        for event in &events {
            session.check_vocabulary(event)?;
        }
        session.events.reserve(events.len());
        for event in events {
            let plan = session.check(&event, RuleSet::Dsh)?;
            session.apply(event, plan);
        }
        Ok(session)
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
        match self.events.last() {
            Some(last) if last.event_type() == "session/end-seed" => None,
            _ => Some(EventInput::new("session/end-seed", time, "{}")),
        }
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
        let now_ms = self.events.last().map_or(0, Event::time);
        let input = event.build(&self.position(now_ms))?;
        let next = self.next_seq().get();
        if let Some(seq) = input.seq {
            if seq != next {
                return Err(Error::SeqMismatch {
                    expected: next,
                    got: seq,
                });
            }
        }
        let event = input.into_event(next)?;
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
        self.check_vocabulary(&event)?;
        let plan = self.check(&event, rules)?;
        self.apply(event, plan);
        match self.events.last() {
            Some(event) => Ok(event),
            // `apply` always pushes; this arm only keeps the function total.
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
        let Some(last) = self.events.last() else {
            return Ok(Vec::new());
        };
        self.tracker
            .closers(last.seq().get(), last.time())
            .into_iter()
            .map(|(seq, raw)| Event::parse(&raw, seq))
            .collect()
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

    /// Where the next event goes, for [`BuildEvent::build`]: the next seq, the open turn and
    /// step, the announced calls; `now_ms` is the time of builders that set none.
    pub fn position(&self, now_ms: i64) -> Position<'_> {
        Position::new(&self.tracker, self.next_seq().get(), now_ms)
    }

    /// Whether the last turn is open (a restart would append closers).
    pub fn turn_open(&self) -> bool {
        self.tracker.turn_open()
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The format version.
    pub fn version(&self) -> &FormatVersion {
        &self.version
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
        Seq(self.events.len() as u64)
    }

    /// The current surface, in order.
    pub fn surface(&self) -> Vec<u64> {
        self.surface.to_vec()
    }

    /// The surface state (for iteration without collecting).
    pub fn surface_state(&self) -> &Surface {
        &self.surface
    }

    /// How many replacements have been applied.
    pub fn replace_generation(&self) -> u64 {
        self.surface.replace_generation()
    }

    /// The model history: the message of every surface node, verbatim (stored key order),
    /// skipping assistant settlements whose content is empty.
    pub fn derive_messages(&self) -> Vec<&str> {
        let mut out = Vec::with_capacity(self.surface.len());
        for seq in self.surface.iter() {
            if let Some(message) = self
                .event(Seq(seq))
                .and_then(|e| derive_message(&self.version, e))
            {
                out.push(message);
            }
        }
        out
    }

    /// [`Session::derive_messages`] as one JSON array.
    pub fn derive_messages_json(&self) -> String {
        let messages = self.derive_messages();
        let mut out =
            String::with_capacity(messages.iter().map(|m| m.len() + 1).sum::<usize>() + 2);
        out.push('[');
        for (i, m) in messages.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(m);
        }
        out.push(']');
        out
    }

    fn check_vocabulary(&self, event: &Event) -> Result<(), Error> {
        if !event.is_ignorable() && !self.version.is_known(event.event_type()) {
            return Err(Error::UnknownEventType {
                seq: event.seq().get(),
                event_type: event.event_type().to_owned(),
                version: self.version.name(),
            });
        }
        Ok(())
    }

    /// Every stateful and stateless rule; returns the surface change to make.
    fn check(&self, event: &Event, rules: RuleSet) -> Result<SurfacePlan, Error> {
        let expected = self.next_seq().get();
        if event.seq().get() != expected {
            return Err(Error::SeqMismatch {
                expected,
                got: event.seq().get(),
            });
        }
        validate::check_retired(event)?;
        validate::check_message(&self.version, event)?;
        validate::check_request_header(event)?;
        validate::check_native(&self.version, event)?;
        let plan = self.check_surface(event)?;
        if rules == RuleSet::Native {
            validate::check_structure(&self.tracker, &self.version, event)?;
        }
        Ok(plan)
    }

    fn check_surface(&self, event: &Event) -> Result<SurfacePlan, Error> {
        let seq = event.seq().get();
        let event_type = event.event_type();
        let fail = |rule: Rule, detail: String| Err(Error::invalid(seq, event_type, rule, detail));
        if self.version.surface_type(event_type).is_none() {
            if event.surface_op().is_some() || event.source_event_seqs().is_some() {
                return fail(
                    Rule::SurfaceOp,
                    "only surface events may carry surfaceOp or sourceEventSeqs".into(),
                );
            }
            return Ok(SurfacePlan::None);
        }
        let sources = event.source_event_seqs();
        if sources.is_some_and(|s| s.is_empty()) && event_type != "assistant/message" {
            return fail(
                Rule::SourceEventSeqs,
                "may be empty only on assistant/message".into(),
            );
        }
        match event.surface_op() {
            None => fail(
                Rule::SurfaceOp,
                "surfaceOp is mandatory on surface events".into(),
            ),
            Some(SurfaceOp::Append) => Ok(SurfacePlan::Append),
            Some(SurfaceOp::Replace { start, end }) => {
                let shadowed = match self
                    .surface
                    .plan_replace(start, end, sources.unwrap_or(&[]))
                {
                    Ok(shadowed) => shadowed,
                    Err(RangeError::NotOnSurface(s)) => {
                        return fail(
                            Rule::ReplaceRange,
                            format!("seq {s} is not a current surface node"),
                        )
                    }
                    Err(RangeError::Reversed { start, end }) => {
                        return fail(
                            Rule::ReplaceRange,
                            format!("node {start} comes after node {end} on the surface"),
                        )
                    }
                    Err(RangeError::MissingSource(s)) => {
                        return fail(Rule::SourceEventSeqs, format!("missing shadowed node {s}"))
                    }
                };
                if event_type == "tool/result" {
                    self.check_tool_result_replace(event, &shadowed)?;
                }
                Ok(SurfacePlan::Replace(shadowed))
            }
        }
    }

    fn check_tool_result_replace(&self, event: &Event, shadowed: &[u64]) -> Result<(), Error> {
        let fail = |detail: &str| {
            Err(Error::invalid(
                event.seq().get(),
                event.event_type(),
                Rule::ToolResultReplace,
                detail,
            ))
        };
        let [original] = shadowed else {
            return fail("a tool-result replacement must shadow exactly one node");
        };
        let Some(original) = self
            .event(Seq(*original))
            .filter(|e| e.event_type() == "tool/result")
        else {
            return fail("a tool-result replacement must shadow a tool/result");
        };
        if !validate::only_tool_content_differs(original.data(), event.data()) {
            return fail("a tool-result replacement may change only content");
        }
        Ok(())
    }

    fn apply(&mut self, event: Event, plan: SurfacePlan) {
        let seq = event.seq().get();
        let undo = match plan {
            SurfacePlan::None => SurfaceUndo::None,
            SurfacePlan::Append => {
                self.surface.append(seq);
                SurfaceUndo::Append(seq)
            }
            SurfacePlan::Replace(shadowed) => {
                SurfaceUndo::Replace(seq, self.surface.apply_replace(&shadowed, seq))
            }
        };
        if let Some(journal) = self.journal.as_mut() {
            journal.surface.push(undo);
        }
        self.tracker.apply(&event);
        self.events.push(event);
    }
}

/// The message a surface event contributes to the model history under `version`, verbatim
/// (stored key order), or `None` when it contributes none (not a surface type, or an
/// assistant settlement whose content is empty). [`Session::derive_messages`] is this over the
/// surface in order; projections that fold only surface events use it directly.
pub fn derive_message<'e>(version: &FormatVersion, event: &'e Event) -> Option<&'e str> {
    let surface = version.surface_type(event.event_type())?;
    let message = validate::message_of(version, event)?;
    let empty = message
        .get("content")
        .is_some_and(|c| c.elements().next().is_none());
    if surface.skip_empty_content && empty {
        return None;
    }
    Some(message.raw())
}
