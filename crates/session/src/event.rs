//! The event envelope: `type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?`.
//!
//! An [`Event`] keeps the exact JSON text of its envelope (`raw`) and parsed copies of the
//! envelope fields. The raw text is the unit of storage and export, so key order, number
//! spelling and the order of envelope keys (DSH files contain both `surfaceOp,
//! sourceEventSeqs` and the reverse) survive import, storage and export unchanged.
//! Events this crate writes itself use DSH's writer order.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use crate::error::{Error, Rule};
use crate::json::{self, decode_string, write_js_string, JsonKind, JsonRef, MemberIndex};
use crate::version::DshFormat;

/// A per-session event sequence number: 0, 1, 2, … with no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl Seq {
    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The seq `n` places after this one.
impl std::ops::Add<u64> for Seq {
    type Output = Seq;

    fn add(self, n: u64) -> Seq {
        Seq(self.0.saturating_add(n))
    }
}

impl From<u64> for Seq {
    fn from(seq: u64) -> Seq {
        Seq(seq)
    }
}

impl From<Seq> for u64 {
    fn from(seq: Seq) -> u64 {
        seq.0
    }
}

/// A seq compares with the plain number it holds (`seq == 3`).
impl PartialEq<u64> for Seq {
    fn eq(&self, other: &u64) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How a surface event changes the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SurfaceOp {
    /// Push the event at the end of the surface.
    Append,
    /// Shadow the current surface nodes from `start` to `end` (event seqs, in surface
    /// order) and take their place.
    Replace {
        /// Seq of the first shadowed node.
        start: Seq,
        /// Seq of the last shadowed node.
        end: Seq,
    },
}

impl SurfaceOp {
    fn parse(value: JsonRef<'_>) -> Option<SurfaceOp> {
        Self::parse_spelled(value).map(|(op, _)| op)
    }

    /// Parses either spelling of a replacement: `{op, start, end}` (DSH formats V0-V2)
    /// or `{op, startSeq, endSeq}` (V3 and later); the flag says which one it was.
    fn parse_spelled(value: JsonRef<'_>) -> Option<(SurfaceOp, bool)> {
        if value.as_str().as_deref() == Some("append") {
            return Some((SurfaceOp::Append, false));
        }
        let seq_spelling = value.has_exact_keys(&["op", "startSeq", "endSeq"]);
        if !seq_spelling && !value.has_exact_keys(&["op", "start", "end"]) {
            return None;
        }
        if value.get("op")?.as_str().as_deref() != Some("replace") {
            return None;
        }
        let (start, end) = replace_keys(seq_spelling);
        let op = SurfaceOp::Replace {
            start: Seq(value.get(start)?.as_seq()?),
            end: Seq(value.get(end)?.as_seq()?),
        };
        Some((op, seq_spelling))
    }

    /// Writes the operation as `format` spells it: a replacement is `{op, start, end}` up
    /// to V2 and `{op, startSeq, endSeq}` from V3 on.
    fn write(&self, out: &mut String, format: DshFormat) {
        match self {
            SurfaceOp::Append => out.push_str("\"append\""),
            SurfaceOp::Replace { start, end } => {
                let (start_key, end_key) = replace_keys(format.replace_spells_seq());
                out.push_str("{\"op\":\"replace\",\"");
                out.push_str(start_key);
                out.push_str("\":");
                json::push_u64(out, start.get());
                out.push_str(",\"");
                out.push_str(end_key);
                out.push_str("\":");
                json::push_u64(out, end.get());
                out.push('}');
            }
        }
    }
}

/// The keys of a replacement's range: `startSeq`/`endSeq` (DSH V3 and later) or
/// `start`/`end`.
fn replace_keys(seq_spelling: bool) -> (&'static str, &'static str) {
    if seq_spelling {
        ("startSeq", "endSeq")
    } else {
        ("start", "end")
    }
}

/// The legacy upgrade applied in memory at load (spec §9); the raw text is untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upgrade {
    pub(crate) event_type: Option<Box<str>>,
    pub(crate) data: Box<str>,
}

