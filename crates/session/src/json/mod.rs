//! Lossless JSON: a validating scanner, a zero-copy navigator over validated text, and
//! a writer that formats strings and numbers exactly as JavaScript's `JSON.stringify`.
//!
//! Payloads are never re-serialised for storage: the bytes a caller (or a DSH file) gave
//! us are kept verbatim, so key order, number spelling and escapes survive untouched.
//! The scanner enforces DSH's lossless rule (finite numbers, no `-0`, plain objects and
//! arrays) and additionally refuses duplicate keys, which JavaScript would silently
//! collapse. Navigation ([`JsonRef`]) walks the validated text on demand instead of
//! building a tree, which keeps validation at append cheap.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

mod index;
mod plain;
mod write;

pub(crate) use index::IndexedBlocks;
pub(crate) use index::{
    canonical_envelope_prefix, envelope_members_indexing, indexed_blocks, indexed_fields,
    MemberIndex,
};
use index::{member_at, MemberSpan};
use plain::plain_run;
pub use write::{decimal_into, js_number, write_js_string, ObjectWriter};
pub(crate) use write::{push_i64, push_u64};

/// Deepest nesting accepted; bounds recursion so hostile input cannot overflow the stack.
pub const MAX_DEPTH: usize = 256;

/// What a scanner expects where a value starts and the text is none.
const ANY_VALUE: &str =
    "a JSON value (null, true, false, a number, a string, an array or an object)";

/// Largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Digits an integer literal may have and still be finite as a double without being
/// converted to see it: `10^308 - 1` is below `f64::MAX` (about `1.8 × 10^308`).
const MAX_FINITE_INTEGER_DIGITS: usize = 308;

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// The text is not JSON at all (what was expected).
    Syntax(&'static str),
    /// An object repeats a key; JavaScript would keep only the last value.
    DuplicateKey(String),
    /// A number overflows to infinity when read as a double.
    NonFiniteNumber(String),
    /// A number reads as negative zero, which `JSON.stringify` would turn into `0`.
    NegativeZero(String),
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl JsonErrorKind {
    /// True when `JSON.parse` itself would fail (as opposed to the lossless rule).
    pub fn is_syntax(&self) -> bool {
        matches!(self, Self::InvalidUtf8 | Self::Syntax(_) | Self::TooDeep)
    }
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUtf8 => write!(f, "invalid UTF-8"),
            Self::Syntax(what) => write!(f, "syntax error: expected {what}"),
            Self::DuplicateKey(key) => write!(f, "duplicate object key {key:?}"),
            Self::NonFiniteNumber(n) => write!(f, "number {n} is not finite as a double"),
            Self::NegativeZero(n) => write!(f, "number {n} is negative zero"),
            Self::TooDeep => write!(f, "nesting deeper than {MAX_DEPTH} levels"),
        }
    }
}

/// A refusal with the byte offset where it was detected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset into the checked text.
    pub offset: usize,
    /// What is wrong.
    pub kind: JsonErrorKind,
}

/// Checks that `bytes` is one lossless JSON value (surrounding whitespace allowed).
///
/// A syntax error wins over a lossless-rule violation found earlier, so callers can tell
/// "unparsable" (physical damage) from "parsable but refused" (semantic refusal).
pub fn validate(bytes: &[u8]) -> Result<&str, JsonError> {
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError {
        offset: e.valid_up_to(),
        kind: JsonErrorKind::InvalidUtf8,
    })?;
    validate_str(text)?;
    Ok(text)
}

/// [`validate`] for text already known to be UTF-8.
pub fn validate_str(text: &str) -> Result<(), JsonError> {
    validate_at_depth(text, 0)
}

/// Keys the validator's key stack holds before it grows.
const KEY_STACK: usize = 16;

fn validate_at_depth(text: &str, depth: usize) -> Result<(), JsonError> {
    let mut scanner = Scanner::new(text, 0, None);
    scanner.ws();
    scanner.value(depth, Role::Plain)?;
    scanner.ws();
    scanner.finish()
}

/// An event's data, validated and indexed in one walk: where its value lies in the envelope
/// and its payload index ([`index::index_payload`]'s, `None` when the value is no object).
#[derive(Debug, Clone)]
pub(crate) struct IndexedData {
    pub(crate) value: std::ops::Range<usize>,
    pub(crate) index: Option<MemberIndex>,
}

/// [`validate_str`] of an event's data, the text `envelope[start..end]` of the envelope
/// just written around it, at the depth of an object member's value (which matters only for
/// [`MAX_DEPTH`]). The same walk indexes the data's value as [`index::index_payload`] would,
/// with offsets into `envelope`: one walk where validating the data and then indexing it
/// while parsing the envelope took two.
pub(crate) fn validate_and_index_data(
    envelope: &str,
    start: usize,
    end: usize,
) -> Result<IndexedData, JsonError> {
    let text = envelope.get(..end).unwrap_or_default();
    index::with_scratch(|members| {
        // Offsets are kept as u32: a longer envelope is validated without an index.
        let indexing = u32::try_from(end).is_ok();
        let mut scanner = Scanner::new(text, start, indexing.then_some(members));
        scanner.ws();
        let value_start = scanner.pos;
        let object = scanner.peek() == Some(b'{');
        scanner.value(1, Role::Members(0))?;
        let value_end = scanner.pos;
        scanner.ws();
        let indexed = scanner.members.take();
        scanner.finish()?;
        Ok(IndexedData {
            value: value_start..value_end,
            index: indexed
                .filter(|_| object)
                .map(|members| MemberIndex::from_slice(members)),
        })
    })
}

/// What the walk of a value records in the payload index, when it indexes one: the
/// members of an object at an index depth (the payload 0, its message 1, a block 2 or 3),
/// the blocks of a `content` array at a block depth, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    Members(u8),
    Blocks(u8),
}

