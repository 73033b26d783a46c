//! The one error type of this crate.
//!
//! Every refusal names the event (seq and type) and the rule it broke, so a caller can
//! print it as one line and a user can find the offending record.

use sessionlog_format::ErrorClass;

use std::fmt;

use crate::event::Seq;
use crate::json::JsonErrorKind;

/// Which validation rule an event broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The lossless-JSON rule (finite numbers, no `-0`, no duplicate keys, UTF-8).
    LosslessJson,
    /// Envelope keys and field types.
    Envelope,
    /// `surfaceOp` present where forbidden, missing where mandatory, or malformed.
    SurfaceOp,
    /// `sourceEventSeqs` malformed or not citing every shadowed node.
    SourceEventSeqs,
    /// A replace range whose endpoints are not current surface nodes in order.
    ReplaceRange,
    /// A tool-result replacement that shadows more than one result or changes more than content.
    ToolResultReplace,
    /// The message carried by a surface event has the wrong shape.
    MessageShape,
    /// A `request/header` config rule.
    RequestHeader,
    /// A retired DSH event shape (`request/header-delta`, `mode/set`, fallback header).
    RetiredShape,
    /// A per-type payload shape rule (turn, step, chunk, settlement stream record, …).
    Payload,
    /// Turn and step nesting: an event outside the turn or step it belongs to, a second
    /// `turn/end`, a step or turn number that is not the open one.
    Nesting,
    /// Tool call pairing: a `tool/call` or `tool/result` for a call never announced, or a
    /// second result for one call.
    ToolPairing,
    /// A surface event before the first `step/start` (no system head).
    SystemHead,
}