/// One session event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    raw: Box<str>,
    type_name: TypeName,
    seq: Seq,
    time: i64,
    data: Range<usize>,
    surface_op: Option<SurfaceOp>,
    /// Whether a replacement is spelled `{op, startSeq, endSeq}` (DSH V3 and later).
    replace_spells_seq: bool,
    source_event_seqs: Option<Box<[Seq]>>,
    ignorable: bool,
    /// The members of the stored payload (and of its `message` object), found while the
    /// envelope was parsed, so the rules read payload fields without walking the payload
    /// again; `None` when the payload is not an object (navigation then walks the text).
    payload: Option<MemberIndex>,
    pub(crate) upgrade: Option<Box<Upgrade>>,
}

/// Where an event's type is: the bytes of `raw` between the quotes of its `type` string
/// when that is spelled without escapes (as every writer spells it: nothing is copied), or
/// the decoded text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TypeName {
    Span(Range<usize>),
    Decoded(Box<str>),
}

const ENVELOPE_KEYS: [&str; 7] = [
    "type",
    "seq",
    "time",
    "data",
    "surfaceOp",
    "sourceEventSeqs",
    "ignorable",
];

/// The slot of `data` in [`ENVELOPE_KEYS`].
const DATA_SLOT: usize = 3;

/// The slot in [`ENVELOPE_KEYS`] of the key whose literal (with its quotes) is `literal`,
/// if it is an envelope key. A literal spelled without escapes, as every writer spells
/// keys, is matched as written; only another spelling is decoded first.
fn envelope_slot(literal: &str) -> Option<usize> {
    let slot = match literal {
        "\"type\"" => 0,
        "\"seq\"" => 1,
        "\"time\"" => 2,
        "\"data\"" => DATA_SLOT,
        "\"surfaceOp\"" => 4,
        "\"sourceEventSeqs\"" => 5,
        "\"ignorable\"" => 6,
        _ => {
            let key = decode_string(literal);
            return ENVELOPE_KEYS.iter().position(|k| *k == key);
        }
    };
    Some(slot)
}

impl Event {
    /// Parses and checks one envelope (lossless JSON plus the envelope rules of spec §3).
    /// `seq_hint` names the event in errors when its own seq is unreadable.
    pub fn parse(raw: &str, seq_hint: u64) -> Result<Event, Error> {
        Self::parse_checked(raw, seq_hint, true)
    }

    /// Parses an envelope that was validated when it was appended and comes back from a
    /// checksum-verified log record: the envelope rules are checked, the lossless-JSON scan of
    /// the whole text is not repeated. Never panics on any text (the navigator is bounds-checked).
    pub fn parse_stored(raw: &str, seq_hint: u64) -> Result<Event, Error> {
        Self::parse_checked(raw, seq_hint, false)
    }

    /// Parses `raw` and keeps it: text the caller already owns (an envelope just written)
    /// is moved into the event instead of copied. With `lossless_scan` false the caller has
    /// already found the whole text lossless JSON ([`json::validate_str`]), and that scan is
    /// not repeated.
    pub(crate) fn parse_checked<R>(
        owned: R,
        seq_hint: u64,
        lossless_scan: bool,
    ) -> Result<Event, Error>
    where
        R: AsRef<str> + Into<Box<str>>,
    {
        Self::parse_checked_known(owned, seq_hint, lossless_scan, None)
    }

