//! The payload index: the members of an event's payload, and of its `message` object,
//! found in the one walk that parses the envelope, so the rules read payload fields
//! without walking the payload again. Lookups through the index answer exactly what
//! [`JsonRef::fields`] answers on the text (first occurrence of a key wins).

use std::cell::RefCell;

use super::{
    after_member, fill_named, key_is, member_head, same_slices, skip_string, skip_value, skip_ws,
    AfterMember, JsonRef, KeyLiteral, RawMembers,
};

/// One member of an object indexed by [`index_payload`]: byte ranges of its key literal
/// (with quotes) and of its value in the indexed text, and whether it belongs to the
/// payload itself (depth 0), to its `message` object (depth 1), or to a block of the
/// `content` array of either ([`block_depth`]: 2 or 3). Each block is announced by a
/// marker at its depth, with an empty key span and the block's whole span as its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemberSpan {
    pub(crate) depth: u8,
    /// Whether the key holds an escape, found as the key was walked: a lookup then need
    /// not look again for every member it compares.
    pub(crate) escaped: bool,
    pub(crate) key: (u32, u32),
    pub(crate) value: (u32, u32),
}

/// The members of the object at `text[start..]` and, when it has an object member
/// `message`, that object's members too, and the blocks of the first `content` array of
/// either, found in one pass (the message is walked once, not skipped and then walked
/// again). Returns the end of the value and the members in
/// text order, or `None` when the value is not an object, is malformed, or its offsets do
/// not fit in `u32`; callers then navigate with [`JsonRef`], which gives the same answers.
pub(crate) fn index_payload(text: &str, start: usize) -> Option<(usize, MemberIndex)> {
    u32::try_from(text.len()).ok()?;
    with_scratch(|members| {
        let end = index_object(text, start, 0, members)?;
        Some((end, MemberIndex::from_slice(members)))
    })
}

/// Runs `f` with this thread's scratch list of members, emptied. The members of an index
/// are gathered there and then copied out at their exact size: the index lives as long as
/// its event (a whole session keeps every event in memory), and a list grown for it would
/// cost an allocation, its growth and a shrink for every event.
pub(super) fn with_scratch<R>(f: impl FnOnce(&mut Vec<MemberSpan>) -> R) -> R {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut members) => {
            members.clear();
            f(&mut members)
        }
        Err(_) => f(&mut Vec::new()),
    })
}

/// Members an index holds in place, without an allocation of its own: a structural
/// event's payload (`turn`, `step` and one more, as a chunk has) fits, and in place it
/// costs less room than the allocation it saves.
const IN_PLACE: usize = 3;

/// The members of an indexed payload: in place when they are few, else in an allocation
/// of their exact size. Compares and prints as the list of members it holds.
#[derive(Clone)]
pub(crate) enum MemberIndex {
    InPlace(u8, [MemberSpan; IN_PLACE]),
    Allocated(Box<[MemberSpan]>),
}

impl MemberIndex {
    pub(super) fn from_slice(members: &[MemberSpan]) -> MemberIndex {
        match members.len() {
            len if len <= IN_PLACE => {
                let mut in_place = [NO_MEMBER; IN_PLACE];
                for (slot, member) in in_place.iter_mut().zip(members) {
                    *slot = *member;
                }
                MemberIndex::InPlace(len as u8, in_place)
            }
            _ => MemberIndex::Allocated(Box::from(members)),
        }
    }

    /// The members, in text order.
    pub(crate) fn as_slice(&self) -> &[MemberSpan] {
        match self {
            MemberIndex::InPlace(len, members) => members.get(..usize::from(*len)).unwrap_or(&[]),
            MemberIndex::Allocated(members) => members,
        }
    }
}

/// What the unused places of an index hold.
const NO_MEMBER: MemberSpan = MemberSpan {
    depth: 0,
    escaped: false,
    key: (0, 0),
    value: (0, 0),
};

impl PartialEq for MemberIndex {
    fn eq(&self, other: &MemberIndex) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for MemberIndex {}

impl std::fmt::Debug for MemberIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

thread_local! {
    /// The list [`index_payload`] gathers members in, reused from event to event.
    static SCRATCH: RefCell<Vec<MemberSpan>> = const { RefCell::new(Vec::new()) };
}

/// Depth of the block entries of a `content` array found among the members of `depth`.
pub(crate) const fn block_depth(depth: u8) -> u8 {
    depth + 2
}

/// Whether an entry is a block marker: an empty key span, which no member has.
fn is_marker(member: &MemberSpan) -> bool {
    member.key.0 == member.key.1
}

/// Byte offsets as an index holds them (the text's length fits in `u32`, checked by
/// [`index_payload`]).
fn span(a: usize, b: usize) -> Option<(u32, u32)> {
    Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?))
}