struct Scanner<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    /// First lossless-rule violation; reported only if the text is otherwise well formed.
    lossless: Option<JsonError>,
    /// Keys of the objects being scanned, innermost last; shared so that small objects
    /// cost no allocation.
    keys: Vec<Cow<'a, str>>,
    /// The payload index being gathered, when the walk indexes one.
    members: Option<&'a mut Vec<MemberSpan>>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str, pos: usize, members: Option<&'a mut Vec<MemberSpan>>) -> Scanner<'a> {
        Scanner {
            bytes: text.as_bytes(),
            text,
            pos,
            lossless: None,
            // Room for the keys of an event's nested objects (a message, its source, a
            // block): one allocation, where growing from empty took three.
            keys: Vec::with_capacity(KEY_STACK),
            members,
        }
    }

    /// After the value and the whitespace after it: the text must end here, and then the
    /// first lossless-rule violation, if any, is the refusal.
    fn finish(self) -> Result<(), JsonError> {
        if self.pos != self.bytes.len() {
            return Err(self.syntax("end of input"));
        }
        match self.lossless {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Records one member (or block marker) in the payload index being gathered.
    fn record(&mut self, depth: u8, escaped: bool, key: (usize, usize), value: (usize, usize)) {
        if let Some(members) = self.members.as_mut() {
            // Offsets fit in u32: an index is gathered only for such a text.
            members.push(MemberSpan {
                depth,
                escaped,
                key: (key.0 as u32, key.1 as u32),
                value: (value.0 as u32, value.1 as u32),
            });
        }
    }

    fn syntax(&self, what: &'static str) -> JsonError {
        JsonError {
            offset: self.pos,
            kind: JsonErrorKind::Syntax(what),
        }
    }

    fn note(&mut self, offset: usize, kind: JsonErrorKind) {
        if self.lossless.is_none() {
            self.lossless = Some(JsonError { offset, kind });
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// One value at nesting `depth`; `role` says what of it goes into the payload index
    /// being gathered (a role for an object applies only to an object, one for blocks only
    /// to an array).
    fn value(&mut self, depth: usize, role: Role) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError {
                offset: self.pos,
                kind: JsonErrorKind::TooDeep,
            });
        }
        match self.peek() {
            Some(b'{') => self.object(depth, role),
            Some(b'[') => self.array(depth, role),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.syntax(ANY_VALUE)),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<(), JsonError> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            // `nul` or `not json`: the text is no JSON value, whatever letter it starts with.
            Err(self.syntax(ANY_VALUE))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<(), JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let integer_digits = match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                1
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.syntax("a digit")),
        };
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.syntax("a digit after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integer = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.syntax("a digit in the exponent"));
            }
        }
        let literal = self.text.get(start..self.pos).unwrap_or_default();
        // An integer of up to 308 digits is below 1e308 < f64::MAX, so it is finite as a
        // double, and with no leading zeros its only negative zero is `-0`: most numbers
        // (seqs, times, counts, indexes) need no conversion to be checked.
        if integer && integer_digits <= MAX_FINITE_INTEGER_DIGITS {
            if literal == "-0" {
                self.note(start, JsonErrorKind::NegativeZero(literal.to_owned()));
            }
            return Ok(());
        }
        let value: f64 = literal.parse().unwrap_or(f64::NAN);
        if !value.is_finite() {
            self.note(start, JsonErrorKind::NonFiniteNumber(literal.to_owned()));
        } else if value == 0.0 && value.is_sign_negative() {
            self.note(start, JsonErrorKind::NegativeZero(literal.to_owned()));
        }
        Ok(())
    }

    /// Scans a string: its span with the quotes, and whether it holds an escape.
    fn string(&mut self) -> Result<(usize, usize, bool), JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut escaped = false;
        loop {
            match self.peek() {
                None => return Err(self.syntax("a closing quote")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok((start, self.pos, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(b) if b.is_ascii_hexdigit() => self.pos += 1,
                                    _ => return Err(self.syntax("four hex digits")),
                                }
                            }
                        }
                        _ => return Err(self.syntax("a valid escape")),
                    }
                }
                Some(0x00..=0x1f) => return Err(self.syntax("no raw control character")),
                Some(_) => {
                    // Skip the plain run in one go; only quotes, escapes and control
                    // characters need the slow path.
                    let rest = self.bytes.get(self.pos..).unwrap_or_default();
                    self.pos += plain_run(rest);
                }
            }
        }
    }

    fn array(&mut self, depth: usize, role: Role) -> Result<(), JsonError> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        // The blocks of an indexed `content`: each element's marker (an empty key span and
        // the element's span) comes before its members.
        let blocks = match role {
            Role::Blocks(block_depth) if self.members.is_some() => Some(block_depth),
            _ => None,
        };
        loop {
            match blocks {
                Some(block_depth) => {
                    let marker = self.members.as_ref().map_or(0, |m| m.len());
                    let start = self.pos;
                    self.record(block_depth, false, (0, 0), (0, 0));
                    self.value(depth + 1, Role::Members(block_depth))?;
                    let span = (start as u32, self.pos as u32);
                    if let Some(m) = self.members.as_mut().and_then(|m| m.get_mut(marker)) {
                        m.value = span;
                    }
                }
                None => self.value(depth + 1, Role::Plain)?,
            }
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.syntax("',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize, role: Role) -> Result<(), JsonError> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        // The members of an indexed object, and (as the index walk does) the first
        // `message` object below the payload and the first `content` array below the
        // payload or its message.
        let indexed = match role {
            Role::Members(index_depth) if self.members.is_some() => Some(index_depth),
            _ => None,
        };
        let mut message_seen = indexed.is_none_or(|d| d > 0);
        let mut content_seen = indexed.is_none_or(|d| d > 1);
        // Small objects are the norm: a linear scan of the shared key stack beats hashing
        // until an object grows large.
        let first_key = self.keys.len();
        let mut key_set: Option<HashSet<Cow<'a, str>>> = None;
        let result = loop {
            if self.peek() != Some(b'"') {
                break Err(self.syntax("an object key"));
            }
            let (ks, ke, escaped) = match self.string() {
                Ok(span) => span,
                Err(e) => break Err(e),
            };
            // The scan just said whether the key holds an escape: a plain one is borrowed
            // between its quotes without looking for one again.
            let key = if escaped {
                decode_string(self.text.get(ks..ke).unwrap_or("\"\""))
            } else {
                Cow::Borrowed(self.text.get(ks + 1..ke - 1).unwrap_or_default())
            };
            let duplicate = match &key_set {
                Some(set) => set.contains(&key),
                None => self
                    .keys
                    .get(first_key..)
                    .unwrap_or_default()
                    .contains(&key),
            };
            if duplicate {
                self.note(ks, JsonErrorKind::DuplicateKey(key.to_string()));
            }
            let mut child = Role::Plain;
            if let Some(index_depth) = indexed {
                if !(message_seen && content_seen) {
                    let message = !message_seen && key == "message";
                    let content = !content_seen && !message && key == "content";
                    message_seen |= message;
                    content_seen |= content;
                    if message {
                        child = Role::Members(1);
                    } else if content {
                        child = Role::Blocks(index::block_depth(index_depth));
                    }
                }
            }
            if let Some(set) = key_set.as_mut() {
                set.insert(key);
            } else {
                self.keys.push(key);
                if self.keys.len() - first_key > 32 {
                    key_set = Some(self.keys.drain(first_key..).collect());
                }
            }
            let value = match self.member_value(depth, child) {
                Ok(value) => value,
                Err(e) => break Err(e),
            };
            if let Some(index_depth) = indexed {
                self.record(index_depth, escaped, (ks, ke), value);
            }
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    break Ok(());
                }
                _ => break Err(self.syntax("',' or '}'")),
            }
        };
        self.keys.truncate(first_key);
        result
    }

    /// `: value` after a key, with the whitespace around it; returns where the value lies.
    fn member_value(&mut self, depth: usize, role: Role) -> Result<(usize, usize), JsonError> {
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.syntax("':'"));
        }
        self.pos += 1;
        self.ws();
        let start = self.pos;
        self.value(depth + 1, role)?;
        let end = self.pos;
        self.ws();
        Ok((start, end))
    }
}

