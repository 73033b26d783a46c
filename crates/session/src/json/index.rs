//! The payload index: the members of an event's payload, and of its `message` object,
//! found in the one walk that parses the envelope, so the rules read payload fields
//! without walking the payload again. Lookups through the index answer exactly what
//! [`JsonRef::fields`] answers on the text (first occurrence of a key wins).

use std::cell::RefCell;

use super::{
    after_member, key_is, member_head, skip_string, skip_value, skip_ws, AfterMember, JsonRef,
    KeyLiteral, RawMembers,
};

/// One member of an object indexed by [`index_payload`]: byte ranges of its key literal
/// (with quotes) and of its value in the indexed text, and whether it belongs to the
/// payload itself (depth 0) or to its `message` object (depth 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemberSpan {
    pub(crate) depth: u8,
    pub(crate) key: (u32, u32),
    pub(crate) value: (u32, u32),
}

/// The members of the object at `text[start..]` and, when it has an object member
/// `message`, that object's members too, found in one pass (the message is walked once,
/// not skipped and then walked again). Returns the end of the value and the members in
/// text order, or `None` when the value is not an object, is malformed, or its offsets do
/// not fit in `u32`; callers then navigate with [`JsonRef`], which gives the same answers.
pub(crate) fn index_payload(text: &str, start: usize) -> Option<(usize, MemberIndex)> {
    u32::try_from(text.len()).ok()?;
    // The members are gathered in this thread's scratch list and then copied out at their
    // exact size: the index lives as long as its event (a whole session keeps every event
    // in memory), and a list grown for it would cost an allocation, its growth and a
    // shrink for every event.
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut members) => {
            members.clear();
            let end = index_object(text, start, 0, &mut members)?;
            Some((end, MemberIndex::from_slice(&members)))
        }
        Err(_) => {
            let mut members = Vec::new();
            let end = index_object(text, start, 0, &mut members)?;
            Some((end, MemberIndex::from_slice(&members)))
        }
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
    fn from_slice(members: &[MemberSpan]) -> MemberIndex {
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
    // Only the first `message` is indexed, as `get("message")` finds the first.
    let mut message_seen = false;
    loop {
        let (key_end, value_start) = member_head(bytes, pos)?;
        let message = depth == 0
            && !message_seen
            && text.get(pos..key_end).is_some_and(|k| key_is(k, "message"));
        message_seen |= message;
        let message = message && bytes.get(value_start) == Some(&b'{');
        let value_end = if message {
            index_object(text, value_start, 1, out)?
        } else {
            skip_value(bytes, value_start)?
        };
        // The text's length fits in u32 (checked by the caller), so these never fail.
        let span = |a: usize, b: usize| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?));
        out.push(MemberSpan {
            depth,
            key: span(pos, key_end)?,
            value: span(value_start, value_end)?,
        });
        match after_member(bytes, value_end)? {
            AfterMember::Next(next) => pos = next,
            AfterMember::End(end) => return Some(end),
        }
    }
}

/// Walks the members of the object `text` (key literal with quotes, value), like
/// [`JsonRef::members`], except that the value of the first member named `indexed` is
/// walked by [`index_payload`] instead of skipped: returns that value's member index
/// (offsets into `text`), or `None` when it is absent or not an indexable object. Stops at
/// malformed text, as [`JsonRef::members`] does.
pub(super) fn members_indexing<'a>(
    text: &'a str,
    indexed: &str,
    visit: impl FnMut(&'a str, JsonRef<'a>),
) -> Option<MemberIndex> {
    let start = if text.as_bytes().first() == Some(&b'{') {
        1
    } else {
        text.len()
    };
    members_indexing_from(text, start, indexed, visit)
}

/// [`members_indexing`] for an event envelope, with a shortcut for the layout every
/// writer of this crate and DSH's own use: `{"type":"…","seq":N,"time":N,"data":…`. Those
/// three members are read at fixed places (no search for the end of each), then the walk
/// goes on from `data` as [`members_indexing`] would; any other layout takes the general
/// walk from the start. Either way `visit` sees the same members with the same values.
pub(crate) fn envelope_members_indexing<'a>(
    text: &'a str,
    mut visit: impl FnMut(&'a str, JsonRef<'a>),
) -> Option<MemberIndex> {
    match canonical_envelope_prefix(text) {
        Some((prefix, data_key)) => {
            for (key, value) in prefix {
                visit(key, value);
            }
            members_indexing_from(text, data_key, "data", visit)
        }
        None => members_indexing(text, "data", visit),
    }
}

/// The `type`, `seq` and `time` members of an envelope written as
/// `{"type":"<no escapes>","seq":<digits>,"time":<-?digits>,"data":`, and where the `data`
/// key starts; `None` for any other layout.
#[allow(clippy::type_complexity)]
fn canonical_envelope_prefix(text: &str) -> Option<([(&str, JsonRef<'_>); 3], usize)> {
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
        let value_end = match index_payload(text, value_start) {
            Some((end, spans)) => {
                index = Some(spans);
                end
            }
            None => skip_value(bytes, value_start)?,
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
    for member in members.iter().filter(|m| m.depth == depth) {
        if missing == 0 {
            break;
        }
        let Some(literal) = slice(member.key) else {
            continue;
        };
        let mut literal = KeyLiteral::new(literal);
        for (slot, key) in found.iter_mut().zip(keys) {
            if slot.is_none() && literal.is(key) {
                *slot = slice(member.value).map(|text| JsonRef { text });
                missing -= usize::from(slot.is_some());
            }
        }
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
            let shortcut = visited(|visit| envelope_members_indexing(&text, visit));
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
            let members = envelope_members_indexing(text, |_, _| {}).expect("an indexed payload");
            assert_eq!(members.as_slice().len(), indexed, "{text}");
            assert_eq!(
                matches!(members, MemberIndex::InPlace(..)),
                indexed <= IN_PLACE,
                "{text}"
            );
        }
    }
}
