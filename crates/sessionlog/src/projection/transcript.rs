//! `transcript`: the human-readable transcript `sessionlog show` prints, kept as a
//! projection so that showing a long session costs the events after its checkpoint, not
//! the whole session. spec: format-spec/cache.md#transcript
//!
//! One block per surface message (role, text, tool calls and results), one marked line per
//! structural event, each run of streamed chunks collapsed into one line naming the
//! settlement it became. Each event's rows are rendered when it is folded and never
//! change; what later events change (whether a message is still on the surface, which
//! replacement shadowed it, which settlement a chunk run became) is kept beside the rows
//! and applied when the transcript is written.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::Value;
use sessionlog_session::{derive_message, Event, SessionHeader, SurfaceOp};

use super::bytes::{put_str, put_u64, Reader};
use super::{Projection, ProjectionError, SeqMap, SeqSet, StoredEvent};

/// At most this many characters of a text on one line.
const TEXT_CHARS: usize = 100;
/// At most this many characters of a tool call's arguments.
const ARGUMENT_CHARS: usize = 60;
/// Width of the role/kind column.
const KIND_WIDTH: usize = 10;

/// Marks in the first column.
const MARK_SURFACE: char = ' ';
const MARK_SHADOWED: char = '~';
const MARK_REPLACEMENT: char = '»';
const MARK_STRUCTURAL: char = '·';

/// No settlement (yet) for a chunk run.
const UNSETTLED: u64 = u64::MAX;

/// The `transcript` projection. Register with
/// [`StoreOptions::with_projection`](crate::StoreOptions::with_projection)`(Transcript)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Transcript;

impl Transcript {
    /// The name it is registered under.
    pub const NAME: &'static str = "transcript";
    /// The version of its fold and encoding.
    pub const VERSION: u32 = 1;
}

/// What a row is; decides its mark and what is added when it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum RowKind {
    /// A surface event with a message: its block of lines.
    Message = 0,
    /// A surface event whose message is empty.
    Empty = 1,
    /// A structural event: one line.
    Structural = 2,
    /// A run of streamed chunks, `seq..=last`.
    Stream = 3,
}

impl RowKind {
    fn from_tag(tag: u8) -> Option<RowKind> {
        Some(match tag {
            0 => RowKind::Message,
            1 => RowKind::Empty,
            2 => RowKind::Structural,
            3 => RowKind::Stream,
            _ => return None,
        })
    }
}

/// One row (or block of rows) of the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    kind: RowKind,
    seq: u64,
    /// A stream row's last chunk; else `seq`.
    last: u64,
    /// A stream row's settlement, or [`UNSETTLED`].
    settled: u64,
    /// Whether the event replaced a range (its mark is `»` while on the surface).
    replacement: bool,
    /// End of the row's text in [`SessionTranscript::text`]: the kind column, then each
    /// line, each ending in `\n`.
    end: u64,
}

/// The transcript of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionTranscript {
    rows: Vec<Row>,
    text: String,
    /// The chunk run being read: its first and last seq.
    run: Option<(u64, u64)>,
    /// Rows of chunk runs not settled yet.
    unsettled: Vec<usize>,
    /// The current surface.
    surface: SeqSet,
    /// Shadowed surface events, each with the latest replacement citing it.
    shadowed_by: SeqMap<u64>,
    /// Tool names by call id, from `tool/call` events.
    tool_names: HashMap<String, String>,
    events: u64,
    replacements: u64,
}

impl SessionTranscript {
    /// Events folded.
    pub fn events(&self) -> u64 {
        self.events
    }

    fn push_row(&mut self, kind: RowKind, event: &Event, column: &str, lines: &[String]) {
        self.text.push_str(column);
        self.text.push('\n');
        for line in lines {
            self.text.push_str(line);
            self.text.push('\n');
        }
        self.rows.push(Row {
            kind,
            seq: event.seq().get(),
            last: event.seq().get(),
            settled: UNSETTLED,
            replacement: matches!(event.surface_op(), Some(SurfaceOp::Replace { .. })),
            end: self.text.len() as u64,
        });
    }