/// A string literal's text between its quotes, undecoded (the literal itself when it is
/// not quoted).
pub(super) fn unquoted(literal: &str) -> &str {
    literal
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(literal)
}

/// Decodes a JSON string literal (with quotes). Lone surrogates become U+FFFD: they are
/// legal JSON but have no `str` form; they are only ever compared, never re-emitted.
pub fn decode_string(literal: &str) -> Cow<'_, str> {
    let inner = unquoted(literal);
    if !has_escape(inner) {
        return Cow::Borrowed(inner);
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    let mut pending_high: Option<u32> = None;
    loop {
        // Copy the run up to the next escape in one piece.
        let rest = chars.as_str();
        let run = rest.find('\\').unwrap_or(rest.len());
        if run > 0 {
            flush_high(&mut out, &mut pending_high);
            out.push_str(rest.get(..run).unwrap_or(rest));
            chars = rest.get(run..).unwrap_or("").chars();
        }
        let Some(c) = chars.next() else {
            break;
        };
        if c != '\\' {
            flush_high(&mut out, &mut pending_high);
            out.push(c);
            continue;
        }
        let unit = match chars.next() {
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD)
            }
            Some(other) => {
                flush_high(&mut out, &mut pending_high);
                out.push(match other {
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    c => c,
                });
                continue;
            }
            None => break,
        };
        match (pending_high.take(), unit) {
            (Some(high), 0xDC00..=0xDFFF) => {
                let code = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00);
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            (high, 0xD800..=0xDBFF) => {
                if high.is_some() {
                    out.push('\u{FFFD}');
                }
                pending_high = Some(unit);
            }
            (high, _) => {
                if high.is_some() {
                    out.push('\u{FFFD}');
                }
                out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
            }
        }
    }
    flush_high(&mut out, &mut pending_high);
    Cow::Owned(out)
}

fn flush_high(out: &mut String, pending: &mut Option<u32>) {
    if pending.take().is_some() {
        out.push('\u{FFFD}');
    }
}

/// The kind of a JSON value, read from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// a number
    Number,
    /// a string
    String,
    /// an array
    Array,
    /// an object
    Object,
}

/// A view of one value inside validated JSON text; navigation never allocates for
/// unescaped keys and never panics, even on text that was not validated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JsonRef<'a> {
    text: &'a str,
}

impl fmt::Debug for JsonRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

impl<'a> JsonRef<'a> {
    /// Wraps validated JSON text (surrounding whitespace is trimmed).
    pub fn new(text: &'a str) -> Self {
        // JSON whitespace is ASCII, so it is trimmed byte by byte (no character decoded).
        let is_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        let bytes = text.as_bytes();
        let start = bytes.iter().position(|b| !is_ws(b)).unwrap_or(bytes.len());
        let end = bytes
            .iter()
            .rposition(|b| !is_ws(b))
            .map_or(start, |last| last + 1);
        Self {
            text: text.get(start..end).unwrap_or_default(),
        }
    }

    /// The exact bytes of this value.
    #[inline]
    pub fn raw(&self) -> &'a str {
        self.text
    }

    /// The value's kind (`Null` for empty or malformed text).
    #[inline]
    pub fn kind(&self) -> JsonKind {
        match self.text.as_bytes().first() {
            Some(b'{') => JsonKind::Object,
            Some(b'[') => JsonKind::Array,
            Some(b'"') => JsonKind::String,
            Some(b't' | b'f') => JsonKind::Bool,
            Some(b'-' | b'0'..=b'9') => JsonKind::Number,
            _ => JsonKind::Null,
        }
    }

    /// The decoded string, if this is a string.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        (self.kind() == JsonKind::String).then(|| decode_string(self.text))
    }

    /// The number as a double, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        if self.kind() == JsonKind::Number {
            self.text.parse().ok()
        } else {
            None
        }
    }

    /// The number as an integer, if it is a safe integer (`Number.isSafeInteger`).
    pub fn as_safe_integer(&self) -> Option<i64> {
        // Plain digits (what writers emit for seqs, times and counts) convert exactly
        // without going through a double; 15 digits are below 2^53.
        let (negative, digits) = match self.text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, self.text),
        };
        if (1..=15).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits.len() == 1 || !digits.starts_with('0'))
        {
            let magnitude = digits
                .bytes()
                .fold(0i64, |n, b| n * 10 + i64::from(b - b'0'));
            return Some(if negative { -magnitude } else { magnitude });
        }
        let value = self.as_f64()?;
        if value.fract() == 0.0 && value.abs() <= MAX_SAFE_INTEGER {
            // The range check above makes the conversion exact.
            Some(value as i64)
        } else {
            None
        }
    }

    /// The number as a non-negative safe integer.
    pub fn as_seq(&self) -> Option<u64> {
        self.as_safe_integer().and_then(|v| u64::try_from(v).ok())
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.text {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        self.kind() == JsonKind::Object
    }

    /// Whether this is an array.
    pub fn is_array(&self) -> bool {
        self.kind() == JsonKind::Array
    }

    /// The members of an object in stored order (empty for non-objects).
    pub fn members(&self) -> Members<'a> {
        let pos = if self.is_object() { 1 } else { self.text.len() };
        Members {
            text: self.text,
            pos,
        }
    }

    /// Whether this is an array with at least one element: what
    /// `self.elements().next().is_some()` says of well-formed JSON, without reading the
    /// first element (a message's first content block may be kilobytes of text).
    pub fn has_elements(&self) -> bool {
        let bytes = self.text.as_bytes();
        self.is_array() && !matches!(bytes.get(skip_ws(bytes, 1)), None | Some(b']'))
    }

    /// The elements of an array in order (empty for non-arrays).
    pub fn elements(&self) -> Elements<'a> {
        let pos = if self.is_array() { 1 } else { self.text.len() };
        Elements {
            text: self.text,
            pos,
        }
    }

    /// The elements of an array in order, each with the values of `keys` in it (as
    /// [`JsonRef::fields`] finds them; none for an element that is no object): the same as
    /// [`JsonRef::elements`] then `fields` on each, with each object element walked once
    /// instead of skipped and then walked again.
    pub fn element_fields<'k, const N: usize>(
        &self,
        keys: [&'k str; N],
    ) -> ElementFields<'a, 'k, N> {
        ElementFields {
            elements: self.elements(),
            keys,
        }
    }

    /// For an array whose first element is an object with a `key` member (the first one,
    /// as [`JsonRef::fields`] finds it): the text from the start of that member's value to
    /// the end of the array. The value's end is not looked for, so a caller that needs only
    /// the start of a long string reads it without the string being scanned. `None` for
    /// anything else.
    pub fn first_element_value_onward(&self, key: &str) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        if !self.is_array() {
            return None;
        }
        let start = skip_ws(bytes, 1);
        if bytes.get(start) != Some(&b'{') {
            return None;
        }
        let mut pos = skip_ws(bytes, start + 1);
        loop {
            let (key_end, value_start, escaped) = member_head(bytes, pos)?;
            if KeyLiteral::known(self.text.get(pos..key_end)?, escaped).is(key) {
                return self.text.get(value_start..);
            }
            match after_member(bytes, skip_value(bytes, value_start)?)? {
                AfterMember::Next(next) => pos = next,
                AfterMember::End(_) => return None,
            }
        }
    }

    /// The value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<JsonRef<'a>> {
        let [value] = self.fields([key]);
        value
    }

    /// The values of `keys` in an object, found in one pass over its members (a payload's
    /// large members are skipped once, not once per key); the pass stops when every key is
    /// found. A key that repeats yields its first value, as [`JsonRef::get`] does.
    pub fn fields<const N: usize>(&self, keys: [&str; N]) -> [Option<JsonRef<'a>>; N] {
        let mut found = [None; N];
        let mut missing = N;
        let mut members = RawMembers::of(*self);
        while missing > 0 {
            let Some((literal, escaped, value)) = members.next_member() else {
                break;
            };
            let mut literal = KeyLiteral::known(literal, escaped);
            for (slot, key) in found.iter_mut().zip(keys) {
                if slot.is_none() && literal.is(key) {
                    *slot = Some(value);
                    missing -= 1;
                }
            }
        }
        found
    }

    /// Whether an object's keys are exactly `keys` (any order).
    pub fn has_exact_keys(&self, keys: &[&str]) -> bool {
        let mut count = 0;
        for (key, _) in self.members() {
            if !keys.contains(&key.as_ref()) {
                return false;
            }
            count += 1;
        }
        count == keys.len()
    }

    /// Structural equality ignoring object key order (numbers compared as doubles,
    /// strings after unescaping), as a JavaScript deep-equal would.
    pub fn deep_equal(&self, other: &JsonRef<'_>) -> bool {
        if self.text == other.text {
            return true;
        }
        match (self.kind(), other.kind()) {
            (JsonKind::Number, JsonKind::Number) => self.as_f64() == other.as_f64(),
            (JsonKind::String, JsonKind::String) => self.as_str() == other.as_str(),
            (JsonKind::Array, JsonKind::Array) => {
                let mut a = self.elements();
                let mut b = other.elements();
                loop {
                    match (a.next(), b.next()) {
                        (None, None) => return true,
                        (Some(x), Some(y)) if x.deep_equal(&y) => {}
                        _ => return false,
                    }
                }
            }
            (JsonKind::Object, JsonKind::Object) => {
                let mut count = 0;
                for (key, value) in self.members() {
                    count += 1;
                    match other.get(&key) {
                        Some(theirs) if value.deep_equal(&theirs) => {}
                        _ => return false,
                    }
                }
                count == other.members().count()
            }
            (a, b) => a == b && self.text == other.text,
        }
    }
}

