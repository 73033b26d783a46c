//! Loading a stored event in two halves, so a long run of records can be folded on two
//! threads with the work shared between them.
//!
//! Most of what [`SessionState::load`] does to an event depends on the event alone and the
//! session's rules: the legacy upgrade (for every shape but a legacy tool-result
//! replacement, which looks back at the node it replaces), the vocabulary check, the
//! payload rules of its type (message shape, `request/header` config, retired shapes,
//! the newer native payloads), whether it derives a message and that message's token
//! estimate. [`LoadPreparer::prepare`] does that half wherever it runs, and
//! [`SessionState::load_prepared`] does the rest (seq, surface, turns, usage, locks) in
//! seq order. Together they reach exactly the state [`SessionState::load`] reaches and
//! refuse exactly what it refuses, with the same error: the errors the first half finds
//! are handed over and reported where the whole load would have reported them.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::Arc;

use crate::error::Error;
use crate::event::{Event, Seq};
use crate::session::derived_message_ref;
use crate::state::{check_vocabulary, LookBack, SessionState};
use crate::surface::NodeFacts;
use crate::tokens::text::{count_with_overhead, write_derived_text};
use crate::tokens::TokenCounter;
use crate::upgrade::upgrade_event;
use crate::validate;
use crate::version::FormatVersion;

/// The half of a stored event's load that needs no session state, made for one session
/// by [`SessionState::load_preparer`]. `Send`, so it can run beside the fold, and cloned
/// to run on more than one thread.
#[derive(Debug, Clone)]
pub struct LoadPreparer {
    version: Arc<FormatVersion>,
    session_id: Box<str>,
    counter: Option<Arc<dyn TokenCounter>>,
    /// The visible text of the message being estimated, reused from event to event.
    scratch: String,
    /// Whether the session's rules know `assistant/chunk`: only then is a stored chunk
    /// folded from its head ([`LoadPreparer::stored_chunk`]); else its load refuses it.
    chunks_known: bool,
}

/// A stored `assistant/chunk` known by its record's head alone, for
/// [`SessionState::load_stored_chunk`]: its seq and time, read without decoding the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredChunk {
    seq: Seq,
    time: i64,
}

/// Bytes of an event record's text read for a chunk's head: the canonical envelope's start
/// `{"type":"assistant/chunk","seq":<digits>,"time":<digits>,"data":` is at most 81 bytes
/// (a safe integer has 16 digits).
const CHUNK_HEAD_BYTES: usize = 96;

/// A stored event with the stateless half of its load done, for
/// [`SessionState::load_prepared`].
#[derive(Debug)]
pub struct PreparedEvent {
    event: Event,
    outcome: Outcome,
}

#[derive(Debug)]
enum Outcome {
    /// The upgrade looks back at an earlier event: the whole load happens in the fold.
    Deferred,
    /// The upgrade or the vocabulary refused the event (reported before its seq is
    /// checked, as a load does).
    Refused(Error),
    /// Upgraded and of a known type; `payload` is the verdict of the payload rules
    /// (reported after the seq check), `node` what a surface event's node keeps.
    Checked {
        payload: Result<(), Error>,
        node: Option<NodeFacts>,
    },
}

/// A look-back that has no events and remembers whether it was asked for one.
struct Unavailable(Cell<bool>);

impl LookBack for Unavailable {
    fn event_at(&self, _: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        self.0.set(true);
        Ok(None)
    }
}

/// The seq and time of a stored `assistant/chunk` event, read from the head of its record
/// (kind tag and encoded bytes, [`crate::encode_event`]) without decoding it: `Some` when
/// the tag is [`kind::ASSISTANT_CHUNK`](crate::codec::kind::ASSISTANT_CHUNK) and the text
/// starts in the canonical envelope layout with type `assistant/chunk`, a seq and a
/// safe-integer time; `None` for every other record. A chunk is no type the legacy
/// upgrade changes, so these are the seq, time and type its decoded event has.
/// spec: events.md#a-session-in-the-log
pub fn chunk_head(kind: u8, bytes: &[u8]) -> Option<(Seq, i64)> {
    if kind != crate::codec::kind::ASSISTANT_CHUNK {
        return None;
    }
    let (&crate::codec::EVENT_ENCODING_V1, text) = bytes.split_first()? else {
        return None;
    };
    // The head may end inside a character: its valid start is read (the envelope's start
    // is ASCII). `from_utf8` checks ASCII a word at a time; most heads are ASCII whole.
    let head = text.get(..text.len().min(CHUNK_HEAD_BYTES))?;
    let head = match std::str::from_utf8(head) {
        Ok(head) => head,
        Err(e) => std::str::from_utf8(head.get(..e.valid_up_to())?).ok()?,
    };
    let ([(_, event_type), (_, seq), (_, time)], _) = crate::json::canonical_envelope_prefix(head)?;
    if event_type.raw() != "\"assistant/chunk\"" {
        return None;
    }
    Some((Seq(seq.as_seq()?), time.as_safe_integer()?))
}