/// Indexes the members of the object at `text[start..]` at `depth`. Below the payload
/// (depth 0) the first `message` object is indexed at depth 1, and in either of those two
/// objects the first `content` array is indexed as blocks ([`index_blocks`]), whose
/// entries come just before the `content` member itself; the members of blocks (deeper)
/// are indexed without descending further.
fn index_object(text: &str, start: usize, depth: u8, out: &mut Vec<MemberSpan>) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, start);
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    pos = skip_ws(bytes, pos + 1);
    if bytes.get(pos) == Some(&b'}') {
        return Some(pos + 1);
    }
    // Only the first `message` and `content` are indexed, as `get` finds the first.
    let mut message_seen = depth > 0;
    let mut content_seen = depth > 1;
    loop {
        let (key_end, value_start, escaped) = member_head(bytes, pos)?;
        let mut message = false;
        let mut content = false;
        if !(message_seen && content_seen) {
            let mut key = KeyLiteral::known(text.get(pos..key_end)?, escaped);
            message = !message_seen && key.is("message");
            content = !content_seen && !message && key.is("content");
            message_seen |= message;
            content_seen |= content;
        }
        let value_end = match bytes.get(value_start) {
            Some(b'{') if message => index_object(text, value_start, 1, out)?,
            Some(b'[') if content => index_blocks(text, value_start, block_depth(depth), out)?,
            _ => skip_value(bytes, value_start)?,
        };
        out.push(MemberSpan {
            depth,
            escaped,
            key: span(pos, key_end)?,
            value: span(value_start, value_end)?,
        });
        match after_member(bytes, value_end)? {
            AfterMember::Next(next) => pos = next,
            AfterMember::End(end) => return Some(end),
        }
    }
}

/// Indexes the elements of the array at `text[start]` (a `content`) at `depth`: for each
/// element a marker (an empty key span and the element's span), then the element's
/// members when it is an object. Returns the end of the array.
fn index_blocks(text: &str, start: usize, depth: u8, out: &mut Vec<MemberSpan>) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, start + 1);
    if bytes.get(pos) == Some(&b']') {
        return Some(pos + 1);
    }
    loop {
        let marker = out.len();
        out.push(MemberSpan {
            depth,
            escaped: false,
            key: (0, 0),
            value: (0, 0),
        });
        // A block's members are its own entries: nothing below them is indexed.
        let end = match bytes.get(pos) {
            Some(b'{') => index_object(text, pos, depth, out)?,
            _ => skip_value(bytes, pos)?,
        };
        if let Some(m) = out.get_mut(marker) {
            m.value = span(pos, end)?;
        }
        let after = skip_ws(bytes, end);
        match bytes.get(after)? {
            b',' => pos = skip_ws(bytes, after + 1),
            b']' => return Some(after + 1),
            _ => return None,
        }
    }
}