pub(super) fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(pos) {
        pos += 1;
    }
    pos
}

/// Bytes that matter when skipping a container: quotes and brackets. Everything else
/// (numbers, literals, commas, colons, whitespace) is passed over in one tight search.
const STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table
};

/// End of the value starting at `pos` (after whitespace), or `None` on malformed text.
pub(super) fn skip_value(bytes: &[u8], pos: usize) -> Option<usize> {
    let pos = skip_ws(bytes, pos);
    match bytes.get(pos)? {
        b'"' => skip_string(bytes, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = pos;
            loop {
                i = find_structural(bytes, i)?;
                match bytes.get(i)? {
                    b'"' => {
                        i = skip_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    _ => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                }
                i += 1;
            }
        }
        _ => {
            let rest = bytes.get(pos..)?;
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            (len > 0).then_some(pos + len)
        }
    }
}

pub(super) fn skip_string(bytes: &[u8], pos: usize) -> Option<usize> {
    scan_string(bytes, pos).map(|(end, _)| end)
}

/// [`skip_string`], and whether the string holds an escape: found on the way, at no cost.
#[inline(always)]
pub(super) fn scan_string(bytes: &[u8], pos: usize) -> Option<(usize, bool)> {
    let mut i = pos + 1;
    let mut escaped = false;
    loop {
        let rest = bytes.get(i..)?;
        // Keys and most values are short: a search of their first bytes a word at a time
        // beats setting up a vector search for each; long strings go to `memchr2`.
        let head = rest.get(..SHORT_STRING).unwrap_or(rest);
        let found = match find_quote_or_escape(head) {
            Some(at) => at,
            None if head.len() < rest.len() => {
                head.len() + memchr::memchr2(b'"', b'\\', rest.get(head.len()..)?)?
            }
            None => return None,
        };
        i += found;
        match bytes.get(i)? {
            b'"' => return Some((i + 1, escaped)),
            _ => {
                escaped = true;
                i += 2;
            }
        }
    }
}

/// Bytes the word-at-a-time searches below read at once.
const WORD: usize = 8;

/// A word with every byte 0x01.
const ONES: u64 = u64::from_le_bytes([1; WORD]);

/// A word with the high bit of every byte set.
const HIGHS: u64 = u64::from_le_bytes([0x80; WORD]);

/// The high bit of each byte of `word` that equals `byte`, and maybe of bytes after the
/// first such one (a borrow of the subtraction carries into them): the lowest bit set
/// always marks the first equal byte, which is all the searches use.
fn equal_bytes(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The first byte of `bytes[from..]` that is a quote or a bracket (its index in
/// `bytes`): what skipping a container looks for, eight bytes at a time. Setting bit 0x20
/// maps `[` and `]` onto `{` and `}` and no other byte onto either, so three comparisons
/// find all five.
fn find_structural(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut words = rest.chunks_exact(WORD);
    let mut at = from;
    for chunk in words.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let folded = word | (ONES * 0x20);
        let found = equal_bytes(folded, b'{') | equal_bytes(folded, b'}') | equal_bytes(word, b'"');
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += WORD;
    }
    let tail = words.remainder();
    tail.iter()
        .position(|b| STRUCTURAL[usize::from(*b)])
        .map(|p| at + p)
}

/// The first quote or backslash of `bytes`, eight bytes at a time.
pub(super) fn find_quote_or_escape(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(WORD);
    let mut at = 0;
    for chunk in words.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let found = equal_bytes(word, b'"') | equal_bytes(word, b'\\');
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += WORD;
    }
    words
        .remainder()
        .iter()
        .position(|b| *b == b'"' || *b == b'\\')
        .map(|p| at + p)
}

/// Bytes of a string searched a word at a time before [`skip_string`] switches to
/// `memchr2`.
const SHORT_STRING: usize = 64;

/// Whether the key literal `literal` (with its quotes) names `key`. A literal without
/// escapes is compared as it is, without decoding.
pub(super) fn key_is(literal: &str, key: &str) -> bool {
    KeyLiteral::new(literal).is(key)
}

/// A key literal (with its quotes) to compare with one key or several: its quotes are
/// stripped once, and whether it holds an escape is found once, when first needed.
pub(super) struct KeyLiteral<'a> {
    literal: &'a str,
    inner: &'a str,
    escaped: Option<bool>,
}

