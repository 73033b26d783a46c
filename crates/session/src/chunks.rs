//! DSH packed chunk rows (spec §2): runs of at least three `assistant/chunk` delta events
//! stored as one JSONL row, unpacked on import and packed again on export exactly as
//! DSH's writer packs them.

use crate::event::{is_number, Event};
use crate::json::{JsonRef, MAX_SAFE_INTEGER};

/// Row type tags.
pub(crate) const ROW_TYPES: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

/// Unpacks one row into canonical `assistant/chunk` envelopes; `None` if the row is
/// malformed (the line then counts as unparsable).
pub(crate) fn unpack_row(row: JsonRef<'_>) -> Option<Vec<String>> {
    // Each object is walked once: its members checked against the keys it may have, and
    // their values kept, as `has_exact_keys` and `get` would find them.
    let (count, [kind, seq0, time0, data]) = exact_members(row, ["type", "seq0", "time0", "data"])?;
    let kind = kind?.as_str()?;
    if count != 4 {
        return None;
    }
    let seq0 = seq0?.as_seq()?;
    let time0 = time0?.as_safe_integer()?;
    let data = data?;
    let tool = kind == "tool-call-chunks";
    let (count, [turn, step, index, dt, members, id, name]) = if tool {
        exact_members(data, ["turn", "step", "index", "dt", "args", "id", "name"])?
    } else {
        let (count, [turn, step, index, dt, texts]) =
            exact_members(data, ["turn", "step", "index", "dt", "texts"])?;
        (count, [turn, step, index, dt, texts, None, None])
    };
    // As `has_exact_keys` of the seven keys, or of the six without `name`.
    let keys_ok = if tool {
        count == 7 || (count == 6 && name.is_none())
    } else {
        count == 5
    };
    if !keys_ok || !is_number(turn) || !is_number(step) || !is_number(index) {
        return None;
    }
    let members = members.filter(|m| m.is_array())?;
    let members: Vec<JsonRef<'_>> = members.elements().collect();
    if members.is_empty() || members.iter().any(|m| m.as_str().is_none()) {
        return None;
    }
    let dt = dt.filter(|d| d.is_array())?;
    let dt: Vec<i64> = dt
        .elements()
        .map(|d| d.as_safe_integer())
        .collect::<Option<_>>()?;
    if dt.len() + 1 != members.len() {
        return None;
    }
    let id = if tool {
        Some(id.filter(|i| i.as_str().is_some())?)
    } else {
        None
    };
    if name.is_some_and(|n| n.as_str().is_none()) {
        return None;
    }
    let (turn, step, index) = (turn?.raw(), step?.raw(), index?.raw());
    let delta = match kind.as_ref() {
        "text-chunks" => "text-delta",
        "reasoning-chunks" => "reasoning-delta",
        _ => "tool-call-delta",
    };
    let mut time = time0;
    let mut out = Vec::with_capacity(members.len());
    for (k, member) in members.iter().enumerate() {
        if k > 0 {
            time = time.checked_add(*dt.get(k - 1)?)?;
        }
        let seq = seq0.checked_add(k as u64)?;
        if time.unsigned_abs() as f64 > MAX_SAFE_INTEGER || seq as f64 > MAX_SAFE_INTEGER {
            return None;
        }
        // One allocation per envelope, of the size it will have.
        let (id, name) = (id.map(|i| i.raw()), name.map(|n| n.raw()));
        let mut text = String::with_capacity(
            112 + turn.len()
                + step.len()
                + index.len()
                + id.map_or(0, str::len)
                + name.map_or(0, str::len)
                + member.raw().len(),
        );
        text.push_str("{\"type\":\"assistant/chunk\",\"seq\":");
        push_integer(&mut text, false, seq);
        text.push_str(",\"time\":");
        push_integer(&mut text, time < 0, time.unsigned_abs());
        text.push_str(",\"data\":{\"turn\":");
        for piece in [
            turn,
            ",\"step\":",
            step,
            ",\"chunk\":{\"type\":\"",
            delta,
            "\",\"index\":",
            index,
        ] {
            text.push_str(piece);
        }
        if let Some(id) = id {
            text.push_str(",\"id\":");
            text.push_str(id);
            if let Some(name) = name {
                text.push_str(",\"name\":");
                text.push_str(name);
            }
            text.push_str(",\"argumentsDelta\":");
        } else {
            text.push_str(",\"text\":");
        }
        text.push_str(member.raw());
        text.push_str("}}}");
        out.push(text);
    }
    Some(out)
}