impl LoadPreparer {
    /// [`chunk_head`] of a record, when the session's rules know the `assistant/chunk` type:
    /// `None` for every other record, which is decoded and
    /// [prepared](LoadPreparer::prepare).
    ///
    /// A chunk changes nothing in a session's state but its seq and the newest event's
    /// time (it derives no message, opens or closes nothing, carries no usage the ledger
    /// reads), so its load needs no more. Its payload rules are not checked again: the
    /// record is checksummed and was validated when it was appended, as a checkpoint's
    /// events are trusted; `verify` folds every event in full. spec: events.md#a-session-in-the-log
    pub fn stored_chunk(&self, kind: u8, bytes: &[u8]) -> Option<StoredChunk> {
        if !self.chunks_known {
            return None;
        }
        let (seq, time) = chunk_head(kind, bytes)?;
        Some(StoredChunk { seq, time })
    }

    /// Does the stateless half of loading `event` (decoded from its stored record).
    pub fn prepare(&mut self, mut event: Event) -> PreparedEvent {
        let asked = Unavailable(Cell::new(false));
        let upgraded = upgrade_event(&mut event, &asked, &self.session_id);
        if asked.0.get() {
            // The upgrade read an earlier event, which only the fold can give: it runs
            // again there, on the event as stored.
            event.upgrade = None;
            return PreparedEvent {
                event,
                outcome: Outcome::Deferred,
            };
        }
        if let Err(e) = upgraded.and_then(|()| check_vocabulary(&self.version, &event)) {
            return PreparedEvent {
                event,
                outcome: Outcome::Refused(e),
            };
        }
        let payload = validate::check_payload(&self.version, &event);
        let node = match (&payload, self.version.surface_type(event.event_type())) {
            (Ok(()), Some(_)) => Some(self.node_facts(&event)),
            _ => None,
        };
        PreparedEvent {
            event,
            outcome: Outcome::Checked { payload, node },
        }
    }

    /// What the surface keeps of a surface event: whether it derives a message and, when
    /// tokens are measured, that message's estimate (as the token tally makes it).
    fn node_facts(&mut self, event: &Event) -> NodeFacts {
        let message = derived_message_ref(&self.version, event);
        let estimate = match (&message, &self.counter) {
            (Some(m), Some(counter)) => {
                self.scratch.clear();
                write_derived_text(event, m, &mut self.scratch);
                count_with_overhead(counter.as_ref(), &self.scratch)
            }
            _ => 0,
        };
        NodeFacts {
            message: message.is_some(),
            estimate,
        }
    }
}

impl PreparedEvent {
    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }
}

impl SessionState {
    /// A preparer of this session's stored events for [`SessionState::load_prepared`]: its
    /// rules, its id (for legacy upgrades) and its token counter.
    pub fn load_preparer(&self) -> LoadPreparer {
        LoadPreparer {
            version: Arc::clone(&self.version),
            session_id: self.header.id().into(),
            counter: self.tokens.as_ref().map(|t| Arc::clone(t.counter())),
            scratch: String::new(),
            chunks_known: self.version.is_known("assistant/chunk"),
        }
    }

    /// [`SessionState::load`] of a stored chunk known by its head
    /// ([`LoadPreparer::stored_chunk`]): the seq is checked to be the next one, then the
    /// chunk is folded as a full load folds it (the newest event's time is its time).
    pub fn load_stored_chunk(&mut self, chunk: &StoredChunk) -> Result<(), Error> {
        self.check_next_seq(chunk.seq)?;
        self.fold_chunk(chunk.seq.get(), chunk.time);
        Ok(())
    }

    /// [`SessionState::load`] of an event whose stateless half a preparer of this state
    /// ([`SessionState::load_preparer`]) has done: the same state, the same refusals.
    ///
    /// The event stays in `prepared`, as stored (so that a caller folding on another thread
    /// than the one that prepared it can hand it back to be dropped there), with its
    /// preparation spent: loading it again is the whole [`SessionState::load`] of it.
    pub fn load_prepared(
        &mut self,
        prepared: &mut PreparedEvent,
        past: &dyn LookBack,
    ) -> Result<(), Error> {
        let PreparedEvent { event, outcome } = prepared;
        let folded = match std::mem::replace(outcome, Outcome::Deferred) {
            Outcome::Deferred => self.load(event, past),
            Outcome::Refused(e) => Err(e),
            Outcome::Checked { payload, node } => self.fold_checked(event, payload, node, past),
        };
        // The event is left as stored, as a deferred preparation leaves it.
        event.upgrade = None;
        folded
    }