impl<'a> KeyLiteral<'a> {
    pub(super) fn new(literal: &'a str) -> Self {
        KeyLiteral {
            literal,
            inner: unquoted(literal),
            escaped: None,
        }
    }

    /// Whether the literal names `key` (see [`key_is`]). Inlined: it runs for every key
    /// of every member a field lookup walks, and a call costs as much as most comparisons.
    #[inline(always)]
    pub(super) fn is(&mut self, key: &str) -> bool {
        // An escape always decodes to fewer bytes than it is spelled with, so a literal as
        // long as the key names it only when it is the key's bytes without any escape; a
        // longer one only when it has escapes and decodes to the key.
        match self.inner.len().cmp(&key.len()) {
            std::cmp::Ordering::Equal => same_bytes(self.inner, key) && !self.escaped(),
            std::cmp::Ordering::Greater => self.escaped() && decode_string(self.literal) == key,
            std::cmp::Ordering::Less => false,
        }
    }

    /// A literal whose walk already found whether it holds an escape (an index records
    /// it for each key it keeps).
    pub(super) fn known(literal: &'a str, escaped: bool) -> Self {
        KeyLiteral {
            escaped: Some(escaped),
            ..KeyLiteral::new(literal)
        }
    }

    fn escaped(&mut self) -> bool {
        let inner = self.inner;
        *self.escaped.get_or_insert_with(|| has_escape(inner))
    }
}

/// Whether two texts are equal. Keys and type names are short: up to 16 bytes they are
/// compared as two overlapping words each, inline, where `==` calls `memcmp`, which costs
/// more than the comparison for every key of every member a lookup walks (and for the type
/// of every event a fold counts).
#[inline(always)]
pub fn same_bytes(a: &str, b: &str) -> bool {
    same_slices(a.as_bytes(), b.as_bytes())
}

/// [`same_bytes`] of byte strings.
#[inline(always)]
pub(super) fn same_slices(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(bytes) = s.get(at..at + 8) {
            w.copy_from_slice(bytes);
        }
        u64::from_le_bytes(w)
    };
    let half = |s: &[u8], at: usize| -> u32 {
        let mut w = [0u8; 4];
        if let Some(bytes) = s.get(at..at + 4) {
            w.copy_from_slice(bytes);
        }
        u32::from_le_bytes(w)
    };
    match len {
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        _ => a == b,
    }
}

/// Whether `text` holds a backslash: a plain loop for the short text of keys and small
/// values, `memchr` for long text.
fn has_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() <= SHORT_STRING {
        #[expect(
            clippy::manual_contains,
            reason = "`contains` on bytes calls memchr, whose set-up costs more than the loop on short text"
        )]
        bytes.iter().any(|b| *b == b'\\')
    } else {
        memchr::memchr(b'\\', bytes).is_some()
    }
}

/// Object members as (key literal with quotes, value): [`Members`] without decoding keys.
#[derive(Debug)]
pub(super) struct RawMembers<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl<'a> RawMembers<'a> {
    /// The members of `value`: none when it is no object.
    pub(super) fn of(value: JsonRef<'a>) -> Self {
        RawMembers {
            text: value.text,
            pos: if value.is_object() {
                1
            } else {
                value.text.len()
            },
        }
    }

    /// The next member as (key literal with quotes, whether the key holds an escape,
    /// value): the escape is found as the key is skipped, so a lookup comparing the key
    /// need not look for one again.
    fn next_member(&mut self) -> Option<(&'a str, bool, JsonRef<'a>)> {
        let bytes = self.text.as_bytes();
        let start = skip_ws(bytes, self.pos);
        let Some((key_end, value_start, escaped)) = member_head(bytes, start) else {
            self.pos = bytes.len();
            return None;
        };
        let value_end = skip_value(bytes, value_start)?;
        let after = skip_ws(bytes, value_end);
        self.pos = if bytes.get(after) == Some(&b',') {
            after + 1
        } else {
            bytes.len()
        };
        Some((
            self.text.get(start..key_end)?,
            escaped,
            JsonRef {
                text: self.text.get(value_start..value_end)?,
            },
        ))
    }
}

impl<'a> Iterator for RawMembers<'a> {
    type Item = (&'a str, JsonRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_member()
            .map(|(literal, _, value)| (literal, value))
    }
}

/// Iterator over object members; see [`JsonRef::members`].
#[derive(Debug)]
pub struct Members<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (Cow<'a, str>, JsonRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let mut raw = RawMembers {
            text: self.text,
            pos: self.pos,
        };
        let item = raw.next();
        self.pos = raw.pos;
        item.map(|(literal, value)| (decode_string(literal), value))
    }
}

/// The blocks of a message's `content` with some of their fields, as
/// [`JsonRef::element_fields`] finds them: read from the payload index the event was parsed
/// with when it holds them, else walked. See [`crate::Event::content_blocks`].
#[derive(Debug)]
pub struct Blocks<'a, 'k, const N: usize>(BlocksFrom<'a, 'k, N>);

#[derive(Debug)]
enum BlocksFrom<'a, 'k, const N: usize> {
    Indexed(IndexedBlocks<'a, 'k, N>),
    Walked(ElementFields<'a, 'k, N>),
}

impl<'a, 'k, const N: usize> Blocks<'a, 'k, N> {
    pub(crate) fn indexed(blocks: IndexedBlocks<'a, 'k, N>) -> Self {
        Blocks(BlocksFrom::Indexed(blocks))
    }

    pub(crate) fn walked(blocks: ElementFields<'a, 'k, N>) -> Self {
        Blocks(BlocksFrom::Walked(blocks))
    }
}

impl<'a, const N: usize> Iterator for Blocks<'a, '_, N> {
    type Item = (JsonRef<'a>, [Option<JsonRef<'a>>; N]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            BlocksFrom::Indexed(blocks) => blocks.next(),
            BlocksFrom::Walked(blocks) => blocks.next(),
        }
    }
}

/// The blocks of a message's `content`, each as the members of its element: read from the
/// payload index the event was parsed with when it holds them, else walked. A reader that
/// wants different members of different kinds of block matches each key once, instead of
/// looking up every key any kind may hold. See [`crate::Event::content_block_members`].
#[derive(Debug)]
pub struct BlockMembers<'a>(BlockMembersFrom<'a>);

#[derive(Debug)]
enum BlockMembersFrom<'a> {
    Indexed(IndexedBlocks<'a, 'static, 0>),
    Walked(Elements<'a>),
}