/// The blocks of the array `content`, the value of the first `content` member among the
/// indexed members of `depth` (0 for the payload's, 1 for its message's): the entries
/// [`index_blocks`] made for it, which [`IndexedBlocks`] reads. `None` when the index
/// holds no blocks for that very text (not an equal copy elsewhere); the caller then walks
/// `content`.
pub(crate) fn indexed_blocks<'a, 'k, const N: usize>(
    text: &'a str,
    members: &'a [MemberSpan],
    depth: u8,
    content: JsonRef<'a>,
    keys: [&'k str; N],
) -> Option<IndexedBlocks<'a, 'k, N>> {
    // The member is found by where its value lies in the text: no key is compared.
    let start = (content.text.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = start.checked_add(content.text.len())?;
    if end > text.len() || !content.text.starts_with('[') {
        return None;
    }
    let value = span(start, end)?;
    let at = members
        .iter()
        .position(|m| m.depth == depth && !is_marker(m) && m.value == value)?;
    // Block entries are made for the first `content` array only, just before its member:
    // a run of them before this member says it is that array. A member with no run is
    // another one, or an empty array.
    let inner = block_depth(depth);
    let run = members
        .get(..at)?
        .iter()
        .rev()
        .take_while(|m| m.depth == inner)
        .count();
    if run == 0 && skip_ws(content.text.as_bytes(), 1) + 1 != content.text.len() {
        return None;
    }
    Some(IndexedBlocks {
        text,
        members: members.get(at - run..at)?,
        keys,
    })
}

/// The blocks of an indexed `content` array, each element with the values of `keys` in
/// it (first occurrence wins; none for an element that is no object), as
/// [`JsonRef::element_fields`] finds them on the text.
#[derive(Debug)]
pub(crate) struct IndexedBlocks<'a, 'k, const N: usize> {
    text: &'a str,
    /// Markers, each followed by its element's members.
    members: &'a [MemberSpan],
    keys: [&'k str; N],
}

impl<'a, const N: usize> Iterator for IndexedBlocks<'a, '_, N> {
    type Item = (JsonRef<'a>, [Option<JsonRef<'a>>; N]);

    fn next(&mut self) -> Option<Self::Item> {
        let (element, fields) = self.next_members()?;
        let element = JsonRef { text: element };
        let slice = |(a, b): (u32, u32)| self.text.get(a as usize..b as usize);
        let mut found = [None; N];
        for member in fields {
            let Some(literal) = slice(member.key) else {
                continue;
            };
            let literal = KeyLiteral::known(literal, member.escaped);
            fill_named(&mut found, self.keys, literal, || {
                slice(member.value).map(|text| JsonRef { text })
            });
        }
        Some((element, found))
    }
}

impl<'a, 'k, const N: usize> IndexedBlocks<'a, 'k, N> {
    /// The next block: its element's text and its members' entries, in text order.
    pub(crate) fn next_members(&mut self) -> Option<(&'a str, &'a [MemberSpan])> {
        let (marker, rest) = self.members.split_first()?;
        let count = rest.iter().take_while(|m| !is_marker(m)).count();
        let (fields, rest) = rest.split_at(count);
        self.members = rest;
        let element = self
            .text
            .get(marker.value.0 as usize..marker.value.1 as usize)?;
        Some((element, fields))
    }

    /// The text the entries' offsets point into.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }
}

/// One indexed member as (key literal with quotes, whether it holds an escape, value).
pub(crate) fn member_at<'a>(
    text: &'a str,
    member: &MemberSpan,
) -> Option<(&'a str, bool, JsonRef<'a>)> {
    let slice = |(a, b): (u32, u32)| text.get(a as usize..b as usize);
    Some((
        slice(member.key)?,
        member.escaped,
        JsonRef {
            text: slice(member.value)?,
        },
    ))
}

/// Walks the members of the object `text` (key literal with quotes, value), like
/// [`JsonRef::members`], except that the value of the first member named `indexed` is
/// walked by [`index_payload`] instead of skipped: returns that value's member index
/// (offsets into `text`), or `None` when it is absent or not an indexable object. Stops at
/// malformed text, as [`JsonRef::members`] does.
#[cfg(test)]
pub(super) fn members_indexing<'a>(
    text: &'a str,
    indexed: &str,
    visit: impl FnMut(&'a str, JsonRef<'a>),
) -> Option<MemberIndex> {
    members_indexing_from(text, first_member(text), indexed, None, visit)
}

/// Where the members of the object `text` start: after its `{`; the end of a text that
/// is no object.
fn first_member(text: &str) -> usize {
    if text.as_bytes().first() == Some(&b'{') {
        1
    } else {
        text.len()
    }
}

/// [`members_indexing`] for an event envelope, with a shortcut for the layout every
/// writer of this crate and DSH's own use: `{"type":"…","seq":N,"time":N,"data":…`. Those
/// three members are read at fixed places (no search for the end of each), then the walk
/// goes on from `data` as [`members_indexing`] would; any other layout takes the general
/// walk from the start. Either way `visit` sees the same members with the same values.
///
/// An envelope whose data was already walked by [`super::validate_and_index_data`] comes
/// with it as `known`: the first `data` member whose value starts where `known` says is not
/// walked again; its end and index are `known`'s.
pub(crate) fn envelope_members_indexing<'a>(
    text: &'a str,
    known: Option<super::IndexedData>,
    mut visit: impl FnMut(&'a str, JsonRef<'a>),
) -> Option<MemberIndex> {
    match canonical_envelope_prefix(text) {
        Some((prefix, data_key)) => {
            for (key, value) in prefix {
                visit(key, value);
            }
            members_indexing_from(text, data_key, "data", known, visit)
        }
        None => members_indexing_from(text, first_member(text), "data", known, visit),
    }
}

