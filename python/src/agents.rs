//! The storage of `sessionlog.agents.SessionlogSession`: OpenAI Agents SDK items as surface
//! events of a session, and `pop_item` / `clear_session` as surface replacements.
//!
//! Each `add_items` call is one turn written as one atomic batch: `turn/start`, `step/start`,
//! one surface event per item, `step/end`, `turn/end`. An item made by the model (an
//! assistant message, a tool call, reasoning) is an `assistant/message`; any other (user,
//! system and developer messages, tool outputs) a `user/message`. The message content is
//! the item's visible text (what token estimates and summaries read) and `source.item` holds
//! the item itself, byte for byte as the caller's JSON encoder wrote it, so `get_items`
//! returns exactly what was added.
//!
//! `pop_item` and `clear_session` write a turn holding one replacement `assistant/message`
//! with empty content: it shadows the last item (or the whole surface) and derives no
//! message, as DeepSeek Harness skips an empty settlement. The shadowed items stay in the
//! log; `view().messages`, a DSH export and `get_items` all see the same current items. A
//! summary compaction shadows items the same way; its summary message is returned as a
//! `{"role":"user","content":text}` item.

use std::collections::VecDeque;

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyList};

use sessionlog::session::compaction::SessionSource;
use sessionlog::session::json::{validate_str, write_js_string, JsonRef, ObjectWriter};
use sessionlog::session::FormatVersion;
use sessionlog::session::{derive_message, SurfaceOp};
use sessionlog::{Event, EventInput, Seq, SessionHandle};

/// `source.kind` of the user messages that hold an item, and `source.provider` of the
/// assistant messages that do.
const SOURCE: &str = "openai-agents";

/// The model name written on assistant messages: the SDK does not say which model made an
/// item, and DSH requires a non-empty one.
const UNRECORDED_MODEL: &str = "unrecorded";

/// Why an `add_items` batch was refused before anything was written.
#[derive(Debug)]
pub(crate) struct BadItems(pub(crate) String);