    /// Closes the chunk run being read into a row that waits for its settlement.
    fn close_run(&mut self) {
        if let Some((first, last)) = self.run.take() {
            self.unsettled.push(self.rows.len());
            self.text.push_str("stream\n");
            self.rows.push(Row {
                kind: RowKind::Stream,
                seq: first,
                last,
                settled: UNSETTLED,
                replacement: false,
                end: self.text.len() as u64,
            });
        }
    }

    fn fold(&mut self, e: &StoredEvent<'_>) {
        let event = e.event;
        let seq = event.seq().get();
        self.events = seq + 1;
        if event.event_type() == "assistant/chunk" {
            match &mut self.run {
                Some((_, last)) => *last = seq,
                None => self.run = Some((seq, seq)),
            }
            return;
        }
        self.close_run();
        if event.event_type() == "assistant/message" {
            for row in self.unsettled.drain(..) {
                if let Some(r) = self.rows.get_mut(row) {
                    r.settled = seq;
                }
            }
        }
        if event.event_type() == "tool/call" {
            // Read in place: no JSON tree is built per appended call.
            let [id, name] = event.data().fields(["callId", "name"]);
            if let (Some(id), Some(name)) =
                (id.and_then(|v| v.as_str()), name.and_then(|v| v.as_str()))
            {
                self.tool_names.insert(id.into_owned(), name.into_owned());
            }
        }
        let surface_type = e.version.surface_type(event.event_type()).is_some();
        if surface_type {
            if let Some(SurfaceOp::Replace { .. }) = event.surface_op() {
                self.replacements += 1;
                for s in event.source_event_seqs().unwrap_or_default() {
                    if self.surface.remove(s) || self.shadowed_by.contains_key(s) {
                        self.shadowed_by.insert(*s, seq);
                    }
                }
            }
            self.surface.insert(seq);
        }
        match derive_message(e.version, event) {
            None if surface_type => {
                self.push_row(
                    RowKind::Empty,
                    event,
                    role_of(event),
                    &["(empty message)".to_owned()],
                );
            }
            None => {
                let line = structural(event);
                self.push_row(RowKind::Structural, event, kind_of(event), &[line]);
            }
            Some(message) => {
                let message: Value = serde_json::from_str(message).unwrap_or(Value::Null);
                let mut block = message_lines(event, &message, &self.tool_names);
                if let Some(SurfaceOp::Replace { start, end }) = event.surface_op() {
                    block.insert(
                        0,
                        format!(
                            "[replaces seq {start}..={end}; cites {}]",
                            cited(event.source_event_seqs().unwrap_or_default())
                        ),
                    );
                }
                self.push_row(RowKind::Message, event, role_of(event), &block);
            }
        }
    }

    /// The mark of a surface row.
    fn surface_mark(&self, row: &Row) -> char {
        if !self.surface.contains(&row.seq) {
            MARK_SHADOWED
        } else if row.replacement {
            MARK_REPLACEMENT
        } else {
            MARK_SURFACE
        }
    }