    /// [`Event::parse_checked`] of an envelope whose data `known` describes (walked and
    /// indexed by [`json::validate_and_index_data`] as the envelope was written): the data
    /// is not walked again.
    fn parse_checked_known<R>(
        owned: R,
        seq_hint: u64,
        lossless_scan: bool,
        known: Option<json::IndexedData>,
    ) -> Result<Event, Error>
    where
        R: AsRef<str> + Into<Box<str>>,
    {
        let raw = owned.as_ref();
        let type_hint = || {
            JsonRef::new(raw)
                .get("type")
                .and_then(|t| t.as_str().map(|s| s.into_owned()))
                .unwrap_or_else(|| "no type".to_owned())
        };
        if lossless_scan {
            json::validate_str(raw).map_err(|e| {
                Error::invalid(
                    seq_hint,
                    &type_hint(),
                    Rule::LosslessJson,
                    format!("byte {}: {}", e.offset, e.kind),
                )
            })?;
        }
        let root = JsonRef::new(raw);
        let bad = |rule: Rule, detail: &str| Error::invalid(seq_hint, &type_hint(), rule, detail);
        if !root.is_object() {
            return Err(bad(Rule::Envelope, "an event must be a JSON object"));
        }
        // One pass over the members: the payload is walked once, indexing its members (and
        // its message's) for the rules, instead of being skipped and walked again per field.
        let mut fields: [Option<JsonRef<'_>>; 7] = [None; 7];
        let mut unknown = None;
        let mut data_members = 0;
        let payload = json::envelope_members_indexing(raw, known, |literal, value| {
            match envelope_slot(literal) {
                Some(slot) => {
                    data_members += usize::from(slot == DATA_SLOT);
                    if let Some(field) = fields.get_mut(slot) {
                        *field = Some(value);
                    }
                }
                None => {
                    unknown.get_or_insert_with(|| decode_string(literal));
                }
            }
        });
        // Text with a repeated `data` (never validated text: it is refused) uses the last
        // one, which the index does not describe.
        let payload = payload.filter(|_| data_members == 1);
        if let Some(key) = unknown {
            return Err(bad(
                Rule::Envelope,
                &format!("unknown envelope key {key:?}"),
            ));
        }
        let [type_field, seq_field, time_field, data_field, op_field, sources_field, ignorable_field] =
            fields;
        let type_name = type_field
            .and_then(|t| t.as_str())
            .ok_or_else(|| bad(Rule::Envelope, "type must be a string"))?;
        let seq = seq_field
            .and_then(|s| s.as_seq())
            .ok_or_else(|| bad(Rule::Envelope, "seq must be a non-negative safe integer"))?;
        let bad = |rule: Rule, detail: &str| Error::invalid(seq, &type_name, rule, detail);
        let time = time_field
            .and_then(|t| t.as_safe_integer())
            .ok_or_else(|| bad(Rule::Envelope, "time must be a safe integer"))?;
        let data = data_field.ok_or_else(|| bad(Rule::Envelope, "data is required"))?;
        let data_start = data.raw().as_ptr() as usize - raw.as_ptr() as usize;
        let (surface_op, replace_spells_seq) = match op_field {
            None => (None, false),
            Some(op) => {
                let (op, spelled) = SurfaceOp::parse_spelled(op).ok_or_else(|| {
                    bad(
                        Rule::SurfaceOp,
                        "must be \"append\" or exactly {op:\"replace\",start,end} (or \
                         {op:\"replace\",startSeq,endSeq}) with seqs",
                    )
                })?;
                (Some(op), spelled)
            }
        };
        let source_event_seqs = match sources_field {
            None => None,
            Some(list) => {
                Some(parse_sources(list, seq).map_err(|d| bad(Rule::SourceEventSeqs, &d))?)
            }
        };
        let ignorable = match ignorable_field {
            None => false,
            Some(v) if v.as_bool() == Some(true) => true,
            Some(_) => return Err(bad(Rule::Envelope, "ignorable, when present, must be true")),
        };
        let type_name = match type_name {
            Cow::Borrowed(text) => {
                let start = text.as_ptr() as usize - raw.as_ptr() as usize;
                TypeName::Span(start..start + text.len())
            }
            Cow::Owned(text) => TypeName::Decoded(text.into()),
        };
        let data = data_start..data_start + data.raw().len();
        Ok(Event {
            type_name,
            seq: Seq(seq),
            time,
            data,
            surface_op,
            replace_spells_seq,
            source_event_seqs,
            ignorable,
            raw: owned.into(),
            payload,
            upgrade: None,
        })
    }

    /// The values of `keys` in the payload the semantics see (see [`Event::data`]), as
    /// [`JsonRef::fields`] finds them, read from the index made at parse time when the
    /// payload is as stored.
    pub fn data_fields<const N: usize>(&self, keys: [&str; N]) -> [Option<JsonRef<'_>>; N] {
        match &self.upgrade {
            None => self.stored_data_fields(keys),
            Some(_) => self.data().fields(keys),
        }
    }

    /// The values of `keys` in the payload as stored (see [`Event::stored_data`]).
    pub(crate) fn stored_data_fields<const N: usize>(
        &self,
        keys: [&str; N],
    ) -> [Option<JsonRef<'_>>; N] {
        match &self.payload {
            Some(index) => json::indexed_fields(&self.raw, index.as_slice(), 0, keys),
            None => self.stored_data().fields(keys),
        }
    }

    /// The values of `keys` in the payload's `message` object (`data.message`), as
    /// `data().get("message")` and then [`JsonRef::fields`] find them.
    pub fn message_fields<const N: usize>(&self, keys: [&str; N]) -> [Option<JsonRef<'_>>; N] {
        match (&self.upgrade, &self.payload) {
            (None, Some(index)) => json::indexed_fields(&self.raw, index.as_slice(), 1, keys),
            _ => self
                .data()
                .get("message")
                .map(|m| m.fields(keys))
                .unwrap_or([None; N]),
        }
    }

    /// The blocks of `content`, the message content of this event as
    /// [`crate::derive_message_content`] finds it where its message lives at `location`:
    /// each element with the values of `keys` in it, as [`JsonRef::element_fields`] finds
    /// them. Read from the index made at parse time when the payload is as stored (the
    /// content's blocks were indexed in the walk that parsed it), else walked.
    pub fn content_blocks<'a, 'k, const N: usize>(
        &'a self,
        location: crate::MessageLocation,
        content: JsonRef<'a>,
        keys: [&'k str; N],
    ) -> json::Blocks<'a, 'k, N> {
        match self.indexed_blocks(location, content, keys) {
            Some(blocks) => json::Blocks::indexed(blocks),
            None => json::Blocks::walked(content.element_fields(keys)),
        }
    }

    /// The index entries of the blocks of `content` (see [`Event::content_blocks`]), when
    /// the payload is as stored and its parse indexed them.
    fn indexed_blocks<'a, 'k, const N: usize>(
        &'a self,
        location: crate::MessageLocation,
        content: JsonRef<'a>,
        keys: [&'k str; N],
    ) -> Option<json::IndexedBlocks<'a, 'k, N>> {
        let depth = match location {
            crate::MessageLocation::Data => 0,
            crate::MessageLocation::DataMessage => 1,
        };
        match (&self.upgrade, &self.payload) {
            (None, Some(index)) => {
                json::indexed_blocks(&self.raw, index.as_slice(), depth, content, keys)
            }
            _ => None,
        }
    }

    /// The blocks of `content` (as for [`Event::content_blocks`]), each as its members:
    /// read from the index made at parse time when the payload is as stored, else walked.
    /// For a reader that wants different members of different kinds of block.
    pub fn content_block_members<'a>(
        &'a self,
        location: crate::MessageLocation,
        content: JsonRef<'a>,
    ) -> json::BlockMembers<'a> {
        match self.indexed_blocks(location, content, []) {
            Some(blocks) => json::BlockMembers::indexed(blocks),
            None => json::BlockMembers::walked(content.elements()),
        }
    }

    /// The envelope exactly as stored.
    #[inline]
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The event type as stored (before any legacy upgrade).
    #[inline]
    pub fn stored_type(&self) -> &str {
        match &self.type_name {
            TypeName::Span(span) => self.raw.get(span.clone()).unwrap_or_default(),
            TypeName::Decoded(text) => text,
        }
    }

    /// The event type, after the in-memory legacy upgrade if one applied.
    #[inline]
    pub fn event_type(&self) -> &str {
        match self.upgrade.as_ref().and_then(|u| u.event_type.as_deref()) {
            Some(t) => t,
            None => self.stored_type(),
        }
    }

    /// The sequence number.
    #[inline]
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// Epoch milliseconds as written (not monotonic, may be 0).
    #[inline]
    pub fn time(&self) -> i64 {
        self.time
    }

    /// The payload exactly as stored.
    #[inline]
    pub fn stored_data(&self) -> JsonRef<'_> {
        JsonRef::new(self.raw.get(self.data.clone()).unwrap_or("null"))
    }