/// The `type`, `seq` and `time` members of an envelope written as
/// `{"type":"<no escapes>","seq":<digits>,"time":<-?digits>,"data":`, and where the `data`
/// key starts; `None` for any other layout.
#[allow(clippy::type_complexity)]
pub(crate) fn canonical_envelope_prefix(text: &str) -> Option<([(&str, JsonRef<'_>); 3], usize)> {
    const TYPE: &[u8] = b"{\"type\":\"";
    const SEQ: &[u8] = b",\"seq\":";
    const TIME: &[u8] = b",\"time\":";
    const DATA: &[u8] = b",\"data\":";
    let bytes = text.as_bytes();
    let digits_end = |from: usize| {
        let mut at = from;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        at
    };
    if !bytes.starts_with(TYPE) {
        return None;
    }
    let type_start = TYPE.len() - 1;
    let type_end = TYPE.len() + super::find_quote_or_escape(bytes.get(TYPE.len()..)?)?;
    if bytes.get(type_end) != Some(&b'"') || !bytes.get(type_end + 1..)?.starts_with(SEQ) {
        return None;
    }
    let seq_start = type_end + 1 + SEQ.len();
    let seq_end = digits_end(seq_start);
    if seq_end == seq_start || !bytes.get(seq_end..)?.starts_with(TIME) {
        return None;
    }
    let time_start = seq_end + TIME.len();
    let sign = usize::from(bytes.get(time_start) == Some(&b'-'));
    let time_end = digits_end(time_start + sign);
    if time_end == time_start + sign || !bytes.get(time_end..)?.starts_with(DATA) {
        return None;
    }
    // Every position above is at an ASCII byte, so each is a character boundary.
    let value = |a: usize, b: usize| text.get(a..b).map(|text| JsonRef { text });
    Some((
        [
            (text.get(1..7)?, value(type_start, type_end + 1)?),
            (
                text.get(type_end + 2..type_end + 7)?,
                value(seq_start, seq_end)?,
            ),
            (
                text.get(seq_end + 1..seq_end + 7)?,
                value(time_start, time_end)?,
            ),
        ],
        time_end + 1,
    ))
}

/// [`members_indexing`] from byte `start` of the object `text` (just after its `{` or a
/// member's `,`).
fn members_indexing_from<'a>(
    text: &'a str,
    start: usize,
    indexed: &str,
    mut known: Option<super::IndexedData>,
    mut visit: impl FnMut(&'a str, JsonRef<'a>),
) -> Option<MemberIndex> {
    let bytes = text.as_bytes();
    let mut index = None;
    let mut indexed_seen = false;
    let mut members = RawMembers { text, pos: start };
    loop {
        let start = skip_ws(bytes, members.pos);
        if bytes.get(start) != Some(&b'"') {
            return index;
        }
        let key_end = skip_string(bytes, start)?;
        let literal = text.get(start..key_end)?;
        if indexed_seen || !key_is(literal, indexed) {
            let (literal, value) = members.next()?;
            visit(literal, value);
            continue;
        }
        indexed_seen = true;
        let colon = skip_ws(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return index;
        }
        let value_start = skip_ws(bytes, colon + 1);
        let walked = known.take().filter(|k| k.value.start == value_start);
        let value_end = match walked {
            Some(walked) => {
                index = walked.index;
                walked.value.end
            }
            None => match index_payload(text, value_start) {
                Some((end, spans)) => {
                    index = Some(spans);
                    end
                }
                None => skip_value(bytes, value_start)?,
            },
        };
        visit(
            literal,
            JsonRef {
                text: text.get(value_start..value_end)?,
            },
        );
        let after = skip_ws(bytes, value_end);
        members.pos = if bytes.get(after) == Some(&b',') {
            after + 1
        } else {
            bytes.len()
        };
    }
}

/// The values of `keys` among the indexed members of one `depth`, with the semantics of
/// [`JsonRef::fields`] (first occurrence wins).
pub(crate) fn indexed_fields<'a, const N: usize>(
    text: &'a str,
    members: &[MemberSpan],
    depth: u8,
    keys: [&str; N],
) -> [Option<JsonRef<'a>>; N] {
    let mut found = [None; N];
    let mut missing = N;
    let slice = |(a, b): (u32, u32)| text.get(a as usize..b as usize);
    let bytes = text.as_bytes();
    for member in members.iter().filter(|m| m.depth == depth) {
        if missing == 0 {
            break;
        }
        // A key without escapes names a key exactly when its bytes between the quotes are
        // the key's: compared as bytes, with no text made of the literal.
        let (start, end) = (member.key.0 as usize, member.key.1 as usize);
        let plain = (!member.escaped)
            .then(|| bytes.get(start..end))
            .flatten()
            .and_then(|literal| literal.strip_prefix(b"\""))
            .and_then(|literal| literal.strip_suffix(b"\""));
        if let Some(inner) = plain {
            for (slot, key) in found.iter_mut().zip(keys) {
                if slot.is_none() && same_slices(inner, key.as_bytes()) {
                    *slot = slice(member.value).map(|text| JsonRef { text });
                    missing -= usize::from(slot.is_some());
                }
            }
            continue;
        }
        let Some(literal) = slice(member.key) else {
            continue;
        };
        let literal = KeyLiteral::known(literal, member.escaped);
        missing -= fill_named(&mut found, keys, literal, || {
            slice(member.value).map(|text| JsonRef { text })
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The members `walk` visits, as (key literal, value) texts, and the index it returns.
    fn visited(
        walk: impl FnOnce(&mut dyn FnMut(&str, JsonRef<'_>)) -> Option<MemberIndex>,
    ) -> (Vec<(String, String)>, Option<Vec<MemberSpan>>) {
        let mut seen = Vec::new();
        let index = walk(&mut |key, value| seen.push((key.to_owned(), value.raw().to_owned())));
        (seen, index.map(|i| i.as_slice().to_vec()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The shortcut for the writers' layout visits what the general walk visits, on
        /// envelopes at and around that layout (escaped types, numbers without digits, signs,
        /// leading zeros, other keys, a missing or moved `data`).
        #[test]
        fn the_envelope_shortcut_visits_what_the_general_walk_visits(
            type_text in prop::sample::select(vec!["x/y", "a\\/b", "", "q\\\"", "tool/result"]),
            seq in prop::sample::select(vec!["7", "", "007", "-1", "12345678901234567890", "1.5"]),
            time in prop::sample::select(vec!["12", "-3", "-", "", "0", "-0"]),
            data_key in prop::sample::select(vec!["data", "dat", "data ", "time"]),
            data in prop::sample::select(vec!["{}", "{\"turn\":1}", "{\"message\":{\"id\":\"m\"}}", "[1]", "1", "{"]),
            tail in prop::sample::select(vec!["}", ",\"ignorable\":true}", ",\"seq\":3}", "", ",}"]),
        ) {
            let text = format!(
                "{{\"type\":\"{type_text}\",\"seq\":{seq},\"time\":{time},\"{data_key}\":{data}{tail}"
            );
            let shortcut = visited(|visit| envelope_members_indexing(&text, None, visit));
            let general = visited(|visit| members_indexing(&text, "data", visit));
            prop_assert_eq!(shortcut, general, "{}", text);
        }
    }

    /// A whole session keeps every event, and with it every event's index, in memory: an
    /// index holds its members (in place when few, else in a boxed slice: no spare room
    /// for more), and the scratch list it is gathered in does not leak members from one
    /// event into the next.
    #[test]
    fn an_event_index_keeps_no_spare_room() {
        for (text, indexed) in [
            (
                r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
                1,
            ),
            (
                r#"{"type":"user/message","seq":1,"time":0,"data":{"message":{"id":"m1","role":"user","content":[]}}}"#,
                4,
            ),
            (
                r#"{"seq":2,"type":"turn/end","time":0,"data":{"turn":1,"outcome":"ok"}}"#,
                2,
            ),
            (r#"{"type":"x/y","seq":3,"time":0,"data":{}}"#, 0),
        ] {
            let members =
                envelope_members_indexing(text, None, |_, _| {}).expect("an indexed payload");
            assert_eq!(members.as_slice().len(), indexed, "{text}");
            assert_eq!(
                matches!(members, MemberIndex::InPlace(..)),
                indexed <= IN_PLACE,
                "{text}"
            );
        }
    }

    /// A block element: an object of members from a small pool (repeated keys, an escaped
    /// spelling of `type`, nested containers, escaped quotes), or something else.
    fn element() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "type",
            "text",
            "id",
            "t\\u0079pe",
            "content",
            "x",
            "name",
        ]);
        let value = prop::sample::select(vec![
            "\"a\"",
            "1",
            "{\"type\":\"inner\",\"text\":\"no\"}",
            "[1,{\"text\":\"y\"}]",
            "\"q\\\"\"",
            "null",
            "\"text\"",
        ]);
        let ws = prop::sample::select(vec!["", " ", "\n "]);
        let member = (key, ws.clone(), value).prop_map(|(k, w, v)| format!("\"{k}\"{w}:{w}{v}"));
        prop_oneof![
            4 => (prop::collection::vec(member, 0..5), ws).prop_map(|(m, w)| format!("{{{w}{}{w}}}", m.join(","))),
            1 => prop::sample::select(vec!["\"s\"", "3", "[]", "[{\"type\":\"deep\"}]", "null"]).prop_map(str::to_owned),
        ]
    }

    /// What `element_fields` reads, as texts.
    type Read = Vec<(String, [Option<String>; 3])>;

    fn read<'a>(blocks: impl Iterator<Item = (JsonRef<'a>, [Option<JsonRef<'a>>; 3])>) -> Read {
        blocks
            .map(|(e, f)| (e.raw().to_owned(), f.map(|v| v.map(|v| v.raw().to_owned()))))
            .collect()
    }

    /// The first member of each of `keys` among a block's members, keys compared as
    /// decoded.
    fn first_of<'a>(block: super::super::Block<'a>, keys: [&str; 3]) -> [Option<JsonRef<'a>>; 3] {
        let mut found = [None; 3];
        for (key, value) in block {
            let text = key.text();
            // A key is read as spelled exactly when its spelling holds no escape.
            assert_eq!(
                key.plain().is_none(),
                key.literal.contains('\\'),
                "{}",
                key.literal
            );
            if let Some(at) = keys.iter().position(|k| *k == text) {
                found[at].get_or_insert(value);
            }
        }
        found
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The blocks the index holds for a payload's `content` and its message's read what
        /// walking each array with `element_fields` reads.
        #[test]
        fn indexed_blocks_read_what_walking_the_content_reads(
            outer in prop::collection::vec(element(), 0..4),
            inner in prop::collection::vec(element(), 0..4),
            ws in prop::sample::select(vec!["", " ", "\n"]),
            first in any::<bool>(),
        ) {
            let message = format!("{{\"role\":\"assistant\",\"content\":[{ws}{}{ws}],\"content\":[1]}}", inner.join(","));
            let content = format!("[{}]", outer.join(&format!(",{ws}")));
            let text = if first {
                format!("{{\"content\":{content},\"message\":{message}}}")
            } else {
                format!("{{\"message\":{message},{ws}\"content\":{ws}{content}}}")
            };
            let (_, index) = index_payload(&text, 0).expect("an indexed payload");
            let root = JsonRef { text: &text };
            let keys = ["type", "text", "id"];
            for (depth, of) in [(0, Some(root)), (1, root.get("message"))] {
                let content = of.and_then(|o| o.get("content")).expect("content");
                let indexed = indexed_blocks(&text, index.as_slice(), depth, content, keys)
                    .expect("indexed blocks");
                prop_assert_eq!(read(indexed), read(content.element_fields(keys)), "{}", text);
                // Read as each block's members, indexed or walked, the first member of each
                // key is what `element_fields` reads.
                let indexed = indexed_blocks(&text, index.as_slice(), depth, content, [])
                    .expect("indexed blocks");
                for blocks in [
                    super::super::BlockMembers::indexed(indexed),
                    super::super::BlockMembers::walked(content.elements()),
                ] {
                    prop_assert_eq!(
                        read(blocks.map(|block| (block.element(), first_of(block, keys)))),
                        read(content.element_fields(keys)),
                        "{}", text
                    );
                }
                // The members themselves read as before: block entries are not taken for
                // members.
                let fields = |f: [Option<JsonRef<'_>>; 4]| f.map(|v| v.map(|v| v.raw().to_owned()));
                let members = ["content", "type", "role", "text"];
                prop_assert_eq!(
                    fields(indexed_fields(&text, index.as_slice(), depth, members)),
                    fields(of.expect("object").fields(members)),
                    "{}", text
                );
            }
            // Other content (an equal text elsewhere, or the second member) is not read
            // from the index.
            let second = root.get("message").and_then(|m| m.members().nth(2)).map(|(_, v)| v);
            prop_assert!(second.is_some_and(|v| indexed_blocks(&text, index.as_slice(), 1, v, keys).is_none()));
        }
    }
}