    /// Writes the transcript of the session named `name`: a heading, a legend, then the
    /// rows, aligned in columns (mark, seq, kind or role, text).
    pub fn write(&self, name: &str, out: &mut dyn Write) -> io::Result<()> {
        let seq_width = self.events.saturating_sub(1).to_string().len().max(3);
        write!(
            out,
            "session {name}: {}, {} on the surface, {} shadowed by {}\n{MARK_STRUCTURAL} structural event   {MARK_SHADOWED} shadowed by a replacement (kept in the log)   {MARK_REPLACEMENT} replacement\n\n",
            count(self.events, "event"),
            count(self.surface.len() as u64, "message"),
            self.shadowed_by.len(),
            count(self.replacements, "replacement"),
        )?;
        // Continuation lines of a block leave the mark, seq and role columns blank.
        let blank = format!("  {:seq_width$}  {:KIND_WIDTH$}  ", "", "");
        let mut start = 0usize;
        let mut line = String::with_capacity(1024);
        for row in &self.rows {
            let end = usize::try_from(row.end).unwrap_or(usize::MAX);
            let text = self.text.get(start..end).unwrap_or_default();
            start = end;
            let mut lines = text.lines();
            let column = lines.next().unwrap_or_default();
            let mark = match row.kind {
                RowKind::Message | RowKind::Empty => self.surface_mark(row),
                RowKind::Structural | RowKind::Stream => MARK_STRUCTURAL,
            };
            line.clear();
            let seq = row.seq;
            // What `{mark} {seq:>seq_width$}  {column:KIND_WIDTH$}  ` writes, without the
            // formatting machinery: this runs once per row of a session's whole history.
            line.push(mark);
            line.push(' ');
            push_u64(&mut line, seq, seq_width);
            line.push_str("  ");
            push_left(&mut line, column, KIND_WIDTH);
            line.push_str("  ");
            let prefix = line.len();
            if row.kind == RowKind::Stream {
                push_stream_line(&mut line, row);
                line.push('\n');
            } else {
                for (i, text) in lines.enumerate() {
                    if i > 0 {
                        line.push_str(&blank);
                    }
                    line.push_str(text);
                    line.push('\n');
                }
                if let (RowKind::Message, Some(by)) = (row.kind, self.shadowed_by.get(&seq)) {
                    if line.len() > prefix {
                        line.push_str(&blank);
                    }
                    line.push_str("[shadowed by seq ");
                    push_u64(&mut line, *by, 0);
                    line.push_str("]\n");
                }
            }
            if line.len() > prefix {
                out.write_all(line.as_bytes())?;
            }
        }
        // A run of chunks still being read is shown as the fold would close it.
        if let Some((first, last)) = self.run {
            let row = Row {
                kind: RowKind::Stream,
                seq: first,
                last,
                settled: UNSETTLED,
                replacement: false,
                end: 0,
            };
            let mut text = String::new();
            push_stream_line(&mut text, &row);
            writeln!(
                out,
                "{MARK_STRUCTURAL} {first:>seq_width$}  {:KIND_WIDTH$}  {text}",
                "stream",
            )?;
        }
        Ok(())
    }
}

/// The text of a stream row.
fn push_stream_line(line: &mut String, row: &Row) {
    if row.last == row.seq {
        line.push_str("1 streamed chunk (seq ");
        push_u64(line, row.seq, 0);
    } else {
        push_u64(line, row.last - row.seq + 1, 0);
        line.push_str(" streamed chunks (seq ");
        push_u64(line, row.seq, 0);
        line.push_str("..=");
        push_u64(line, row.last, 0);
    }
    if row.settled == UNSETTLED {
        line.push_str("), never settled");
    } else {
        line.push_str("), settled in seq ");
        push_u64(line, row.settled, 0);
    }
}