    /// The payload the semantics see: the legacy upgrade if one applied, else as stored.
    #[inline]
    pub fn data(&self) -> JsonRef<'_> {
        match &self.upgrade {
            Some(u) => JsonRef::new(&u.data),
            None => self.stored_data(),
        }
    }

    /// Whether a legacy shape was upgraded in memory.
    #[inline]
    pub fn is_upgraded(&self) -> bool {
        self.upgrade.is_some()
    }

    /// The surface operation, if any.
    #[inline]
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        self.surface_op
    }

    /// Whether the replacement is spelled `{op, startSeq, endSeq}` (DSH V3 and later)
    /// rather than `{op, start, end}`.
    pub fn replace_spells_seq(&self) -> bool {
        self.replace_spells_seq
    }

    /// The cited source events, if the key is present (`[start, end]` range pairs
    /// expanded).
    #[inline]
    pub fn source_event_seqs(&self) -> Option<&[Seq]> {
        self.source_event_seqs.as_deref()
    }

    /// Whether the event carries `"ignorable": true`.
    #[inline]
    pub fn is_ignorable(&self) -> bool {
        self.ignorable
    }

    /// Whether the envelope has exactly the keys `type, seq, time, data`.
    pub(crate) fn is_bare(&self) -> bool {
        self.surface_op.is_none() && self.source_event_seqs.is_none() && !self.ignorable
    }
}