    /// The fold of an event the preparation checked: `payload` is the payload rules'
    /// verdict, `node` what a surface event's node keeps.
    fn fold_checked(
        &mut self,
        event: &Event,
        payload: Result<(), Error>,
        node: Option<NodeFacts>,
        past: &dyn LookBack,
    ) -> Result<(), Error> {
        self.check_seq(event)?;
        payload?;
        let plan = self.check_surface(event, past)?;
        self.apply_with(event, plan, node);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::codec::{encode_event, kind_tag};
    use crate::{Error, Event, FormatVersion, Seq, SessionHeader, SessionState};

    fn chunk(seq: u64, time: i64) -> Event {
        let raw = format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"hi"}}}}}}"#
        );
        Event::parse(&raw, seq).expect("a chunk")
    }

    /// A state whose next seq is `next`, its events all chunks.
    fn state_at(next: u64) -> SessionState {
        let mut state =
            SessionState::new(SessionHeader::new("s", 1, None), FormatVersion::current());
        for seq in 0..next {
            state
                .load(&mut chunk(seq, 10), &[].as_slice())
                .expect("load");
        }
        state
    }

    #[test]
    fn a_stored_chunk_is_read_from_its_head_and_refused_out_of_order_as_a_load_refuses_it() {
        let preparer = state_at(0).load_preparer();
        for (seq, time) in [(3, 1_700_000_000_123), (3, -5), (2, 0)] {
            let event = chunk(seq, time);
            let head = preparer
                .stored_chunk(kind_tag(&event), &encode_event(&event))
                .expect("a canonical chunk is read from its head");
            let mut by_head = state_at(3);
            let mut by_load = state_at(3);
            let folded = by_head.load_stored_chunk(&head);
            let loaded = by_load.load(&mut event.clone(), &[].as_slice());
            assert_eq!(format!("{folded:?}"), format!("{loaded:?}"), "seq {seq}");
            assert_eq!(by_head, by_load, "seq {seq}");
            if seq == 3 {
                assert_eq!(by_head.next_seq(), Seq(4));
                assert_eq!(by_head.last_event_time(), Some(time));
            } else {
                assert!(
                    matches!(folded, Err(Error::SeqMismatch { .. })),
                    "{folded:?}"
                );
            }
        }
    }

    #[test]
    fn a_chunk_whose_head_ends_inside_a_character_is_read_from_its_head() {
        let preparer = state_at(0).load_preparer();
        let mut cut_inside = false;
        for pad in ["", "x"] {
            let text = format!("{pad}{}", "é".repeat(40));
            let raw = format!(
                r#"{{"type":"assistant/chunk","seq":0,"time":7,"data":{{"text":"{text}","turn":1,"step":1}}}}"#
            );
            let event = Event::parse(&raw, 0).expect("a chunk");
            let bytes = encode_event(&event);
            cut_inside |= std::str::from_utf8(&bytes[1..1 + super::CHUNK_HEAD_BYTES]).is_err();
            let head = preparer
                .stored_chunk(kind_tag(&event), &bytes)
                .expect("read from its head");
            assert_eq!((head.seq, head.time), (Seq(0), 7));
        }
        assert!(cut_inside, "one of the heads ends inside a character");
    }

    #[test]
    fn only_a_canonical_chunk_record_is_read_from_its_head() {
        let preparer = state_at(0).load_preparer();
        let event = chunk(0, 1);
        let bytes = encode_event(&event);
        // Another kind tag, another encoding byte, another key order: decoded instead.
        assert!(preparer
            .stored_chunk(kind_tag(&event) + 1, &bytes)
            .is_none());
        let mut other_encoding = bytes.clone();
        other_encoding[0] = other_encoding[0].wrapping_add(1);
        assert!(preparer
            .stored_chunk(kind_tag(&event), &other_encoding)
            .is_none());
        let reordered = Event::parse(
            r#"{"seq":0,"type":"assistant/chunk","time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}}"#,
            0,
        )
        .expect("a chunk");
        assert!(preparer
            .stored_chunk(kind_tag(&reordered), &encode_event(&reordered))
            .is_none());
    }
}