/// The members of object `value` whose keys are among `keys`: how many members it has, and
/// the first value of each key; `None` when it is not an object or has another key.
fn exact_members<'a, const N: usize>(
    value: JsonRef<'a>,
    keys: [&str; N],
) -> Option<(usize, [Option<JsonRef<'a>>; N])> {
    if !value.is_object() {
        return None;
    }
    let mut found = [None; N];
    let mut count = 0;
    for (key, member) in value.members() {
        let slot = keys.iter().position(|k| *k == key.as_ref())?;
        if let Some(place) = found.get_mut(slot) {
            place.get_or_insert(member);
        }
        count += 1;
    }
    Some((count, found))
}

/// Appends `magnitude` in decimal, after a minus sign when `negative`, as `write!` would,
/// without the formatting machinery (every unpacked chunk writes two numbers).
fn push_integer(out: &mut String, negative: bool, magnitude: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = magnitude;
    loop {
        at -= 1;
        if let Some(digit) = digits.get_mut(at) {
            *digit = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if negative {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(digits.get(at..).unwrap_or_default()).unwrap_or_default());
}

/// A packable chunk event, reduced to what decides run membership.
struct Member<'a> {
    kind: &'static str,
    turn: JsonRef<'a>,
    step: JsonRef<'a>,
    index: JsonRef<'a>,
    id: Option<JsonRef<'a>>,
    name: Option<JsonRef<'a>>,
    payload: JsonRef<'a>,
    time: i64,
}

fn member(event: &Event) -> Option<Member<'_>> {
    if !event.is_bare() || event.stored_type() != "assistant/chunk" || event.is_upgraded() {
        return None;
    }
    let data = event.stored_data();
    if !data.has_exact_keys(&["turn", "step", "chunk"])
        || !is_number(data.get("turn"))
        || !is_number(data.get("step"))
    {
        return None;
    }
    let chunk = data.get("chunk")?;
    let kind = chunk.get("type")?.as_str()?;
    let string = |key: &str| chunk.get(key).filter(|v| v.as_str().is_some());
    if !is_number(chunk.get("index")) {
        return None;
    }
    let (kind, id, name, payload) = match kind.as_ref() {
        "text-delta" | "reasoning-delta" if chunk.has_exact_keys(&["type", "index", "text"]) => {
            let row = if kind == "text-delta" {
                "text-chunks"
            } else {
                "reasoning-chunks"
            };
            (row, None, None, string("text")?)
        }
        "tool-call-delta"
            if chunk.has_exact_keys(&["type", "index", "id", "name", "argumentsDelta"])
                || chunk.has_exact_keys(&["type", "index", "id", "argumentsDelta"]) =>
        {
            let name = chunk.get("name");
            if name.is_some() && string("name").is_none() {
                return None;
            }
            (
                "tool-call-chunks",
                Some(string("id")?),
                name,
                string("argumentsDelta")?,
            )
        }
        _ => return None,
    };
    Some(Member {
        kind,
        turn: data.get("turn")?,
        step: data.get("step")?,
        index: chunk.get("index")?,
        id,
        name,
        payload,
        time: event.time(),
    })
}

fn continues(prev: &Member<'_>, next: &Member<'_>) -> bool {
    let same_number = |a: JsonRef<'_>, b: JsonRef<'_>| a.as_f64() == b.as_f64();
    let dt = next.time.checked_sub(prev.time);
    prev.kind == next.kind
        && dt.is_some_and(|d| d.unsigned_abs() as f64 <= MAX_SAFE_INTEGER)
        && same_number(prev.turn, next.turn)
        && same_number(prev.step, next.step)
        && same_number(prev.index, next.index)
        && prev.id.map(|i| i.as_str()) == next.id.map(|i| i.as_str())
        && prev.name.map(|n| n.as_str()) == next.name.map(|n| n.as_str())
}

fn write_row(out: &mut String, first: &Event, run: &[Member<'_>]) {
    let Some(head) = run.first() else { return };
    out.push_str(&format!(
        "{{\"type\":\"{}\",\"seq0\":{},\"time0\":{},\"data\":{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[",
        head.kind,
        first.seq(),
        head.time,
        head.turn.raw(),
        head.step.raw(),
        head.index.raw()
    ));
    for (i, pair) in run.windows(2).enumerate() {
        if i > 0 {
            out.push(',');
        }
        if let [a, b] = pair {
            out.push_str(&(b.time - a.time).to_string());
        }
    }
    out.push(']');
    if let Some(id) = head.id {
        out.push_str(",\"id\":");
        out.push_str(id.raw());
        if let Some(name) = head.name {
            out.push_str(",\"name\":");
            out.push_str(name.raw());
        }
        out.push_str(",\"args\":[");
    } else {
        out.push_str(",\"texts\":[");
    }
    for (i, m) in run.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(m.payload.raw());
    }
    out.push_str("]}}");
}

/// Writes `events` as JSONL lines, packing runs of three or more chunk deltas into rows
/// as DSH does for one write batch.
pub(crate) fn write_packed(out: &mut String, events: &[Event]) {
    let mut i = 0;
    while let Some(event) = events.get(i) {
        let mut run: Vec<Member<'_>> = Vec::new();
        if let Some(first) = member(event) {
            run.push(first);
            while let Some(next) = events.get(i + run.len()).and_then(member) {
                match run.last() {
                    Some(prev) if continues(prev, &next) => run.push(next),
                    _ => break,
                }
            }
        }
        if run.len() >= 3 {
            write_row(out, event, &run);
            out.push('\n');
            i += run.len();
        } else {
            out.push_str(event.raw());
            out.push('\n');
            i += 1;
        }
    }
}

/// `write_packed` over a stream of events: holds only the current run of chunk deltas
/// that may still grow, so a session of any length is exported in bounded memory. The
/// lines are the ones `write_packed` writes for the same events as one slice (runs are
/// maximal chains of adjacent deltas that continue each other, either way).
#[derive(Debug, Default)]
pub struct PackedLines {
    run: Vec<Event>,
}

impl PackedLines {
    /// No event pending.
    pub fn new() -> PackedLines {
        PackedLines::default()
    }

    /// Takes the next event; writes to `out` the lines it completes.
    pub fn push(&mut self, event: Event, out: &mut String) {
        let continues_run = match (self.run.last().and_then(member), member(&event)) {
            (Some(prev), Some(next)) => continues(&prev, &next),
            _ => false,
        };
        if !continues_run {
            self.finish(out);
        }
        if continues_run || member(&event).is_some() {
            self.run.push(event);
        } else {
            out.push_str(event.raw());
            out.push('\n');
        }
    }

    /// Writes the lines of the events still pending.
    pub fn finish(&mut self, out: &mut String) {
        write_packed(out, &self.run);
        self.run.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::unpack_row;
    use crate::event::is_number;
    use crate::json::{JsonRef, MAX_SAFE_INTEGER};

    /// The unpacking as it was before it walked each object once, kept as the reference.
    #[allow(clippy::all)]
    fn unpack_row_before(row: JsonRef<'_>) -> Option<Vec<String>> {
        let kind = row.get("type")?.as_str()?;
        if !row.has_exact_keys(&["type", "seq0", "time0", "data"]) {
            return None;
        }
        let seq0 = row.get("seq0")?.as_seq()?;
        let time0 = row.get("time0")?.as_safe_integer()?;
        let data = row.get("data")?;
        let tool = kind == "tool-call-chunks";
        let keys_ok = if tool {
            data.has_exact_keys(&["turn", "step", "index", "dt", "id", "name", "args"])
                || data.has_exact_keys(&["turn", "step", "index", "dt", "id", "args"])
        } else {
            data.has_exact_keys(&["turn", "step", "index", "dt", "texts"])
        };
        if !keys_ok
            || !is_number(data.get("turn"))
            || !is_number(data.get("step"))
            || !is_number(data.get("index"))
        {
            return None;
        }
        let members = data
            .get(if tool { "args" } else { "texts" })
            .filter(|m| m.is_array())?;
        let members: Vec<JsonRef<'_>> = members.elements().collect();
        if members.is_empty() || members.iter().any(|m| m.as_str().is_none()) {
            return None;
        }
        let dt = data.get("dt").filter(|d| d.is_array())?;
        let dt: Vec<i64> = dt
            .elements()
            .map(|d| d.as_safe_integer())
            .collect::<Option<_>>()?;
        if dt.len() + 1 != members.len() {
            return None;
        }
        let id = if tool {
            Some(data.get("id").filter(|i| i.as_str().is_some())?)
        } else {
            None
        };
        let name = data.get("name");
        if name.is_some_and(|n| n.as_str().is_none()) {
            return None;
        }
        let (turn, step, index) = (
            data.get("turn")?.raw(),
            data.get("step")?.raw(),
            data.get("index")?.raw(),
        );
        let delta = match kind.as_ref() {
            "text-chunks" => "text-delta",
            "reasoning-chunks" => "reasoning-delta",
            _ => "tool-call-delta",
        };
        let mut time = time0;
        let mut out = Vec::with_capacity(members.len());
        for (k, member) in members.iter().enumerate() {
            if k > 0 {
                time = time.checked_add(*dt.get(k - 1)?)?;
            }
            let seq = seq0.checked_add(k as u64)?;
            if time.unsigned_abs() as f64 > MAX_SAFE_INTEGER || seq as f64 > MAX_SAFE_INTEGER {
                return None;
            }
            // One allocation per envelope, of the size it will have.
            let (id, name) = (id.map(|i| i.raw()), name.map(|n| n.raw()));
            let mut text = String::with_capacity(
                112 + turn.len()
                    + step.len()
                    + index.len()
                    + id.map_or(0, str::len)
                    + name.map_or(0, str::len)
                    + member.raw().len(),
            );
            let _ = write!(
                text,
                "{{\"type\":\"assistant/chunk\",\"seq\":{seq},\"time\":{time},\"data\":{{\"turn\":"
            );
            for piece in [
                turn,
                ",\"step\":",
                step,
                ",\"chunk\":{\"type\":\"",
                delta,
                "\",\"index\":",
                index,
            ] {
                text.push_str(piece);
            }
            if let Some(id) = id {
                text.push_str(",\"id\":");
                text.push_str(id);
                if let Some(name) = name {
                    text.push_str(",\"name\":");
                    text.push_str(name);
                }
                text.push_str(",\"argumentsDelta\":");
            } else {
                text.push_str(",\"text\":");
            }
            text.push_str(member.raw());
            text.push_str("}}}");
            out.push(text);
        }
        Some(out)
    }

    #[test]
    fn rows_unpack_as_before_each_object_was_walked_once() {
        let mut rows = Vec::new();
        let datas = [
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"texts":["a","b\\n","c"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"texts":["a","b","c"],"x":1}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0],"texts":["a","b","c"]}"#,
            r#"{"turn":1,"turn":1,"index":0,"dt":[0,5],"texts":["a","b","c"]}"#,
            r#"{"turn":"1","step":2,"index":0,"dt":[0,5],"texts":["a","b","c"]}"#,
            r#"{"step":2,"index":0,"dt":[0,5],"texts":["a","b","c"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"id":"c1","name":"bash","args":["{","}","x"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"id":"c1","args":["{","}","x"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"id":"c1","name":7,"args":["{","}","x"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"id":"c1","name":"n","name":"n","args":["a","b","c"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"name":"n","args":["a","b","c"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[-3,5],"texts":["a","b","c"]}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"texts":["a","b","c"],"turn":1}"#,
            r#"{"turn":1,"step":2,"index":0,"dt":[0,5],"id":"c1","args":["a","b","c"],"id":"c1"}"#,
            r#"[]"#,
        ];
        for kind in [
            "text-chunks",
            "reasoning-chunks",
            "tool-call-chunks",
            "other",
        ] {
            for data in datas {
                for (seq0, time0) in [
                    ("0", "0"),
                    ("7", "-12"),
                    ("9007199254740990", "1700000000000"),
                    ("1.5", "3"),
                ] {
                    let mut row = String::new();
                    let _ = write!(
                        row,
                        r#"{{"type":"{kind}","seq0":{seq0},"time0":{time0},"data":{data}}}"#
                    );
                    rows.push(row);
                }
            }
            rows.push(format!(
                r#"{{"type":"{kind}","seq0":1,"time0":2,"data":{},"more":1}}"#,
                datas[0]
            ));
            rows.push(format!(
                r#"{{"type":"{kind}","seq0":1,"data":{}}}"#,
                datas[0]
            ));
        }
        let mut unpacked = 0;
        for row in &rows {
            let now = unpack_row(JsonRef::new(row));
            assert_eq!(now, unpack_row_before(JsonRef::new(row)), "{row}");
            unpacked += usize::from(now.is_some());
        }
        assert!(unpacked >= 12, "only {unpacked} rows unpacked");
    }
}