fn parse_sources(list: JsonRef<'_>, seq: u64) -> Result<Box<[Seq]>, String> {
    parse_sources_reading(list, seq, true)
}

/// [`parse_sources`], reading a plain list in one pass when `plain_pass` is set (always,
/// but for the test that compares both ways).
fn parse_sources_reading(
    list: JsonRef<'_>,
    seq: u64,
    plain_pass: bool,
) -> Result<Box<[Seq]>, String> {
    if !list.is_array() {
        return Err("must be an array of seqs".to_owned());
    }
    // Room for a settlement's citations; the list kept is copied out at its exact size.
    let mut out: Vec<u64> = Vec::with_capacity(16);
    let mut ranged = false;
    // A list of plain seqs (as every writer spells them) is read in one pass over its
    // bytes; the entries get the check the loop below gives a plain entry, in order.
    let plain = plain_pass && plain_seqs(list.raw(), &mut out);
    if plain {
        if let Some(s) = out.iter().find(|s| **s >= seq) {
            return Err(format!("entry {s} is not before the event's own seq {seq}"));
        }
    } else {
        out.clear();
    }
    let walked = if plain { 0 } else { usize::MAX };
    for item in list.elements().take(walked) {
        // DSH V2's writer (and every reader) spells a run of three or more consecutive
        // seqs as a `[start, end]` pair.
        if item.is_array() {
            let pair: Vec<Option<u64>> = item.elements().map(|e| e.as_seq()).collect();
            let (Some(start), Some(end)) = (
                pair.first().copied().flatten(),
                pair.get(1).copied().flatten(),
            ) else {
                return Err("a range must be a [start, end] pair of seqs".to_owned());
            };
            if pair.len() != 2 || end < start || end >= seq {
                return Err(format!(
                    "range [{start}, {end}] must be increasing and before the event's own seq {seq}"
                ));
            }
            // Every entry is an earlier seq and none repeats, so a valid list has at
            // most `seq` entries: a range past that is refused before it is expanded.
            if end - start + 1 > seq - out.len() as u64 {
                return Err(format!(
                    "range [{start}, {end}] exceeds the event's own seq {seq}"
                ));
            }
            out.extend(start..=end);
            ranged = true;
            continue;
        }
        let s = item
            .as_seq()
            .ok_or("entries must be non-negative safe integers")?;
        if s >= seq {
            return Err(format!("entry {s} is not before the event's own seq {seq}"));
        }
        out.push(s);
    }
    let increasing = out.windows(2).all(|w| w[0] < w[1]);
    if ranged && !increasing {
        return Err("with ranges, entries must be strictly increasing".to_owned());
    }
    if !increasing && !repeats_none(&out) {
        return Err("entries must not repeat".to_owned());
    }
    Ok(out.iter().copied().map(Seq).collect())
}

/// Whether `list` holds no entry twice. Writers cite sources in seq order, and a strictly
/// increasing list repeats nothing: only another order needs a sorted copy.
fn repeats_none<T: Ord + Copy>(list: &[T]) -> bool {
    let increasing = |l: &[T]| l.windows(2).all(|w| w[0] < w[1]);
    increasing(list) || {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        increasing(&sorted)
    }
}