/// The events of one turn around `body` (turn and step numbers from the session's state).
fn turn_batch(
    h: &SessionHandle,
    now_ms: i64,
    body: impl FnOnce(u64, u64) -> Vec<EventInput>,
) -> Vec<EventInput> {
    let turn = h.state().position(now_ms).next_turn();
    let turn = i64::try_from(turn).unwrap_or(i64::MAX);
    let step = ObjectWriter::new()
        .int("turn", turn)
        .int("step", 1)
        .finish();
    let first_seq = h.next_seq().get();
    let mut events = vec![
        EventInput::new(
            "turn/start",
            now_ms,
            ObjectWriter::new().int("turn", turn).finish(),
        ),
        EventInput::new("step/start", now_ms, step.clone()),
    ];
    // body events take the seqs after turn/start and step/start
    events.extend(body(first_seq + 2, turn as u64));
    events.push(EventInput::new("step/end", now_ms, step));
    events.push(EventInput::new(
        "turn/end",
        now_ms,
        ObjectWriter::new()
            .int("turn", turn)
            .raw("reason", r#"{"kind":"completed"}"#)
            .finish(),
    ));
    events
}

/// Whether an item is made by the model (an assistant `message`, a `*_call`, reasoning, ...).
fn is_model_item(item: JsonRef<'_>) -> bool {
    let role = item.get("role").and_then(|r| r.as_str());
    if let Some(role) = role {
        return role == "assistant";
    }
    let kind = item.get("type").and_then(|t| t.as_str());
    kind.is_some_and(|k| {
        k.ends_with("_call")
            || matches!(
                k.as_ref(),
                "reasoning" | "mcp_list_tools" | "mcp_approval_request" | "compaction"
            )
    })
}

/// The text a model would read of an item: its text content, a tool output, a call's name
/// and arguments; the item's JSON when it has none of these.
fn visible_text(item: JsonRef<'_>) -> String {
    let content = item.get("content");
    if let Some(text) = content.and_then(|c| c.as_str()) {
        return text.into_owned();
    }
    if let Some(parts) = content.filter(|c| c.is_array()) {
        let texts: Vec<String> = parts
            .elements()
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .map(|t| t.into_owned())
            .collect();
        return texts.join("\n");
    }
    if let Some(output) = item.get("output") {
        return output
            .as_str()
            .map_or_else(|| output.raw().to_owned(), |o| o.into_owned());
    }
    if let (Some(name), Some(arguments)) = (
        item.get("name").and_then(|n| n.as_str()),
        item.get("arguments").and_then(|a| a.as_str()),
    ) {
        return format!("{name}({arguments})");
    }
    item.raw().to_owned()
}

fn text_content(text: &str) -> String {
    let mut out = String::from(r#"[{"type":"text","text":"#);
    write_js_string(&mut out, text);
    out.push_str("}]");
    out
}

/// The surface event holding `item` at `seq` in `turn`.
fn item_event(item: JsonRef<'_>, seq: u64, turn: u64, now_ms: i64) -> EventInput {
    let id = format!("item-{seq}");
    let content = text_content(&visible_text(item));
    let event = if is_model_item(item) {
        let source = ObjectWriter::new()
            .string("kind", "model")
            .string("provider", SOURCE)
            .string("model", UNRECORDED_MODEL)
            .raw("item", item.raw())
            .finish();
        let message = ObjectWriter::new()
            .string("id", &id)
            .string("role", "assistant")
            .raw("content", &content)
            .raw("source", &source)
            .finish();
        let data = ObjectWriter::new()
            .int("turn", i64::try_from(turn).unwrap_or(i64::MAX))
            .int("step", 1)
            .raw("message", &message)
            .finish();
        EventInput::new("assistant/message", now_ms, data)
    } else {
        let source = ObjectWriter::new()
            .string("kind", SOURCE)
            .raw("item", item.raw())
            .finish();
        let data = ObjectWriter::new()
            .string("id", &id)
            .string("role", "user")
            .raw("content", &content)
            .raw("source", &source)
            .finish();
        EventInput::new("user/message", now_ms, data)
    };
    event.with_surface_op(SurfaceOp::Append)
}

/// The events of one `add_items` turn, and each item's seq and JSON text.
pub(crate) struct ItemsBatch {
    pub(crate) events: Vec<EventInput>,
    pub(crate) items: Vec<(u64, String)>,
}

/// The turn that writes `items_json` (a JSON array of items): validated whole first, so a
/// bad item refuses the call before anything is appended.
pub(crate) fn items_batch(
    h: &SessionHandle,
    items_json: &str,
    now_ms: i64,
) -> Result<ItemsBatch, BadItems> {
    validate_str(items_json).map_err(|e| {
        BadItems(format!(
            "the items are not lossless JSON ({} at byte {}): store JSON-serializable items",
            e.kind, e.offset
        ))
    })?;
    let items = JsonRef::new(items_json);
    if !items.is_array() {
        return Err(BadItems("add_items takes a list of items".into()));
    }
    let mut texts = Vec::new();
    let batch = turn_batch(h, now_ms, |first, turn| {
        items
            .elements()
            .zip(first..)
            .map(|(item, seq)| {
                texts.push((seq, item.raw().to_owned()));
                item_event(item, seq, turn, now_ms)
            })
            .collect()
    });
    Ok(ItemsBatch {
        events: batch,
        items: texts,
    })
}

/// The JSON text of recently added or read items, by seq, and each one's Python value once a
/// read from memory has decoded it: what an item's seq stands for never changes (events are
/// never rewritten), so an entry stays true until it is evicted, and `get_items(limit=N)` for
/// a small N is served from memory. A decoded value is never handed out, only fresh copies of
/// it, so no caller can change it. Bounded in entries and text bytes; the smallest seqs go
/// first.
#[derive(Debug, Default)]
pub(crate) struct RecentItems {
    items: VecDeque<RecentItem>,
    bytes: usize,
}

#[derive(Debug)]
struct RecentItem {
    seq: u64,
    text: String,
    value: Option<Decoded>,
}

/// An item's Python value, and whether it is a dict with no dict or list in it (then a copy
/// of the dict alone shares nothing mutable with it).
#[derive(Debug)]
struct Decoded {
    value: Py<PyAny>,
    flat: bool,
}

impl Decoded {
    fn new(value: &Bound<'_, PyAny>) -> Self {
        let flat = value.downcast_exact::<PyDict>().is_ok_and(|dict| {
            dict.values().iter().all(|member| {
                !member.is_exact_instance_of::<PyDict>() && !member.is_exact_instance_of::<PyList>()
            })
        });
        Decoded {
            value: value.clone().unbind(),
            flat,
        }
    }

    /// A copy sharing nothing mutable with the kept value (see [`fresh`]).
    fn fresh<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = self.value.bind(py);
        if self.flat {
            if let Ok(dict) = value.downcast_exact::<PyDict>() {
                return Ok(dict.copy()?.into_any());
            }
        }
        fresh(value)
    }
}

impl RecentItems {
    const MAX_ITEMS: usize = 4096;
    const MAX_BYTES: usize = 4 << 20;

    pub(crate) fn insert(&mut self, seq: u64, text: String) {
        let at = match self.items.binary_search_by_key(&seq, |e| e.seq) {
            Ok(_) => return,
            Err(at) => at,
        };
        self.bytes += text.len();
        self.items.insert(
            at,
            RecentItem {
                seq,
                text,
                value: None,
            },
        );
        while self.items.len() > Self::MAX_ITEMS || self.bytes > Self::MAX_BYTES {
            match self.items.pop_front() {
                Some(evicted) => self.bytes -= evicted.text.len(),
                None => break,
            }
        }
    }

    fn entry(&self, seq: u64) -> Option<&RecentItem> {
        let at = self.items.binary_search_by_key(&seq, |e| e.seq).ok()?;
        self.items.get(at)
    }

    fn get(&self, seq: u64) -> Option<&str> {
        self.entry(seq).map(|e| e.text.as_str())
    }
}

/// A copy of `value` (made by `json.loads`) that shares nothing mutable with it: dicts and
/// lists are copied, at every depth; strings, numbers, booleans and None are immutable and
/// shared.
fn fresh<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(dict) = value.downcast_exact::<PyDict>() {
        let out = dict.copy()?;
        for (key, member) in dict.iter() {
            if member.is_exact_instance_of::<PyDict>() || member.is_exact_instance_of::<PyList>() {
                out.set_item(key, fresh(&member)?)?;
            }
        }
        return Ok(out.into_any());
    }
    if let Ok(list) = value.downcast_exact::<PyList>() {
        let copies = list
            .iter()
            .map(|member| fresh(&member))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(PyList::new(value.py(), copies)?.into_any());
    }
    Ok(value.clone())
}

