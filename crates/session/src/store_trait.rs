//! The `SessionStore` trait: the seam through which a platform swaps one session store for
//! another (sessionlog's engine, SQLite, a DeepSeek Harness JSONL tree, memory).
//!
//! A store holds named sessions. Each is a header plus a gap-free sequence of events, appended
//! in batches by a writer that states the seq it expects to continue at, so a writer that
//! missed someone else's append is refused instead of forking the session. Appends are
//! validated by the session rules ([`Session`]); a refused batch changes nothing. Appended
//! events are readable at once and durable once [`SessionStore::commit`] returns.
//!
//! The helpers below ([`SessionCache`], [`append_validated`], [`check_name`],
//! [`pack_jsonl_lines`]) are what implementations share: a per-session cache of the folded
//! [`Session`] keeps validation O(1) amortized per event.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::chunks::write_packed;
use crate::error::Error;
use crate::event::{Event, EventInput, Seq};
use crate::header::SessionHeader;
use crate::lookback::WithPending;
use crate::session::Session;
use crate::state::{LookBack, SessionState};
use crate::upgrade::upgrade_event;
use crate::validate::RuleSet;

/// The longest session name, in UTF-8 bytes, every implementation accepts. An implementation
/// may accept longer names; it must accept every non-empty name up to this length without
/// control characters. (48 because a DSH session directory escapes each UTF-16 unit in up to
/// five bytes and a directory name has at most 255.)
pub const PORTABLE_NAME_BYTES: usize = 48;

/// The longest name any implementation accepts.
pub const MAX_NAME_BYTES: usize = 1024;