/// Reads `text`, when it is an array of integers each spelled as `as_seq` reads exactly
/// (1 to 15 digits, no leading zero) with JSON whitespace between, into `out`; false (with
/// `out` holding anything) for any other text, which the caller then walks.
fn plain_seqs(text: &str, out: &mut Vec<u64>) -> bool {
    let bytes = text.as_bytes();
    let skip_ws = |mut at: usize| {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
            at += 1;
        }
        at
    };
    if bytes.first() != Some(&b'[') {
        return false;
    }
    let mut at = skip_ws(1);
    if bytes.get(at) == Some(&b']') {
        return at + 1 == bytes.len();
    }
    loop {
        let start = at;
        let mut value = 0u64;
        while let Some(digit) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
            value = value * 10 + u64::from(digit - b'0');
            at += 1;
            if at - start > 15 {
                return false;
            }
        }
        let digits = at - start;
        if digits == 0 || (digits > 1 && bytes.get(start) == Some(&b'0')) {
            return false;
        }
        out.push(value);
        at = skip_ws(at);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(at + 1),
            Some(b']') => return at + 1 == bytes.len(),
            _ => return false,
        }
    }
}

/// An event to append: everything but the seq, which the session assigns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventInput {
    /// The event type.
    pub event_type: String,
    /// Epoch milliseconds.
    pub time: i64,
    /// The payload as JSON text (kept byte for byte).
    pub data: String,
    /// The surface operation (mandatory on surface types, forbidden elsewhere).
    pub surface_op: Option<SurfaceOp>,
    /// The cited source events.
    pub source_event_seqs: Option<Vec<Seq>>,
    /// Whether an unknown type may be skipped by readers that do not know it.
    pub ignorable: bool,
    /// When set, must equal the session's next seq.
    pub seq: Option<Seq>,
}

impl EventInput {
    /// A structural event with the given payload text.
    pub fn new(event_type: impl Into<String>, time: i64, data: impl Into<String>) -> Self {
        EventInput {
            event_type: event_type.into(),
            time,
            data: data.into(),
            surface_op: None,
            source_event_seqs: None,
            ignorable: false,
            seq: None,
        }
    }

    /// Sets the surface operation.
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Self {
        self.surface_op = Some(op);
        self
    }

    /// Sets the cited sources.
    pub fn with_sources(mut self, sources: Vec<Seq>) -> Self {
        self.source_event_seqs = Some(sources);
        self
    }

