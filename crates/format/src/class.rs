//! The one classification of every error the engine returns, shared by all its crates.
//!
//! Each crate's error type has a `class()`: the same bad input gets the same class whichever
//! API it came through (the log, the store, a session handle, the `SessionStore` trait, an
//! import), and the command-line tool derives its exit code from the class alone.

use std::fmt;

/// What kind of failure an error is, and so what the caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The input was refused and nothing was changed: an event, file, header or name the
    /// rules refuse, a record or batch over a limit, a session that exists already, a writer
    /// whose view is stale. Fix the input (or reread and retry) and try again.
    Refused,
    /// What the call names is not there: a session, stream or record.
    NotFound,
    /// Someone else holds it: another process has the store open, or another handle is
    /// writing the session. Close that one first, or retry later.
    Busy,
    /// Stored data is damaged beyond what recovery may cut: a checksum, footer or record that
    /// does not verify or decode. Run `sessionlog verify` for a report.
    Damaged,
    /// The machine, the store directory or the options: an I/O error, a log poisoned by one,
    /// a closed log, invalid options. Fix the environment and reopen.
    Environment,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorClass::Refused => "refused input",
            ErrorClass::NotFound => "not found",
            ErrorClass::Busy => "busy",
            ErrorClass::Damaged => "damaged data",
            ErrorClass::Environment => "environment error",
        })
    }
}