/// `json.loads`, looked up once.
fn json_loads(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static LOADS: GILOnceCell<Py<PyAny>> = GILOnceCell::new();
    LOADS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("json")?.getattr("loads")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// The items of `seqs` as a new list of fresh Python values when `recent` has every one of
/// them (None otherwise). An item read this way for the first time is decoded once and its
/// value kept; no lock is held while Python code (`json.loads`) runs.
pub(crate) fn cached_items<'py>(
    py: Python<'py>,
    recent: &parking_lot::Mutex<RecentItems>,
    seqs: &[u64],
) -> PyResult<Option<Bound<'py, PyList>>> {
    // what memory holds of each item: its value, or its text still to decode
    let held: Option<Vec<Result<Decoded, String>>> = {
        let recent = recent.lock();
        seqs.iter()
            .map(|&seq| {
                recent.entry(seq).map(|e| match &e.value {
                    Some(decoded) => Ok(Decoded {
                        value: decoded.value.clone_ref(py),
                        flat: decoded.flat,
                    }),
                    None => Err(e.text.clone()),
                })
            })
            .collect()
    };
    let Some(held) = held else {
        return Ok(None);
    };
    let mut decoded = Vec::new();
    let mut out = Vec::with_capacity(held.len());
    for (seq, item) in seqs.iter().zip(held) {
        match item {
            Ok(kept) => out.push(kept.fresh(py)?),
            Err(text) => {
                let value = json_loads(py)?.call1((text,))?;
                let kept = Decoded::new(&value);
                out.push(kept.fresh(py)?);
                decoded.push((*seq, kept));
            }
        }
    }
    if !decoded.is_empty() {
        let mut recent = recent.lock();
        for (seq, kept) in decoded {
            if let Ok(at) = recent.items.binary_search_by_key(&seq, |e| e.seq) {
                if let Some(entry) = recent.items.get_mut(at) {
                    entry.value.get_or_insert(kept);
                }
            }
        }
    }
    Ok(Some(PyList::new(py, out)?))
}