/// Appends `v` in decimal, right-aligned in `width` columns (as `{v:>width$}` formats it).
fn push_u64(line: &mut String, v: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut start = digits.len();
    let mut rest = v;
    loop {
        start -= 1;
        if let Some(d) = digits.get_mut(start) {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for _ in digits.len() - start..width {
        line.push(' ');
    }
    let digits = digits.get(start..).unwrap_or_default();
    line.push_str(std::str::from_utf8(digits).unwrap_or_default());
}

/// Appends `s` left-aligned in `width` columns (as `{s:width$}` formats it).
fn push_left(line: &mut String, s: &str, width: usize) {
    line.push_str(s);
    for _ in s.chars().count()..width {
        line.push(' ');
    }
}

impl Projection for Transcript {
    type State = SessionTranscript;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> u32 {
        Self::VERSION
    }

    /// The transcript's checkpoint holds every row, so it grows with the session: it is
    /// rewritten after a sixteenth more events at the earliest, which bounds the bytes
    /// rewritten to about seventeen times the final checkpoint over a session's life.
    fn checkpoint_every(&self, refresh_events: u64, events: u64) -> u64 {
        refresh_events.max(events / 16)
    }

    fn init(&self, _header: &SessionHeader) -> SessionTranscript {
        SessionTranscript::default()
    }

    fn apply(
        &self,
        state: &mut SessionTranscript,
        event: &StoredEvent<'_>,
    ) -> Result<(), ProjectionError> {
        state.fold(event);
        Ok(())
    }

    fn encode(&self, s: &SessionTranscript, out: &mut Vec<u8>) {
        put_u64(out, s.events);
        put_u64(out, s.replacements);
        put_str(out, &s.text);
        put_u64(out, s.rows.len() as u64);
        for r in &s.rows {
            out.push(r.kind as u8 | if r.replacement { 0x80 } else { 0 });
            put_u64(out, r.seq);
            put_u64(out, r.last);
            put_u64(out, r.settled);
            put_u64(out, r.end);
        }
        match s.run {
            None => out.push(0),
            Some((first, last)) => {
                out.push(1);
                put_u64(out, first);
                put_u64(out, last);
            }
        }
        put_u64(out, s.unsettled.len() as u64);
        for &row in &s.unsettled {
            put_u64(out, row as u64);
        }
        let mut surface: Vec<u64> = s.surface.iter().copied().collect();
        surface.sort_unstable();
        put_u64(out, surface.len() as u64);
        for seq in surface {
            put_u64(out, seq);
        }
        let mut shadowed: Vec<(u64, u64)> = s.shadowed_by.iter().map(|(&a, &b)| (a, b)).collect();
        shadowed.sort_unstable();
        put_u64(out, shadowed.len() as u64);
        for (seq, by) in shadowed {
            put_u64(out, seq);
            put_u64(out, by);
        }
        let mut names: Vec<(&String, &String)> = s.tool_names.iter().collect();
        names.sort_unstable();
        put_u64(out, names.len() as u64);
        for (id, name) in names {
            put_str(out, id);
            put_str(out, name);
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<SessionTranscript, ProjectionError> {
        let bad = |what: &str| ProjectionError::Undecodable(what.to_owned());
        let mut r = Reader::new(bytes);
        let events = r.u64()?;
        let replacements = r.u64()?;
        let text = r.str()?;
        let row_count = r.count(33)?;
        let mut rows = Vec::with_capacity(row_count);
        let mut previous_end = 0u64;
        for _ in 0..row_count {
            let tag = r.u8()?;
            let kind = RowKind::from_tag(tag & 0x7F).ok_or_else(|| bad("a row kind"))?;
            let row = Row {
                kind,
                replacement: tag & 0x80 != 0,
                seq: r.u64()?,
                last: r.u64()?,
                settled: r.u64()?,
                end: r.u64()?,
            };
            let in_order = rows.last().is_none_or(|p: &Row| p.last < row.seq);
            if row.end < previous_end
                || row.end > text.len() as u64
                || !text.is_char_boundary(usize::try_from(row.end).unwrap_or(usize::MAX))
                || row.last < row.seq
                || row.last >= events
                || !in_order
            {
                return Err(bad("rows out of order or past the text"));
            }
            previous_end = row.end;
            rows.push(row);
        }
        if previous_end != text.len() as u64 {
            return Err(bad("text after the last row"));
        }
        let run = match r.u8()? {
            0 => None,
            1 => Some((r.u64()?, r.u64()?)),
            _ => return Err(bad("a presence flag other than 0 or 1")),
        };
        let mut unsettled = Vec::new();
        for _ in 0..r.count(8)? {
            let row = usize::try_from(r.u64()?).map_err(|_| bad("a row index"))?;
            if rows.get(row).is_none_or(|r| r.kind != RowKind::Stream) {
                return Err(bad("an unsettled row that is no stream"));
            }
            unsettled.push(row);
        }
        let surface_count = r.count(8)?;
        let mut surface = SeqSet::with_capacity_and_hasher(surface_count, Default::default());
        for _ in 0..surface_count {
            if !surface.insert(r.u64()?) {
                return Err(bad("a surface node listed twice"));
            }
        }
        let shadowed_count = r.count(16)?;
        let mut shadowed_by = SeqMap::with_capacity_and_hasher(shadowed_count, Default::default());
        for _ in 0..shadowed_count {
            let seq = r.u64()?;
            if shadowed_by.insert(seq, r.u64()?).is_some() {
                return Err(bad("a shadowed event listed twice"));
            }
        }
        let name_count = r.count(16)?;
        let mut tool_names = HashMap::with_capacity(name_count);
        for _ in 0..name_count {
            let id = r.str()?;
            if tool_names.insert(id, r.str()?).is_some() {
                return Err(bad("a call id listed twice"));
            }
        }
        r.finish()?;
        Ok(SessionTranscript {
            rows,
            text,
            run,
            unsettled,
            surface,
            shadowed_by,
            tool_names,
            events,
            replacements,
        })
    }
}

/// `n` things, with the plural where it belongs.
fn count(n: u64, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The seqs a replacement cites: listed when few, counted when many.
fn cited(seqs: &[u64]) -> String {
    const LISTED: usize = 8;
    match seqs.len() {
        0 => "nothing".to_owned(),
        n if n <= LISTED => {
            let list: Vec<String> = seqs.iter().map(u64::to_string).collect();
            format!("seq {}", list.join(", "))
        }
        n => format!("{n} events"),
    }
}

fn json(e: &Event) -> Value {
    serde_json::from_str(e.data().raw()).unwrap_or(Value::Null)
}

fn role_of(e: &Event) -> &'static str {
    match e.event_type() {
        "user/message" => "user",
        "assistant/message" => "assistant",
        "tool/result" => "tool",
        "system/message" => "system",
        _ => "message",
    }
}

/// The lines of one message: its text blocks, reasoning, tool calls and tool results.
fn message_lines(e: &Event, message: &Value, tools: &HashMap<String, String>) -> Vec<String> {
    let mut lines = Vec::new();
    let blocks: &[Value] = match &message["content"] {
        Value::Array(blocks) => blocks,
        Value::String(text) => {
            lines.push(abbreviate(text, TEXT_CHARS));
            &[]
        }
        _ => &[],
    };
    for block in blocks {
        let kind = block["type"].as_str().unwrap_or("?");
        let line = match kind {
            "text" => abbreviate(block["text"].as_str().unwrap_or(""), TEXT_CHARS),
            "reasoning" => format!(
                "(reasoning) {}",
                abbreviate(block["text"].as_str().unwrap_or(""), TEXT_CHARS)
            ),
            "tool-call" => format!(
                "→ calls {}({}) [{}]",
                block["name"].as_str().unwrap_or("?"),
                abbreviate(&arguments(&block["arguments"]), ARGUMENT_CHARS),
                block["id"].as_str().unwrap_or("?")
            ),
            "tool-result" => tool_result(block, tools),
            other => format!("[{other} block]"),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        lines.push(format!("({} with no content)", e.event_type()));
    }
    lines
}

/// Arguments as one line: a JSON string's text, or any other value's JSON.
fn arguments(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn tool_result(block: &Value, tools: &HashMap<String, String>) -> String {
    let id = block["toolCallId"].as_str().unwrap_or("?");
    let name = tools.get(id).map_or("?", String::as_str);
    let status = if block["isError"].as_bool() == Some(true) {
        "error"
    } else {
        "ok"
    };
    let text: Vec<&str> = block["content"]
        .as_array()
        .map(|items| items.iter().filter_map(|i| i["text"].as_str()).collect())
        .unwrap_or_default();
    format!(
        "← {name} [{id}] {status}: {}",
        abbreviate(&text.join(" "), TEXT_CHARS)
    )
}

/// The kind column of a structural event: the part of its type before the slash.
fn kind_of(e: &Event) -> &str {
    e.event_type()
        .split('/')
        .next()
        .unwrap_or_else(|| e.event_type())
}

/// One line for a structural event: what it says, in words where its type is common.
fn structural(e: &Event) -> String {
    let d = json(e);
    let num = |v: &Value| v.as_u64().map_or_else(|| "?".to_owned(), |n| n.to_string());
    let ty = e.event_type();
    match ty {
        // The legacy upgrade spreads `trigger` into the payload; older logs nest it.
        "turn/start" => {
            let trigger = d["kind"].as_str().or_else(|| d["trigger"]["kind"].as_str());
            match trigger {
                Some(t) => format!("turn {} starts ({t})", num(&d["turn"])),
                None => format!("turn {} starts", num(&d["turn"])),
            }
        }
        "turn/end" => format!(
            "turn {} ends: {}",
            num(&d["turn"]),
            d["reason"]["kind"]
                .as_str()
                .or_else(|| d["reason"].as_str())
                .unwrap_or("?")
        ),
        "step/start" => format!("step {}.{} starts", num(&d["turn"]), num(&d["step"])),
        "step/end" => format!("step {}.{} ends", num(&d["turn"]), num(&d["step"])),
        "request/header" => {
            let config = &d["header"]["config"];
            format!(
                "request to {}/{} ({})",
                config["provider"].as_str().unwrap_or("?"),
                config["model"].as_str().unwrap_or("?"),
                d["reason"].as_str().unwrap_or("?")
            )
        }
        "tool/call" => format!(
            "tool call {} [{}]",
            d["name"].as_str().unwrap_or("?"),
            d["callId"].as_str().unwrap_or("?")
        ),
        // Anything else: the type and its payload as written, abbreviated.
        _ => format!("{ty} {}", abbreviate(e.data().raw(), ARGUMENT_CHARS)),
    }
}

/// `text` on one line (control characters as spaces, runs of whitespace as one space), cut
/// to `max` characters with an ellipsis.
pub fn abbreviate(text: &str, max: usize) -> String {
    let mut one_line = String::with_capacity(text.len().min(max * 4));
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !one_line.is_empty();
            continue;
        }
        if space {
            one_line.push(' ');
            space = false;
        }
        one_line.push(c);
        if one_line.chars().count() > max {
            break;
        }
    }
    if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::{abbreviate, push_left, push_u64, KIND_WIDTH};

    #[test]
    fn abbreviation_keeps_one_line_and_marks_the_cut() {
        assert_eq!(abbreviate("a\n\n b\tc", 10), "a b c");
        assert_eq!(abbreviate("abcdefghijk", 5), "abcde…");
        assert_eq!(abbreviate("  lead", 10), "lead");
        assert_eq!(abbreviate("", 10), "");
    }

    #[test]
    fn columns_are_padded_as_the_format_widths_pad_them() {
        for v in [0, 7, 10, 999, 1_000, 123_456_789, u64::MAX] {
            for width in [0, 1, 3, 7, 25] {
                let mut line = String::from("x");
                push_u64(&mut line, v, width);
                assert_eq!(line, format!("x{v:>width$}"), "{v} in {width}");
            }
        }
        for s in [
            "",
            "user",
            "assistant",
            "turn/start",
            "a-very-long-kind-name",
            "réponse·»",
        ] {
            let mut line = String::new();
            push_left(&mut line, s, KIND_WIDTH);
            assert_eq!(line, format!("{s:KIND_WIDTH$}"), "{s}");
        }
    }
}