/// One event to append.
#[derive(Debug, Clone, Copy)]
pub enum NewEvent<'a> {
    /// A new event the store renders in DSH writer order with the seq it assigns; checked
    /// against every native rule ([`crate::RuleSet::Native`]).
    Input(&'a EventInput),
    /// A complete envelope as stored elsewhere (an import or migration); its `seq` must be the
    /// one it gets, and its bytes are kept exactly. Checked against DSH's reader rules
    /// ([`crate::RuleSet::Dsh`]), like the log it was copied from.
    Raw(&'a [u8]),
}

/// Everything a [`SessionStore`] can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The writer's view of the session is out of date: someone else appended (or the writer
    /// skipped ahead). Nothing was written; reread the session and retry.
    #[error(
        "stale writer on session {session:?}: it expected to append at seq {expected}, but the \
         session's next seq is {actual}; reread the session and retry"
    )]
    StaleWriter {
        /// The session.
        session: String,
        /// The seq the writer expected to append at.
        expected: u64,
        /// The session's actual next seq.
        actual: u64,
    },
    /// No session has this name.
    #[error("no session named {0:?}")]
    NoSuchSession(String),
    /// A session with this name exists already.
    #[error("a session named {0:?} exists already; pick another name or delete it first")]
    Exists(String),
    /// An event or header refused by the session rules; nothing was written.
    #[error("refused: {0}")]
    Invalid(#[from] Error),
    /// A session name the store cannot hold.
    #[error("invalid session name {name:?}: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// Stored data that does not read back (damage beyond a torn tail); nothing was changed.
    #[error("session {session:?} is damaged: {detail}")]
    Corrupt {
        /// The session.
        session: String,
        /// What was found.
        detail: String,
    },
    /// The storage underneath failed. Appends since the last commit may be lost; reopen.
    #[error("storage failed: {0}")]
    Io(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A failure of the store underneath that no variant above names, with the class its own
    /// error type gave it, so the trait reports the class the store's own API would.
    #[error("{source}")]
    Other {
        /// The class of `source`.
        class: crate::ErrorClass,
        /// The store's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl StoreError {
    /// Wraps any storage error.
    pub fn io(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Io(Box::new(e))
    }

    /// Wraps an error of the store underneath with the class its own type gives it.
    pub fn classified(
        class: crate::ErrorClass,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Other {
            class,
            source: Box::new(e),
        }
    }

    /// The class of this error, the same as the engine's own error types give the same cause.
    pub fn class(&self) -> crate::ErrorClass {
        use crate::ErrorClass;
        match self {
            StoreError::Other { class, .. } => *class,
            StoreError::StaleWriter { .. } | StoreError::Exists(_) | StoreError::BadName { .. } => {
                ErrorClass::Refused
            }
            StoreError::Invalid(e) => e.class(),
            StoreError::NoSuchSession(_) => ErrorClass::NotFound,
            StoreError::Corrupt { .. } => ErrorClass::Damaged,
            StoreError::Io(_) => ErrorClass::Environment,
        }
    }

    /// True when the input was refused: [`StoreError::class`] is
    /// [`Refused`](crate::ErrorClass::Refused). A missing session is
    /// [`NotFound`](crate::ErrorClass::NotFound), not a refusal.
    pub fn is_refusal(&self) -> bool {
        self.class() == crate::ErrorClass::Refused
    }
}

/// Shorthand for results of [`SessionStore`] calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// A store of named sessions. Object-safe: platforms hold a `Box<dyn SessionStore>` or
/// `Arc<dyn SessionStore>`. Every method may be called from any thread; one location should
/// be opened by one instance at a time.
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Creates an empty session. The session exists durably when this returns.
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()>;

    /// Appends `events` atomically (all or none) after validating each against the session
    /// rules. `expected_next_seq` is the seq the writer believes comes next; if it is not the
    /// session's next seq the batch is refused with [`StoreError::StaleWriter`]. Returns the
    /// session's next seq after the batch. The events are readable at once and durable after
    /// the next [`SessionStore::commit`] of this session.
    fn append(
        &self,
        name: &str,
        events: &[NewEvent<'_>],
        expected_next_seq: u64,
    ) -> StoreResult<u64>;

    /// Makes every event appended to `name` so far durable.
    fn commit(&self, name: &str) -> StoreResult<()>;

    /// Up to `limit` events of `name` starting at seq `from`, in seq order, envelopes as
    /// stored. Past the end, empty.
    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>>;

    /// The session's header, byte for byte as created.
    fn load_header(&self, name: &str) -> StoreResult<SessionHeader>;

    /// The seq the next appended event gets (the number of events).
    fn next_seq(&self, name: &str) -> StoreResult<u64>;

    /// Up to `limit` session names greater than `after` (all when `None`), in ascending
    /// byte order of their UTF-8 encoding. Page on by passing the last name returned.
    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>>;

    /// Deletes a session durably; its name becomes free.
    fn delete(&self, name: &str) -> StoreResult<()>;
}

impl<T: SessionStore + ?Sized> SessionStore for Arc<T> {
    fn create(&self, name: &str, header: &SessionHeader) -> StoreResult<()> {
        (**self).create(name, header)
    }
    fn append(&self, name: &str, events: &[NewEvent<'_>], expected: u64) -> StoreResult<u64> {
        (**self).append(name, events, expected)
    }
    fn commit(&self, name: &str) -> StoreResult<()> {
        (**self).commit(name)
    }
    fn read_from(&self, name: &str, from: u64, limit: usize) -> StoreResult<Vec<Event>> {
        (**self).read_from(name, from, limit)
    }
    fn load_header(&self, name: &str) -> StoreResult<SessionHeader> {
        (**self).load_header(name)
    }
    fn next_seq(&self, name: &str) -> StoreResult<u64> {
        (**self).next_seq(name)
    }
    fn list(&self, after: Option<&str>, limit: usize) -> StoreResult<Vec<String>> {
        (**self).list(after, limit)
    }
    fn delete(&self, name: &str) -> StoreResult<()> {
        (**self).delete(name)
    }
}

/// The name rules every implementation applies: 1 to [`MAX_NAME_BYTES`] bytes, no control
/// characters.
pub fn check_name(name: &str) -> StoreResult<()> {
    let bad = |reason: &str| {
        Err(StoreError::BadName {
            name: name.chars().take(80).collect(),
            reason: reason.to_owned(),
        })
    };
    if name.is_empty() {
        return bad("a session name must not be empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad(&format!(
            "{} bytes is longer than {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return bad("control characters are not allowed");
    }
    Ok(())
}

/// Validates `events` against `session` and appends them to it, all or none. Returns the
/// index in `session.events()` of the first appended event. Raw envelopes are upgraded in
/// memory the way loading upgrades stored legacy shapes, so a batch that a store accepts is
/// one it can load again.
///
/// Cost: O(batch), also when an event late in the batch is refused: the session takes the
/// earlier ones back itself ([`Session::atomically`]).
pub fn append_validated(
    name: &str,
    session: &mut Session,
    events: &[NewEvent<'_>],
    expected_next_seq: u64,
) -> StoreResult<usize> {
    let before = session.events().len();
    check_expected(name, session.next_seq().get(), expected_next_seq)?;
    session
        .atomically(|session| {
            events.iter().try_for_each(|new| {
                let next = session.next_seq().get();
                let (event, rules) = new_event(new, next, &session.events(), session.header())?;
                session.append_checked(event, rules).map(drop)
            })
        })
        .map_err(StoreError::Invalid)?;
    Ok(before)
}

/// [`append_validated`] for a store that keeps only the [`SessionState`] of a session and
/// reads its earlier events back through `past` when a rule needs one. Returns the events
/// appended, for the store to write; a refused batch leaves `state` as it was.
pub fn append_validated_to_state(
    name: &str,
    state: &mut SessionState,
    past: &dyn LookBack,
    events: &[NewEvent<'_>],
    expected_next_seq: u64,
) -> StoreResult<Vec<Event>> {
    check_expected(name, state.next_seq().get(), expected_next_seq)?;
    state
        .atomically(|state| {
            let mut appended: Vec<Event> = Vec::with_capacity(events.len());
            for new in events {
                let next = state.next_seq().get();
                let seen = WithPending::new(past, &appended);
                let (event, rules) = new_event(new, next, &seen, state.header())?;
                state.append(&event, rules, &seen)?;
                appended.push(event);
            }
            Ok(appended)
        })
        .map_err(StoreError::Invalid)
}

fn check_expected(name: &str, actual: u64, expected: u64) -> StoreResult<()> {
    if expected != actual {
        return Err(StoreError::StaleWriter {
            session: name.to_owned(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// Builds one new event of a batch at seq `next` and upgrades it (looking back through
/// `past`), with the rules it is checked under.
fn new_event(
    new: &NewEvent<'_>,
    next: u64,
    past: &dyn LookBack,
    header: &SessionHeader,
) -> Result<(Event, RuleSet), Error> {
    let session_id = header.id();
    // Inputs are new events and get every native rule; raw envelopes are stored events
    // copied from elsewhere (a migration, a replica) and get the rules their source, a DSH
    // log or a store that imported one, was loaded under.
    let (mut event, rules) = match new {
        NewEvent::Input(input) => {
            if let Some(seq) = input.seq.filter(|s| *s != next) {
                return Err(Error::SeqMismatch {
                    expected: Seq(next),
                    got: seq,
                });
            }
            (
                (*input).clone().into_event_for(next, header.format())?,
                RuleSet::Native,
            )
        }
        NewEvent::Raw(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|e| Error::Decode {
                what: "event",
                detail: format!("not UTF-8 at byte {}", e.valid_up_to()),
            })?;
            (Event::parse(text, next)?, RuleSet::Dsh)
        }
    };
    if event.seq().get() != next {
        return Err(Error::SeqMismatch {
            expected: Seq(next),
            got: event.seq(),
        });
    }
    // The load-time legacy upgrade: only a legacy tool result that is itself a replacement
    // looks back (at the node it replaces); every other shape is upgraded from the event.
    upgrade_event(&mut event, past, session_id)?;
    Ok((event, rules))
}

/// The lines DSH's writer produces for one write batch: envelopes, with runs of three or
/// more chunk deltas packed into rows; every line ends with a line feed.
pub fn pack_jsonl_lines(events: &[Event]) -> String {
    let mut out = String::with_capacity(events.iter().map(|e| e.raw().len() + 1).sum());
    write_packed(&mut out, events);
    out
}

/// Open sessions of a store, each behind its own lock, so writers of different sessions never
/// wait for each other and a session is loaded once. Entries not in use are dropped when the
/// cache grows past its capacity.
pub struct SessionCache<T> {
    entries: Mutex<HashMap<String, Arc<Mutex<Option<T>>>>>,
    capacity: usize,
}

impl<T> fmt::Debug for SessionCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionCache")
            .field("open", &lock(&self.entries).len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Locks a mutex; a panic in another holder does not make the data unreachable (every
/// critical section here leaves its state consistent or removes the entry).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A locked cache entry: `None` until loaded, or after the entry was invalidated.
pub type Entry<'a, T> = MutexGuard<'a, Option<T>>;

impl<T> SessionCache<T> {
    /// A cache keeping up to about `capacity` idle sessions.
    pub fn new(capacity: usize) -> SessionCache<T> {
        SessionCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// Runs `f` with the session's entry locked, loading it first with `load` if needed.
    /// `f` may set the entry to `None` to drop it (after a failure that leaves it unknown).
    pub fn with<R>(
        &self,
        name: &str,
        load: impl FnOnce() -> StoreResult<T>,
        f: impl FnOnce(&mut Entry<'_, T>) -> StoreResult<R>,
    ) -> StoreResult<R> {
        let slot = {
            let mut entries = lock(&self.entries);
            if entries.len() >= self.capacity && !entries.contains_key(name) {
                entries.retain(|_, slot| Arc::strong_count(slot) > 1);
            }
            entries.entry(name.to_owned()).or_default().clone()
        };
        let mut entry = lock(&slot);
        if entry.is_none() {
            match load() {
                Ok(value) => *entry = Some(value),
                Err(e) => {
                    drop(entry);
                    self.forget_if_idle(name, &slot);
                    return Err(e);
                }
            }
        }
        f(&mut entry)
    }

    fn forget_if_idle(&self, name: &str, slot: &Arc<Mutex<Option<T>>>) {
        let mut entries = lock(&self.entries);
        if let Some(current) = entries.get(name) {
            // Two references: the map's and ours.
            if Arc::ptr_eq(current, slot) && Arc::strong_count(slot) <= 2 {
                entries.remove(name);
            }
        }
    }

    /// Runs `f` with the entry locked whether or not it is loaded (create and delete).
    pub fn with_slot<R>(&self, name: &str, f: impl FnOnce(&mut Entry<'_, T>) -> R) -> R {
        let slot = lock(&self.entries)
            .entry(name.to_owned())
            .or_default()
            .clone();
        let mut entry = lock(&slot);
        let result = f(&mut entry);
        let empty = entry.is_none();
        drop(entry);
        if empty {
            self.forget_if_idle(name, &slot);
        }
        result
    }
}