    /// Marks the event ignorable.
    pub fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }

    /// Parses a JSON object with `type`, `data` and optional `time`, `seq`, `surfaceOp`,
    /// `sourceEventSeqs`, `ignorable` (the shape a command-line append reads).
    /// `default_time` is used when `time` is absent.
    pub fn from_json(text: &str, default_time: i64) -> Result<EventInput, Error> {
        json::validate_str(text)?;
        let root = JsonRef::new(text);
        let type_hint = root
            .get("type")
            .and_then(|t| t.as_str().map(|s| s.into_owned()));
        let bad = |detail: &str| Error::BadEnvelope {
            event_type: type_hint.clone(),
            detail: detail.to_owned(),
        };
        if !root.is_object() {
            return Err(bad("an event must be a JSON object"));
        }
        let event_type = root
            .get("type")
            .and_then(|t| t.as_str())
            .ok_or_else(|| bad("type must be a string"))?;
        let data = root.get("data").ok_or_else(|| bad("data is required"))?;
        let time = match root.get("time") {
            None => default_time,
            Some(t) => t
                .as_safe_integer()
                .ok_or_else(|| bad("time must be a safe integer"))?,
        };
        let seq = match root.get("seq") {
            None => None,
            Some(s) => Some(
                s.as_seq()
                    .ok_or_else(|| bad("seq must be a non-negative safe integer"))?,
            ),
        };
        let surface_op = match root.get("surfaceOp") {
            None => None,
            Some(op) => Some(SurfaceOp::parse(op).ok_or_else(|| bad("malformed surfaceOp"))?),
        };
        let source_event_seqs = match root.get("sourceEventSeqs") {
            None => None,
            Some(list) => Some(
                list.elements()
                    .map(|s| s.as_seq().map(Seq))
                    .collect::<Option<Vec<Seq>>>()
                    .filter(|_| list.is_array())
                    .ok_or_else(|| bad("sourceEventSeqs must be an array of seqs"))?,
            ),
        };
        let ignorable = match root.get("ignorable") {
            None => false,
            Some(v) => v
                .as_bool()
                .filter(|b| *b)
                .ok_or_else(|| bad("ignorable must be true"))?,
        };
        for (key, _) in root.members() {
            if !ENVELOPE_KEYS.contains(&key.as_ref()) {
                return Err(bad(&format!("unknown envelope key {key:?}")));
            }
        }
        Ok(EventInput {
            event_type: event_type.into_owned(),
            time,
            data: data.raw().to_owned(),
            surface_op,
            source_event_seqs,
            ignorable,
            seq: seq.map(Seq),
        })
    }

    /// Renders the envelope as DSH's writer does, with the given seq, and parses it.
    /// `data` must be exactly one JSON value: text such as `{},"ignorable":true` would
    /// otherwise add envelope keys, so it is refused. A replacement is spelled as format
    /// V0 spells it; [`EventInput::into_event_for`] spells it as a session's format does.
    pub fn into_event(self, seq: u64) -> Result<Event, Error> {
        self.into_event_for(seq, DshFormat::V0)
    }

    /// [`EventInput::into_event`] for a session of DSH format `format`, whose replacements
    /// are spelled `{op, startSeq, endSeq}` from V3 on.
    pub fn into_event_for(self, seq: u64, format: DshFormat) -> Result<Event, Error> {
        // The envelope is written around the data in two small parts, then put together in
        // one buffer of exactly its length: the event keeps it as a `Box<str>`, which a
        // buffer with room to spare would be reallocated to fit.
        thread_local!(static PARTS: std::cell::RefCell<(String, String)> = const {
            std::cell::RefCell::new((String::new(), String::new()))
        });
        let (out, type_literal, data_start) = PARTS.with(|parts| {
            let (head, tail) = &mut *parts.borrow_mut();
            head.clear();
            tail.clear();
            head.push_str("{\"type\":");
            let type_start = head.len();
            write_js_string(head, &self.event_type);
            let type_literal = type_start..head.len();
            head.push_str(",\"seq\":");
            json::push_u64(head, seq);
            head.push_str(",\"time\":");
            json::push_i64(head, self.time);
            head.push_str(",\"data\":");
            // DSH's `Session.append` writes the cited sources before the surface operation.
            if let Some(sources) = &self.source_event_seqs {
                tail.push_str(",\"sourceEventSeqs\":[");
                for (i, s) in sources.iter().enumerate() {
                    if i > 0 {
                        tail.push(',');
                    }
                    json::push_u64(tail, s.get());
                }
                tail.push(']');
            }
            if let Some(op) = &self.surface_op {
                tail.push_str(",\"surfaceOp\":");
                op.write(tail, format);
            }
            if self.ignorable {
                tail.push_str(",\"ignorable\":true");
            }
            tail.push('}');
            let mut out = String::with_capacity(head.len() + self.data.len() + tail.len());
            out.push_str(head);
            out.push_str(&self.data);
            out.push_str(tail);
            (out, type_literal, head.len())
        });
        // Everything but the data is written here and is lossless JSON by construction, so a
        // lossless scan of the data alone (at its depth in the envelope) stands for one of
        // the whole envelope, which then needs only its envelope rules checked; the scan
        // also indexes the data, which the envelope's parse then does not walk again. Data
        // that fails takes the full parse, whose error says where in the envelope it failed.
        let data_end = data_start + self.data.len();
        let event = match json::validate_and_index_data(&out, data_start, data_end) {
            Ok(known) if self.is_built_as_written(seq) => {
                self.written_event(out, seq, format, type_literal, known)
            }
            Ok(known) => Event::parse_checked_known(out, seq, false, Some(known))?,
            Err(_) => Event::parse(&out, seq)?,
        };
        let given = self.data.trim_matches([' ', '\t', '\n', '\r']);
        if event.data().raw().len() != given.len() {
            return Err(Error::invalid(
                seq,
                &self.event_type,
                Rule::LosslessJson,
                "data must be exactly one lossless JSON value",
            ));
        }
        Ok(event)
    }
}