/// The seqs of the current items (surface nodes that derive a message), oldest first; only
/// the newest `limit` when given, found walking back from the newest node; only seqs below
/// `below` when given (the appends not yet durable lie at and after it).
pub(crate) fn item_seqs(h: &SessionHandle, limit: Option<usize>, below: Option<u64>) -> Vec<u64> {
    let surface = h.state().surface_state();
    let below = below.unwrap_or(u64::MAX);
    let wanted = |s: &Seq| s.get() < below && surface.has_message(*s);
    match limit {
        None => surface.iter().filter(wanted).map(Seq::get).collect(),
        Some(n) => {
            let mut seqs: Vec<u64> = surface
                .iter_rev()
                .filter(wanted)
                .take(n)
                .map(Seq::get)
                .collect();
            seqs.reverse();
            seqs
        }
    }
}

/// Appends to `out` the item `event` (a surface node deriving a message) stands for: the
/// stored item, or an item made of a message that holds none (a compaction summary).
fn push_item(version: &FormatVersion, event: &Event, out: &mut String) {
    let Some(message) = derive_message(version, event).map(JsonRef::new) else {
        out.push_str("null");
        return;
    };
    if let Some(item) = message.get("source").and_then(|s| s.get("item")) {
        out.push_str(item.raw());
        return;
    }
    let role = message
        .get("role")
        .and_then(|r| r.as_str())
        .map_or_else(|| "user".to_owned(), |r| r.into_owned());
    let text: Vec<String> = message
        .get("content")
        .iter()
        .flat_map(|c| c.elements())
        .filter_map(|b| b.get("text").and_then(|t| t.as_str()))
        .map(|t| t.into_owned())
        .collect();
    let mut content = String::new();
    write_js_string(&mut content, &text.join("\n"));
    out.push_str(
        &ObjectWriter::new()
            .string("role", &role)
            .raw("content", &content)
            .finish(),
    );
}

/// At most this many events per wanted one in the newest run of `seqs` that is read in one
/// pass (the structural events of a turn, and shadowed items, lie in between).
const DENSE_EVENTS_PER_ITEM: u64 = 8;

/// The events of `seqs`. The newest dense run (the usual `get_items(limit=N)`, and a whole
/// session with few replacements) is read with one sequential pass over the log from its
/// first seq to the session's end; a read by seq walks from the nearest index entry, so
/// reading N events one by one would cost N walks. Other seqs are read by seq. The seqs are
/// distinct (surface nodes), so each event of the run is moved out, not copied.
fn events_at(h: &SessionHandle, seqs: &[u64]) -> sessionlog::Result<Vec<Event>> {
    let mut sorted = seqs.to_vec();
    sorted.sort_unstable();
    let end = h.next_seq().get();
    let mut run_start = sorted.len();
    while let Some(&seq) = run_start.checked_sub(1).and_then(|i| sorted.get(i)) {
        let wanted = (sorted.len() - run_start + 1) as u64;
        if end.saturating_sub(seq) > DENSE_EVENTS_PER_ITEM * wanted {
            break;
        }
        run_start -= 1;
    }
    let mut run: Vec<Option<Event>> = match sorted.get(run_start) {
        Some(&first) => h.events_from(Seq(first))?.into_iter().map(Some).collect(),
        None => Vec::new(),
    };
    let run_first = sorted.get(run_start).copied().unwrap_or(end);
    let source = h.source();
    let missing = |seq: u64| sessionlog::Error::BadRecord {
        session: h.name().to_owned(),
        seq: seq + 1,
        detail: "an item the session's state names is missing from the log".into(),
    };
    seqs.iter()
        .map(|&seq| {
            if seq >= run_first {
                let at = usize::try_from(seq - run_first).unwrap_or(usize::MAX);
                run.get_mut(at)
                    .and_then(Option::take)
                    .ok_or_else(|| missing(seq))
            } else {
                source
                    .event_at(Seq(seq))?
                    .map(std::borrow::Cow::into_owned)
                    .ok_or_else(|| missing(seq))
            }
        })
        .collect()
}

