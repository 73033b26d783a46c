//! Look-back helpers: reading an earlier event of a session by seq when the events are not
//! all in one slice.

use std::borrow::Cow;

use crate::error::Error;
use crate::event::{Event, Seq};
use crate::state::LookBack;

/// The events of a batch being validated (not stored yet), in front of the session's
/// earlier events: a rule inside a batch may look back at an event earlier in the same batch.
pub struct WithPending<'a> {
    earlier: &'a dyn LookBack,
    pending: &'a [Event],
}

impl std::fmt::Debug for WithPending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithPending")
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl<'a> WithPending<'a> {
    /// `pending` are consecutive events that follow every event `earlier` holds.
    pub fn new(earlier: &'a dyn LookBack, pending: &'a [Event]) -> WithPending<'a> {
        WithPending { earlier, pending }
    }
}

impl LookBack for WithPending<'_> {
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        match self.pending.first() {
            Some(first) if seq.get() >= first.seq().get() => {
                Ok(usize::try_from(seq.get() - first.seq().get())
                    .ok()
                    .and_then(|i| self.pending.get(i))
                    .map(Cow::Borrowed))
            }
            _ => self.earlier.event_at(seq),
        }
    }
}