impl EventInput {
    /// Whether the envelope [`EventInput::into_event_for`] writes for this input at `seq`
    /// passes every envelope rule by construction, so that its event is made from the
    /// input's own fields ([`EventInput::written_event`]) instead of parsed: the seq, the
    /// time and a replacement's bounds are safe integers, and the cited sources, if any, are
    /// before `seq` and repeat none (so they are safe integers: the list's rules hold, and
    /// its parse would read back the same seqs in the same order), checked as
    /// [`parse_sources`] checks them. Any other list takes the parse, which says which of
    /// its rules it breaks.
    fn is_built_as_written(&self, seq: u64) -> bool {
        let safe = |n: u64| n as f64 <= json::MAX_SAFE_INTEGER;
        let cites_validly =
            |sources: &[Seq]| sources.iter().all(|s| s.get() < seq) && repeats_none(sources);
        safe(seq)
            && safe(self.time.unsigned_abs())
            && self.source_event_seqs.as_deref().is_none_or(cites_validly)
            && match self.surface_op {
                None | Some(SurfaceOp::Append) => true,
                Some(SurfaceOp::Replace { start, end }) => safe(start.get()) && safe(end.get()),
            }
    }

    /// The event the envelope `out` parses to, which [`EventInput::into_event_for`] wrote
    /// for this input at `seq` in `format`, with its type literal at `type_literal` and its
    /// data as `known` found it: the fields are the input's, which the parse would only read
    /// back. For an input [`EventInput::is_built_as_written`] accepts.
    fn written_event(
        &self,
        out: String,
        seq: u64,
        format: DshFormat,
        type_literal: Range<usize>,
        known: json::IndexedData,
    ) -> Event {
        // Spelled without escapes, the type's text between the literal's quotes is where the
        // event keeps it, as a parse would.
        let type_name = match out.get(type_literal.clone()) {
            Some(text) if !text.contains('\\') => {
                TypeName::Span(type_literal.start + 1..type_literal.end - 1)
            }
            _ => TypeName::Decoded(self.event_type.as_str().into()),
        };
        let replace_spells_seq = matches!(self.surface_op, Some(SurfaceOp::Replace { .. }))
            && format.replace_spells_seq();
        Event {
            type_name,
            seq: Seq(seq),
            time: self.time,
            data: known.value,
            surface_op: self.surface_op,
            replace_spells_seq,
            source_event_seqs: self.source_event_seqs.as_deref().map(Box::from),
            ignorable: self.ignorable,
            raw: out.into(),
            payload: known.index,
            upgrade: None,
        }
    }
}

/// Whether `value` is a JSON number (used by typed views and validation).
pub(crate) fn is_number(value: Option<JsonRef<'_>>) -> bool {
    value.is_some_and(|v| v.kind() == JsonKind::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Matching a key literal as written finds the slot decoding it would find, for every
    /// envelope key, escaped spellings and other keys.
    #[test]
    fn an_envelope_key_is_found_in_its_slot_however_it_is_spelled() {
        assert_eq!(ENVELOPE_KEYS[DATA_SLOT], "data");
        for (slot, key) in ENVELOPE_KEYS.iter().enumerate() {
            assert_eq!(envelope_slot(&format!("\"{key}\"")), Some(slot), "{key}");
            let escaped = format!("\"\\u{:04x}{}\"", u32::from(key.as_bytes()[0]), &key[1..]);
            assert_eq!(envelope_slot(&escaped), Some(slot), "{escaped}");
        }
        for other in ["\"Type\"", "\"datas\"", "\"\"", "\"ty\\\"pe\"", "\"seq \""] {
            assert_eq!(envelope_slot(other), None, "{other}");
        }
    }

    proptest::proptest! {
        /// A list of seqs read in one pass gives what walking its elements gives: the same
        /// seqs or the same refusal, on plain lists and on lists that only look plain.
        #[test]
        fn a_plain_source_list_reads_as_its_walk_does(
            entries in proptest::collection::vec(
                proptest::sample::select(vec![
                    "0", "1", "7", "12", "99", "007", "1e1", "-1", "1.0", "[1, 3]",
                    "123456789012345", "1234567890123456", "\"2\"", "",
                ]),
                0..8,
            ),
            separator in proptest::sample::select(vec![",", ", ", " ,\n", ",,"]),
            seq in 0u64..200,
        ) {
            let text = format!("[{}]", entries.join(separator));
            let list = JsonRef::new(&text);
            proptest::prop_assert_eq!(
                parse_sources_reading(list, seq, true),
                parse_sources_reading(list, seq, false),
                "{}", text
            );
        }
    }
}
