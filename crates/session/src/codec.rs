//! The storage mapping: the record kind tag of each event and the byte encoding of one
//! event and of a session header, as the segmented log stores them.
//!
//! The normative description is `format-spec/events.md`; golden vectors there are
//! checked by `tests/storage_encoding_matches_golden_vectors.rs`.

use crate::error::Error;
use crate::event::Event;
use crate::header::SessionHeader;

/// Record kind tags (spec: events.md#kind-tags). `0x01..=0x0F` are surface events;
/// `0xF0..=0xFF` are reserved for the log's own records.
pub mod kind {
    /// A known type with no typed view (capability and plugin events).
    pub const OPAQUE: u8 = 0x00;
    /// `user/message` (surface).
    pub const USER_MESSAGE: u8 = 0x01;
    /// `assistant/message` (surface).
    pub const ASSISTANT_MESSAGE: u8 = 0x02;
    /// `tool/result` (surface).
    pub const TOOL_RESULT: u8 = 0x03;
    /// `system/message` (surface).
    pub const SYSTEM_MESSAGE: u8 = 0x04;
    /// `turn/start`.
    pub const TURN_START: u8 = 0x10;
    /// `turn/end`.
    pub const TURN_END: u8 = 0x11;
    /// `step/start`.
    pub const STEP_START: u8 = 0x12;
    /// `step/end`.
    pub const STEP_END: u8 = 0x13;
    /// `assistant/chunk`.
    pub const ASSISTANT_CHUNK: u8 = 0x14;
    /// `tool/call`.
    pub const TOOL_CALL: u8 = 0x15;
    /// `request/header`.
    pub const REQUEST_HEADER: u8 = 0x16;
    /// `request/context`.
    pub const REQUEST_CONTEXT: u8 = 0x17;
    /// `session/end-seed`.
    pub const END_SEED: u8 = 0x18;
    /// `todo/write`.
    pub const TODO_WRITE: u8 = 0x19;
    /// `compaction/start`.
    pub const COMPACTION_START: u8 = 0x1A;
    /// `compaction/summary`.
    pub const COMPACTION_SUMMARY: u8 = 0x1B;
    /// `compaction/end`.
    pub const COMPACTION_END: u8 = 0x1C;
    /// `compaction/prune`.
    pub const COMPACTION_PRUNE: u8 = 0x1D;
    /// `assistant/attempt`.
    pub const ASSISTANT_ATTEMPT: u8 = 0x1E;
    /// An unknown type carried with `"ignorable": true`.
    pub const IGNORABLE_UNKNOWN: u8 = 0x20;
    /// First tag reserved for the log.
    pub const RESERVED_FOR_LOG: u8 = 0xF0;
}

const TAGS: [(&str, u8); 20] = [
    ("user/message", kind::USER_MESSAGE),
    ("assistant/message", kind::ASSISTANT_MESSAGE),
    ("tool/result", kind::TOOL_RESULT),
    ("system/message", kind::SYSTEM_MESSAGE),
    ("turn/start", kind::TURN_START),
    ("turn/end", kind::TURN_END),
    ("step/start", kind::STEP_START),
    ("step/end", kind::STEP_END),
    ("assistant/chunk", kind::ASSISTANT_CHUNK),
    ("tool/call", kind::TOOL_CALL),
    ("request/header", kind::REQUEST_HEADER),
    ("request/context", kind::REQUEST_CONTEXT),
    ("session/end-seed", kind::END_SEED),
    ("todo/write", kind::TODO_WRITE),
    ("compaction/start", kind::COMPACTION_START),
    ("compaction/summary", kind::COMPACTION_SUMMARY),
    ("compaction/end", kind::COMPACTION_END),
    ("compaction/prune", kind::COMPACTION_PRUNE),
    ("assistant/attempt", kind::ASSISTANT_ATTEMPT),
    ("steering/message", kind::USER_MESSAGE),
];

/// The record kind tag of an event (after any legacy upgrade of its type).
pub fn kind_tag(event: &Event) -> u8 {
    let event_type = event.event_type();
    match TAGS.iter().find(|(t, _)| *t == event_type) {
        Some((_, tag)) => *tag,
        None if event.is_ignorable() => kind::IGNORABLE_UNKNOWN,
        None => kind::OPAQUE,
    }
}

/// Whether a kind tag denotes a surface event (readers deriving the surface skip the rest
/// without parsing their payloads).
#[inline]
pub fn is_surface_kind(tag: u8) -> bool {
    (0x01..=0x0F).contains(&tag)
}

/// Encoding version byte of event and header records (spec: events.md#event-record).
pub const EVENT_ENCODING_V1: u8 = 1;

/// Encodes one event: the version byte, then the envelope JSON exactly as stored.
pub fn encode_event(event: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.raw().len() + 1);
    encode_event_into(event, &mut out);
    out
}

/// [`encode_event`] into `out`, replacing what it held (its allocation is reused).
pub fn encode_event_into(event: &Event, out: &mut Vec<u8>) {
    out.clear();
    out.push(EVENT_ENCODING_V1);
    out.extend_from_slice(event.raw().as_bytes());
}

/// Decodes [`encode_event`] output; the envelope is re-validated.
pub fn decode_event(bytes: &[u8]) -> Result<Event, Error> {
    let text = versioned_text(bytes, "event")?;
    Event::parse(text, 0).map_err(|e| Error::Decode {
        what: "event",
        detail: e.to_string(),
    })
}

/// Decodes an event record read back from the log (checksum-verified, validated when it was
/// appended): the envelope is parsed without repeating the full lossless-JSON scan.
pub fn decode_stored_event(bytes: &[u8]) -> Result<Event, Error> {
    let text = versioned_text(bytes, "event")?;
    Event::parse_stored(text, 0).map_err(|e| Error::Decode {
        what: "event",
        detail: e.to_string(),
    })
}

/// Encodes a session header record: the version byte, then the header JSON as stored.
pub fn encode_header(header: &SessionHeader) -> Vec<u8> {
    let raw = header.raw().as_bytes();
    let mut out = Vec::with_capacity(raw.len() + 1);
    out.push(EVENT_ENCODING_V1);
    out.extend_from_slice(raw);
    out
}

/// Decodes [`encode_header`] output.
pub fn decode_header(bytes: &[u8]) -> Result<SessionHeader, Error> {
    let text = versioned_text(bytes, "session header")?;
    SessionHeader::parse(text).map_err(|e| Error::Decode {
        what: "session header",
        detail: e.to_string(),
    })
}

fn versioned_text<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, Error> {
    match bytes.split_first() {
        Some((&EVENT_ENCODING_V1, rest)) => std::str::from_utf8(rest).map_err(|e| Error::Decode {
            what,
            detail: format!("not UTF-8 at byte {}", e.valid_up_to() + 1),
        }),
        Some((version, _)) => Err(Error::Decode {
            what,
            detail: format!("unknown encoding version {version}"),
        }),
        None => Err(Error::Decode {
            what,
            detail: "empty record".into(),
        }),
    }
}