/// The items of `seqs` as the text of one JSON array: from `recent` where it has them, the
/// others read from the log in one pass (and remembered once the array is built).
pub(crate) fn items_json(
    h: &SessionHandle,
    recent: &mut RecentItems,
    seqs: &[u64],
) -> sessionlog::Result<String> {
    let missing: Vec<u64> = seqs
        .iter()
        .copied()
        .filter(|s| recent.get(*s).is_none())
        .collect();
    let mut read = Vec::with_capacity(missing.len());
    if !missing.is_empty() {
        let version = h.state().version();
        for event in events_at(h, &missing)? {
            let mut text = String::new();
            push_item(version, &event, &mut text);
            read.push(text);
        }
    }
    // `missing` keeps the order of `seqs`, so the texts read come up in turn.
    let mut out = String::from("[");
    let mut next_read = read.iter();
    for (i, seq) in seqs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match recent.get(*seq) {
            Some(text) => out.push_str(text),
            None => out.push_str(next_read.next().map_or("null", String::as_str)),
        }
    }
    out.push(']');
    for (seq, text) in missing.into_iter().zip(read) {
        recent.insert(seq, text);
    }
    Ok(out)
}

/// The turn holding one replacement that shadows the surface nodes `first..=last` (citing
/// `sources`) and derives no message; `op` names the call that wrote it.
fn shadow_batch(
    h: &SessionHandle,
    first: u64,
    last: u64,
    sources: Vec<u64>,
    op: &str,
    now_ms: i64,
) -> Vec<EventInput> {
    turn_batch(h, now_ms, |seq, turn| {
        let source = ObjectWriter::new()
            .string("kind", "model")
            .string("provider", SOURCE)
            .string("model", UNRECORDED_MODEL)
            .finish();
        let message = ObjectWriter::new()
            .string("id", &format!("{op}-{seq}"))
            .string("role", "assistant")
            .raw("content", "[]")
            .raw("source", &source)
            .finish();
        let data = ObjectWriter::new()
            .int("turn", i64::try_from(turn).unwrap_or(i64::MAX))
            .int("step", 1)
            .raw("message", &message)
            .string("sessionOp", op)
            .finish();
        vec![EventInput::new("assistant/message", now_ms, data)
            .with_surface_op(SurfaceOp::Replace {
                start: Seq(first),
                end: Seq(last),
            })
            .with_sources(sources.into_iter().map(Seq).collect())]
    })
}

/// Shadows the newest item; returns it (as JSON text), or `None` when there is none.
pub(crate) fn pop_item(
    h: &mut SessionHandle,
    recent: &mut RecentItems,
    now_ms: i64,
) -> sessionlog::Result<Option<String>> {
    let Some(&last) = item_seqs(h, Some(1), None).first() else {
        return Ok(None);
    };
    let json = items_json(h, recent, &[last])?;
    // one element: the array's brackets off
    let item = json
        .strip_prefix('[')
        .and_then(|j| j.strip_suffix(']'))
        .unwrap_or("null")
        .to_owned();
    let batch = shadow_batch(h, last, last, vec![last], "pop_item", now_ms);
    h.append_atomic(batch)?;
    h.commit()?;
    Ok(Some(item))
}

/// Shadows the whole surface with one replacement; does nothing when no item is current.
pub(crate) fn clear_items(h: &mut SessionHandle, now_ms: i64) -> sessionlog::Result<()> {
    if item_seqs(h, Some(1), None).is_empty() {
        return Ok(());
    }
    let nodes: Vec<u64> = h.state().surface_state().iter().map(Seq::get).collect();
    let (Some(&first), Some(&last)) = (nodes.first(), nodes.last()) else {
        return Ok(());
    };
    let batch = shadow_batch(h, first, last, nodes, "clear_session", now_ms);
    h.append_atomic(batch)?;
    h.commit()?;
    Ok(())
}
