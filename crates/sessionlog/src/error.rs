//! The facade's error type.

use sessionlog_session::ErrorClass;

/// What can go wrong in a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The log failed (I/O, corruption, poisoning, locking).
    #[error(transparent)]
    Log(#[from] sessionlog_log::Error),
    /// An event or session was refused by the session rules.
    #[error(transparent)]
    Session(#[from] sessionlog_session::Error),
    /// No session has this name.
    #[error("no session named {0:?}")]
    NoSuchSession(String),
    /// A session with this name exists already.
    #[error("a session named {0:?} exists already")]
    SessionExists(String),
    /// The stored records of a session do not decode.
    #[error("session {session:?} record {seq}: {detail}")]
    BadRecord {
        /// The session.
        session: String,
        /// The record's seq in its stream.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// Another handle is writing this session.
    #[error("session {0:?} already has a writer")]
    WriterBusy(String),
    /// A session name the store cannot take.
    #[error("session name {name:?} is refused: {reason}; choose another name")]
    BadName {
        /// The name (its first 80 characters).
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// A raw-stream operation named a session.
    #[error("{0:?} is a session, not a raw stream; write sessions with `sessionlog append` and read them with `sessionlog events`")]
    RawNameIsSession(String),
    /// No raw stream has this name.
    #[error("no raw stream named {0:?}")]
    NoSuchRawStream(String),
    /// The store's options register a projection it cannot keep.
    #[error("{0}; register each projection once, under a valid name")]
    BadProjection(String),
    /// No projection of this name (and type) is registered.
    #[error(
        "no projection named {0:?} is registered; register it in StoreOptions::with_projection"
    )]
    NoSuchProjection(String),
    /// A projection's fold failed (or panicked) on a session. The session and the other
    /// projections are unaffected.
    #[error("projection {projection:?} of session {session:?} failed: {source}; fix the fold and bump its version (its checkpoint is then rebuilt)")]
    Projection {
        /// The projection.
        projection: String,
        /// The session.
        session: String,
        /// What failed.
        #[source]
        source: crate::projection::ProjectionError,
    },
    /// Writing a session's events or export to the caller's output failed.
    #[error("writing the output failed: {0}; check where it goes (a full disk, a closed pipe)")]
    Output(#[source] std::io::Error),
}

impl Error {
    /// The class of this error ([`ErrorClass`]): the same bad input gets the same class here,
    /// through the log, the session rules and the `SessionStore` trait.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Log(e) => e.class(),
            Error::Session(e) => e.class(),
            Error::NoSuchSession(_) => ErrorClass::NotFound,
            Error::SessionExists(_) | Error::BadName { .. } | Error::RawNameIsSession(_) => {
                ErrorClass::Refused
            }
            Error::NoSuchRawStream(_) => ErrorClass::NotFound,
            Error::BadRecord { .. } => ErrorClass::Damaged,
            Error::WriterBusy(_) => ErrorClass::Busy,
            Error::Output(_) | Error::BadProjection(_) => ErrorClass::Environment,
            Error::NoSuchProjection(_) => ErrorClass::NotFound,
            Error::Projection { source, .. } => match source {
                crate::projection::ProjectionError::Refused { .. } => ErrorClass::Refused,
                _ => ErrorClass::Environment,
            },
        }
    }

    /// True when the error refuses input (an invalid event, a log the session rules refuse, a
    /// name that is taken or not allowed): [`Error::class`] is [`ErrorClass::Refused`].
    pub fn is_refusal(&self) -> bool {
        self.class() == ErrorClass::Refused
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