impl<'a> BlockMembers<'a> {
    pub(crate) fn indexed(blocks: IndexedBlocks<'a, 'static, 0>) -> Self {
        BlockMembers(BlockMembersFrom::Indexed(blocks))
    }

    pub(crate) fn walked(elements: Elements<'a>) -> Self {
        BlockMembers(BlockMembersFrom::Walked(elements))
    }
}

impl<'a> Iterator for BlockMembers<'a> {
    type Item = Block<'a>;

    fn next(&mut self) -> Option<Block<'a>> {
        match &mut self.0 {
            BlockMembersFrom::Indexed(blocks) => {
                let text = blocks.text();
                let (element, members) = blocks.next_members()?;
                Some(Block {
                    element: JsonRef { text: element },
                    from: BlockFrom::Indexed { text, members },
                })
            }
            BlockMembersFrom::Walked(elements) => {
                let element = elements.next()?;
                Some(Block {
                    element,
                    from: BlockFrom::Walked(RawMembers::of(element)),
                })
            }
        }
    }
}

/// One block of a [`BlockMembers`]: its element, and an iterator over its members as
/// (key, value) in text order (none for an element that is no object), as
/// [`JsonRef::members`] finds them: [`JsonRef::fields`] takes the first member of each key.
#[derive(Debug)]
pub struct Block<'a> {
    element: JsonRef<'a>,
    from: BlockFrom<'a>,
}

#[derive(Debug)]
enum BlockFrom<'a> {
    Indexed {
        text: &'a str,
        members: &'a [MemberSpan],
    },
    Walked(RawMembers<'a>),
}

impl<'a> Block<'a> {
    /// The block's element.
    pub fn element(&self) -> JsonRef<'a> {
        self.element
    }
}

impl<'a> Iterator for Block<'a> {
    type Item = (MemberKey<'a>, JsonRef<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (literal, escaped, value) = match &mut self.from {
            BlockFrom::Indexed { text, members } => {
                let (member, rest) = members.split_first()?;
                *members = rest;
                member_at(text, member)?
            }
            BlockFrom::Walked(raw) => raw.next_member()?,
        };
        Some((MemberKey { literal, escaped }, value))
    }
}

/// An object member's key as it is spelled, with whether it holds an escape.
#[derive(Debug, Clone, Copy)]
pub struct MemberKey<'a> {
    /// The literal, with its quotes.
    literal: &'a str,
    escaped: bool,
}

impl<'a> MemberKey<'a> {
    /// The key's text when it holds no escape: the literal between its quotes, which is then
    /// the key. `None` for a key with an escape (see [`MemberKey::text`]).
    #[inline]
    pub fn plain(&self) -> Option<&'a str> {
        (!self.escaped).then(|| unquoted(self.literal))
    }

    /// The key's text, decoded.
    pub fn text(&self) -> Cow<'a, str> {
        match self.plain() {
            Some(plain) => Cow::Borrowed(plain),
            None => decode_string(self.literal),
        }
    }
}

/// Iterator over array elements with some of their fields; see
/// [`JsonRef::element_fields`].
#[derive(Debug)]
pub struct ElementFields<'a, 'k, const N: usize> {
    elements: Elements<'a>,
    keys: [&'k str; N],
}

impl<'a, const N: usize> Iterator for ElementFields<'a, '_, N> {
    type Item = (JsonRef<'a>, [Option<JsonRef<'a>>; N]);

    fn next(&mut self) -> Option<Self::Item> {
        let text = self.elements.text;
        let bytes = text.as_bytes();
        let start = skip_ws(bytes, self.elements.pos);
        if bytes.get(start) != Some(&b'{') {
            let element = self.elements.next()?;
            return Some((element, element.fields(self.keys)));
        }
        let Some((end, found)) = object_fields(text, start, self.keys) else {
            // Anything but a plain object is read as `elements` and `fields` read it.
            let element = self.elements.next()?;
            return Some((element, element.fields(self.keys)));
        };
        let after = skip_ws(bytes, end);
        self.elements.pos = if bytes.get(after) == Some(&b',') {
            after + 1
        } else {
            bytes.len()
        };
        Some((
            JsonRef {
                text: text.get(start..end)?,
            },
            found,
        ))
    }
}