impl Rule {
    /// Whether the rule judges an event by its own shape alone (its JSON, envelope, surface
    /// operation, message or payload), so that no state of the session, an open turn or
    /// compaction included, changes whether the event keeps it.
    pub fn is_about_shape(self) -> bool {
        match self {
            Rule::LosslessJson
            | Rule::Envelope
            | Rule::SurfaceOp
            | Rule::MessageShape
            | Rule::RequestHeader
            | Rule::RetiredShape
            | Rule::Payload => true,
            Rule::SourceEventSeqs
            | Rule::ReplaceRange
            | Rule::ToolResultReplace
            | Rule::Nesting
            | Rule::ToolPairing
            | Rule::SystemHead => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::LosslessJson => "lossless JSON",
            Rule::Envelope => "envelope",
            Rule::SurfaceOp => "surfaceOp",
            Rule::SourceEventSeqs => "sourceEventSeqs",
            Rule::ReplaceRange => "replace range",
            Rule::ToolResultReplace => "tool-result replacement",
            Rule::MessageShape => "message shape",
            Rule::RequestHeader => "request/header",
            Rule::RetiredShape => "retired event shape",
            Rule::Payload => "payload shape",
            Rule::Nesting => "turn/step nesting",
            Rule::ToolPairing => "tool call pairing",
            Rule::SystemHead => "system head",
        })
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Text that is not lossless JSON.
    #[error("invalid JSON at byte {offset}: {kind}")]
    Json {
        /// Byte offset of the problem.
        offset: usize,
        /// What is wrong.
        kind: JsonErrorKind,
    },
    /// An event whose `seq` is not the next one.
    #[error("event seq {got} is out of order: the session expects seq {expected} next")]
    SeqMismatch {
        /// The next seq of the session.
        expected: Seq,
        /// The seq the event carried.
        got: Seq,
    },
    /// An event type outside the known-type set that does not carry `"ignorable": true`.
    #[error(
        "format unsupported: event {seq} has unknown type {event_type:?} (not known to {version}); \
         mark it \"ignorable\": true or add the type to the known-type set"
    )]
    UnknownEventType {
        /// The event's seq.
        seq: Seq,
        /// The unknown type.
        event_type: String,
        /// The format version whose vocabulary was used.
        version: &'static str,
    },
    /// An event that breaks a validation rule.
    #[error("event {seq} ({event_type}) rejected by the {rule} rule: {detail}")]
    Invalid {
        /// The event's seq.
        seq: Seq,
        /// The event's type.
        event_type: String,
        /// The broken rule.
        rule: Rule,
        /// What exactly is wrong.
        detail: String,
    },
    /// An event given for appending whose envelope is malformed. It has no seq yet (the
    /// session gives it one when it is accepted), so none is named.
    #[error("event ({}) rejected by the envelope rule: {detail}", event_type.as_deref().unwrap_or("type unknown"))]
    BadEnvelope {
        /// The event's type, when it could be read.
        event_type: Option<String>,
        /// What exactly is wrong.
        detail: String,
    },
    /// Damage in the committed region of a log: not a torn tail, so nothing is cut.
    #[error("corrupt session log: {detail}")]
    Corrupt {
        /// 1-based line number among the lines after the header (DSH's numbering).
        line: usize,
        /// What was found, naming the line.
        detail: String,
    },
    /// A session header with a format version this crate does not know (not 0..=4).
    #[error("format unsupported: session header version {version} (DSH formats 0 to 4 are known; a newer DSH wrote this file)")]
    UnsupportedVersion {
        /// The version as written.
        version: String,
    },
    /// A session header that is not a valid DSH header.
    #[error("invalid session header: {detail}")]
    Header {
        /// What is wrong.
        detail: String,
    },
    /// An event the session's declared DSH format does not hold (its type is not in the
    /// format's vocabulary, or its shape belongs to another format).
    #[error(
        "event {seq} ({event_type}) cannot join a format {format} session: {reason}; \
         append it to a session of a format that has it, or export this one and migrate it first"
    )]
    NotInFormat {
        /// The seq the event would have had.
        seq: Seq,
        /// The event's type.
        event_type: String,
        /// The session's declared format.
        format: crate::version::DshFormat,
        /// Why the format does not hold it, in DSH's words where DSH has them.
        reason: String,
    },
    /// A session that cannot be written in the DSH format asked for.
    #[error("cannot export as DSH format {format}: {reason}")]
    Export {
        /// The format asked for (or the lowest one tried).
        format: crate::version::DshFormat,
        /// Why not, in DSH's words where DSH has them.
        reason: String,
    },
    /// A compressed session file that does not decode.
    #[error("corrupt zstd session file: {detail}")]
    Zstd {
        /// What is wrong.
        detail: String,
    },
    /// A legacy in-file shape that cannot be upgraded.
    #[error("event {seq} ({event_type}) is a malformed legacy shape: {detail}")]
    Legacy {
        /// The event's seq.
        seq: Seq,
        /// The event's type.
        event_type: String,
        /// What is wrong.
        detail: String,
    },
    /// Bytes handed to a storage decoder that do not decode.
    #[error("cannot decode stored {what}: {detail}")]
    Decode {
        /// Which record kind was being decoded.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// An earlier event a rule needs could not be read back from where the session is kept
    /// (a store reads past events from its log instead of holding them).
    #[error("cannot read back event {seq} of the session: {detail}")]
    LookBack {
        /// The event's seq.
        seq: Seq,
        /// Why, as the store reports it (its own advice included).
        detail: String,
        /// The store's class of the failure (damage, or the environment).
        class: ErrorClass,
    },
    /// Writing an export's bytes to its file failed.
    #[error("cannot write the export: {detail}; fix the destination (space, permissions) and export again")]
    Output {
        /// The I/O error, as the system reports it.
        detail: String,
    },
}

impl Error {
    /// The class of this error: a stored record that does not decode is damage; a failed
    /// read-back is what the store says it is; everything else is input the session rules
    /// refuse.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Decode { .. } => ErrorClass::Damaged,
            Error::LookBack { class, .. } => *class,
            Error::Output { .. } => ErrorClass::Environment,
            _ => ErrorClass::Refused,
        }
    }

    pub(crate) fn invalid(
        seq: u64,
        event_type: &str,
        rule: Rule,
        detail: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            seq: Seq(seq),
            event_type: event_type.to_owned(),
            rule,
            detail: detail.into(),
        }
    }

    /// True for refusals of the log's content (as opposed to damage or decoding failures).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}

impl From<crate::json::JsonError> for Error {
    fn from(e: crate::json::JsonError) -> Self {
        Error::Json {
            offset: e.offset,
            kind: e.kind,
        }
    }
}

/// The error returned by validation at append (an alias: there is one error type).
pub type ValidationError = Error;