/// The end of the object at `text[start]` and the values of `keys` in it, from one walk
/// over its members, when the object is plain: every member a string key, a colon and a
/// value, separated by commas, closed by `}`, and no scalar value holding a quote or an
/// opening bracket. `None` for anything else, which skipping (and then `fields`) may read
/// otherwise. For a plain object the end is where skipping it ends, and the values are
/// those `fields` finds in it.
fn object_fields<'a, const N: usize>(
    text: &'a str,
    start: usize,
    keys: [&str; N],
) -> Option<(usize, [Option<JsonRef<'a>>; N])> {
    let bytes = text.as_bytes();
    let mut found = [None; N];
    let mut pos = skip_ws(bytes, start + 1);
    if bytes.get(pos) == Some(&b'}') {
        return Some((pos + 1, found));
    }
    loop {
        let (key_end, value_start, escaped) = member_head(bytes, pos)?;
        let value_end = skip_value(bytes, value_start)?;
        let value = text.get(value_start..value_end)?;
        if !matches!(bytes.get(value_start), Some(b'"' | b'{' | b'['))
            && value.bytes().any(|b| matches!(b, b'"' | b'{' | b'['))
        {
            return None;
        }
        let literal = KeyLiteral::known(text.get(pos..key_end)?, escaped);
        fill_named(&mut found, keys, literal, || Some(JsonRef { text: value }));
        match after_member(bytes, value_end)? {
            AfterMember::Next(next) => pos = next,
            AfterMember::End(end) => return Some((end, found)),
        }
    }
}

/// Puts `value()` in the slot of each of `keys` that the key literal `literal` names and
/// that is still empty (the first occurrence of a key wins); returns how many it filled.
/// Inlined: it runs for every member a field lookup walks.
#[inline(always)]
pub(super) fn fill_named<'a, const N: usize>(
    found: &mut [Option<JsonRef<'a>>; N],
    keys: [&str; N],
    mut literal: KeyLiteral<'_>,
    value: impl Fn() -> Option<JsonRef<'a>>,
) -> usize {
    let mut filled = 0;
    for (slot, key) in found.iter_mut().zip(keys) {
        if slot.is_none() && literal.is(key) {
            *slot = value();
            filled += usize::from(slot.is_some());
        }
    }
    filled
}

/// The key of the object member at `pos` (a string literal, which must be there) and where
/// its value starts, after the colon and any whitespace, and whether the key holds an
/// escape.
#[inline(always)]
pub(super) fn member_head(bytes: &[u8], pos: usize) -> Option<(usize, usize, bool)> {
    if bytes.get(pos) != Some(&b'"') {
        return None;
    }
    let (key_end, escaped) = scan_string(bytes, pos)?;
    let colon = skip_ws(bytes, key_end);
    if bytes.get(colon) != Some(&b':') {
        return None;
    }
    Some((key_end, skip_ws(bytes, colon + 1), escaped))
}

/// What follows an object member's value.
pub(super) enum AfterMember {
    /// A comma: the next member starts here.
    Next(usize),
    /// The closing brace: the object ends just before this.
    End(usize),
}

/// What follows the member value that ends at `value_end`: another member or the object's
/// end; `None` for anything else.
pub(super) fn after_member(bytes: &[u8], value_end: usize) -> Option<AfterMember> {
    let after = skip_ws(bytes, value_end);
    match bytes.get(after) {
        Some(b',') => Some(AfterMember::Next(skip_ws(bytes, after + 1))),
        Some(b'}') => Some(AfterMember::End(after + 1)),
        _ => None,
    }
}

/// Iterator over array elements; see [`JsonRef::elements`].
#[derive(Debug)]
pub struct Elements<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = JsonRef<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        let start = skip_ws(bytes, self.pos);
        if matches!(bytes.get(start), None | Some(b']')) {
            self.pos = bytes.len();
            return None;
        }
        let end = skip_value(bytes, start)?;
        let after = skip_ws(bytes, end);
        self.pos = if bytes.get(after) == Some(&b',') {
            after + 1
        } else {
            bytes.len()
        };
        Some(JsonRef {
            text: self.text.get(start..end)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [`skip_value`] as it was written first, a byte at a time: the reference the
    /// word-at-a-time searches must agree with.
    fn skip_value_bytewise(bytes: &[u8], pos: usize) -> Option<usize> {
        let pos = skip_ws(bytes, pos);
        match bytes.get(pos)? {
            b'"' => skip_string_bytewise(bytes, pos),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut i = pos;
                loop {
                    i += bytes
                        .get(i..)?
                        .iter()
                        .position(|b| STRUCTURAL[usize::from(*b)])?;
                    match bytes.get(i)? {
                        b'"' => {
                            i = skip_string_bytewise(bytes, i)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        _ => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                return Some(i + 1);
                            }
                        }
                    }
                    i += 1;
                }
            }
            _ => skip_value(bytes, pos),
        }
    }

    fn skip_string_bytewise(bytes: &[u8], pos: usize) -> Option<usize> {
        let mut i = pos + 1;
        loop {
            i += bytes
                .get(i..)?
                .iter()
                .position(|b| *b == b'"' || *b == b'\\')?;
            match bytes.get(i)? {
                b'"' => return Some(i + 1),
                _ => i += 2,
            }
        }
    }

    /// Bytes that are mostly JSON punctuation, quotes, escapes and the bytes the searches'
    /// bit tricks could mistake for them (0x02, 0x5B, 0x5D, 0x7B, 0x7D and their
    /// neighbours, high bytes).
    fn jsonish() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => prop::sample::select(b"{}[]\"\\:,ab 0".to_vec()),
            1 => prop::sample::select(vec![0x00u8, 0x01, 0x02, 0x03, 0x21, 0x23, 0x5A, 0x5C, 0x5E, 0x7A, 0x7C, 0x7E, 0x80, 0xA2, 0xDB, 0xFB, 0xFF]),
            1 => any::<u8>(),
        ];
        prop::collection::vec(byte, 0..200)
    }

    /// What a number literal's check says, as it was first written: the literal converted
    /// to a double, refused when that is not finite or is negative zero.
    fn number_verdict_by_conversion(literal: &str) -> Option<JsonErrorKind> {
        let value: f64 = literal.parse().unwrap_or(f64::NAN);
        if !value.is_finite() {
            Some(JsonErrorKind::NonFiniteNumber(literal.to_owned()))
        } else if value == 0.0 && value.is_sign_negative() {
            Some(JsonErrorKind::NegativeZero(literal.to_owned()))
        } else {
            None
        }
    }

    /// Number literals of every shape, with integer parts near the 308 digits a double
    /// holds finitely.
    fn number_literal() -> impl Strategy<Value = String> {
        let digits = || prop::collection::vec(prop::sample::select(b"0123456789".to_vec()), 1..8);
        let integer_rest = prop_oneof![
            digits(),
            prop::collection::vec(prop::sample::select(b"09".to_vec()), 300..312),
        ];
        (
            any::<bool>(),
            prop_oneof![
                Just(None),
                Just(Some(b'0')),
                prop::sample::select(b"123456789".to_vec()).prop_map(Some)
            ],
            integer_rest,
            prop::option::of(digits()),
            prop::option::of((prop::sample::select(vec!["e", "E", "e+", "e-"]), digits())),
        )
            .prop_map(|(negative, lead, rest, fraction, exponent)| {
                let mut s = String::new();
                if negative {
                    s.push('-');
                }
                match lead {
                    // A lone zero: a leading zero takes no more digits.
                    None | Some(b'0') => s.push('0'),
                    Some(d) => {
                        s.push(char::from(d));
                        s.extend(rest.iter().map(|&b| char::from(b)));
                    }
                }
                if let Some(f) = fraction {
                    s.push('.');
                    s.extend(f.iter().map(|&b| char::from(b)));
                }
                if let Some((e, d)) = exponent {
                    s.push_str(e);
                    s.extend(d.iter().take(4).map(|&b| char::from(b)));
                }
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// A number is refused (not finite, negative zero) exactly when converting it to a
        /// double says so, whether or not its check converts it.
        #[test]
        fn a_number_is_refused_exactly_when_its_double_is(literal in number_literal()) {
            let expected = number_verdict_by_conversion(&literal);
            match (validate_str(&literal), expected) {
                (Ok(()), None) => {}
                (Err(e), Some(kind)) => prop_assert_eq!(e.kind, kind, "{}", literal),
                (got, want) => prop_assert!(false, "{}: got {:?}, want {:?}", literal, got, want),
            }
        }


        /// Texts of the same length compare as `==` compares them, at every length the
        /// word comparison splits on (equal texts, texts differing in one byte).
        #[test]
        fn same_bytes_is_equality(
            text in prop::collection::vec(prop::sample::select(b"ab\\\"y".to_vec()), 0..24),
            flip in any::<prop::sample::Index>(),
        ) {
            let a = String::from_utf8(text).expect("ASCII");
            prop_assert!(same_bytes(&a, &a));
            if !a.is_empty() {
                let at = flip.index(a.len());
                let mut b = a.clone().into_bytes();
                b[at] = if b[at] == b'a' { b'b' } else { b'a' };
                let b = String::from_utf8(b).expect("ASCII");
                prop_assert_eq!(same_bytes(&a, &b), a == b);
                prop_assert!(!same_bytes(&a, &b));
            }
            let longer = format!("{a}a");
            prop_assert!(!same_bytes(&a, &longer));
        }

        /// A key literal names a key exactly when its decoded text is the key, whether it
        /// finds its escapes itself or is told of them by the walk that found it.
        #[test]
        fn a_key_literal_names_the_key_it_decodes_to(
            key in prop::sample::select(vec!["type", "text", "id", "toolCallId", "content", "a", ""]),
            literal in prop::sample::select(vec![
                "\"type\"", "\"t\\u0079pe\"", "\"text\"", "\"tex\"", "\"id\"", "\"i\\u0064\"",
                "\"toolCallId\"", "\"toolCallI\\u0064\"", "\"content\"", "\"a\"", "\"\\u0061\"", "\"\"",
                "\"\\\"\"",
            ]),
        ) {
            let names = decode_string(literal) == key;
            prop_assert_eq!(KeyLiteral::new(literal).is(key), names);
            let escaped = literal.contains('\\');
            prop_assert_eq!(KeyLiteral::known(literal, escaped).is(key), names);
        }

        #[test]
        fn skipping_a_word_at_a_time_ends_where_skipping_bytewise_does(
            body in jsonish(),
            open in prop::sample::select(vec![b'{', b'[', b'"']),
            from in 0usize..4,
        ) {
            let mut text = vec![open];
            text.extend_from_slice(&body);
            for pos in 0..from.min(text.len()) + 1 {
                prop_assert_eq!(skip_value(&text, pos), skip_value_bytewise(&text, pos));
                if text.get(pos) == Some(&b'"') {
                    prop_assert_eq!(skip_string(&text, pos), skip_string_bytewise(&text, pos));
                    // The escape it reports is a backslash inside the string it skipped.
                    let scanned = scan_string(&text, pos).map(|(end, escaped)| {
                        (end, escaped, text.get(pos..end).is_some_and(|s| s.contains(&b'\\')))
                    });
                    if let Some((_, escaped, backslash)) = scanned {
                        prop_assert_eq!(escaped, backslash);
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn a_value_is_trimmed_of_json_whitespace_only(
            text in "[ \t\n\r\u{a0}\u{2028}a\"{}é]{0,12}",
        ) {
            let trimmed = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
            prop_assert_eq!(JsonRef::new(&text).raw(), trimmed);
        }
    }

    /// An element of an array: objects of keys the readers look up, with values of every
    /// kind, and text that only looks like one (a missing colon, a scalar holding a quote or
    /// a bracket, an unclosed object, separators out of place).
    fn element() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "\"type\"",
            "\"text\"",
            "\"id\"",
            "\"t\\u0065xt\"",
            "\"x\"",
        ]);
        let value = prop::sample::select(vec![
            "1",
            "\"a\"",
            "{\"type\":[1]}",
            "[1,{}]",
            "tr\"ue",
            "1[2",
            "{",
            "\"}\"",
            "null",
            "",
        ]);
        let member = (key, prop::sample::select(vec![":", " : ", "", "::"]), value)
            .prop_map(|(k, c, v)| format!("{k}{c}{v}"));
        prop_oneof![
            4 => (prop::collection::vec(member, 0..4), prop::sample::select(vec![",", " , ", ",,"]), prop::sample::select(vec!["}", " }", "", "]"]))
                .prop_map(|(members, sep, close)| format!("{{{}{close}", members.join(sep))),
            1 => prop::sample::select(vec!["1", "\"s\"", "[]", "[{}]", "", "}"]).prop_map(str::to_owned),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn element_fields_read_what_elements_then_fields_read(
            elements in prop::collection::vec(element(), 0..4),
            separator in prop::sample::select(vec![",", " , ", ""]),
        ) {
            let text = format!("[{}]", elements.join(separator));
            let array = JsonRef::new(&text);
            let keys = ["type", "text", "id"];
            let combined: Vec<_> = array.element_fields(keys).collect();
            let separate: Vec<_> = array.elements().map(|e| (e, e.fields(keys))).collect();
            prop_assert_eq!(combined, separate, "{}", text);
        }

        /// On valid JSON, the text from the first element's member onward begins with the
        /// value `fields` finds there, and is found whenever that value is.
        #[test]
        fn the_first_elements_member_starts_where_fields_finds_it(
            members in prop::collection::vec(
                (
                    prop::sample::select(vec!["\"type\"", "\"text\"", "\"t\\u0065xt\"", "\"texts\"", "\"x\""]),
                    prop::sample::select(vec!["1", "\"a\"", "\"a \\\" b\"", "{\"text\":\"in\"}", "[1,{\"text\":2}]", "null", "\"\""]),
                    prop::sample::select(vec![":", " : "]),
                ),
                0..4,
            ),
            separator in prop::sample::select(vec![",", " , "]),
            space in prop::sample::select(vec!["", " ", "\n "]),
            first in prop::sample::select(vec!["object", "scalar", "array"]),
            rest in prop::sample::select(vec!["", ",{\"text\":\"later\"}", ", 1"]),
        ) {
            let object = members
                .iter()
                .map(|(k, v, c)| format!("{k}{c}{v}"))
                .collect::<Vec<_>>()
                .join(separator);
            let element = match first {
                "object" => format!("{{{space}{object}{space}}}"),
                "scalar" => "\"text\"".to_owned(),
                _ => format!("[{{{object}}}]"),
            };
            let text = format!("[{space}{element}{rest}]");
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{}", text);
            let array = JsonRef::new(&text);
            let found = array
                .elements()
                .next()
                .filter(|e| e.is_object())
                .and_then(|e| e.get("text"));
            let onward = array.first_element_value_onward("text");
            prop_assert_eq!(onward.is_some(), found.is_some(), "{}", text);
            if let (Some(onward), Some(found)) = (onward, found) {
                prop_assert!(onward.starts_with(found.raw()), "{} from {}", text, onward);
                prop_assert!(text.ends_with(onward), "{}", text);
            }
        }
    }

    #[test]
    fn has_elements_says_what_reading_the_first_element_says() {
        let long = format!(r#"[{{"type":"text","text":"{}"}}]"#, "w ".repeat(500));
        for text in [
            "[]",
            "[ ]",
            "[\n\t ]",
            "[0]",
            "[ {} ]",
            "[[]]",
            "[\"\"]",
            "[null]",
            " []",
            "{}",
            "{\"a\":[1]}",
            "\"[1]\"",
            "\"\"",
            "1",
            "null",
            long.as_str(),
        ] {
            let value = JsonRef::new(text);
            assert_eq!(
                value.has_elements(),
                value.elements().next().is_some(),
                "{text}"
            );
        }
    }

    #[test]
    fn long_values_end_where_skipping_bytewise_does() {
        let long = format!(
            r#"{{"a":[{{"b":"{}\"x"}}, [1, 2, {{"c": "]"}}]], "d": "{}"}}"#,
            "q".repeat(100),
            "\\\"".repeat(40)
        );
        let bytes = long.as_bytes();
        assert_eq!(skip_value(bytes, 0), Some(bytes.len()));
        for pos in 0..bytes.len() {
            assert_eq!(
                skip_value(bytes, pos),
                skip_value_bytewise(bytes, pos),
                "at {pos}"
            );
        }
    }
}
