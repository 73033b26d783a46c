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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{self, Write};

use bytes::Bytes;
use sessionlog_session::json::{JsonKind, JsonRef};
use sessionlog_session::{
    derive_surface_content, Event, MessageLocation, Seq, SessionHeader, SurfaceOp,
};

use super::bytes::{put_str, put_u64, Reader};
use super::{Projection, ProjectionError, SeqSet, StoredEvent};

mod chunks;
mod stored;
mod text;

use chunks::{RecordChunks, TextChunks};
use stored::{Cursor, Stored};
pub use text::abbreviate;
use text::{
    abbreviate_into, abbreviate_value, literal_inner, plain_prefix, push_left, push_u64, Lines,
};

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
    pub const VERSION: u32 = 4;
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
    /// End of the row's text in the transcript's text (the stored text, then the text of
    /// rows folded after it): the kind column, then each line, each ending in `\n`.
    end: u64,
}

impl Row {
    /// The row as the checkpoint stores it. spec: cache.md#transcript
    fn encode(&self) -> [u8; stored::ROW_BYTES] {
        let mut b = [0u8; stored::ROW_BYTES];
        b[0] = self.kind as u8 | if self.replacement { 0x80 } else { 0 };
        for (at, v) in [
            (1, self.seq),
            (9, self.last),
            (stored::ROW_SETTLED, self.settled),
            (25, self.end),
        ] {
            if let Some(field) = b.get_mut(at..at + 8) {
                field.copy_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    /// A row as [`Row::encode`] stored it, if its kind is known.
    fn decode(b: &[u8]) -> Option<Row> {
        let tag = *b.first()?;
        let u64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(b.get(at..at + 8)?);
            Some(u64::from_le_bytes(v))
        };
        Some(Row {
            kind: RowKind::from_tag(tag & 0x7F)?,
            replacement: tag & 0x80 != 0,
            seq: u64_at(1)?,
            last: u64_at(9)?,
            settled: u64_at(stored::ROW_SETTLED)?,
            end: u64_at(25)?,
        })
    }
}

/// Rows folded after the checkpoint, kept as the checkpoint stores them, so that writing a
/// checkpoint copies them instead of encoding each again: a writer rewrites a long
/// session's checkpoint many times over.
#[derive(Clone, Default)]
struct RowTable(RecordChunks<{ stored::ROW_BYTES }, ROWS_PER_CHUNK>);

/// Rows in a chunk of the row table (about 66 KB; fewer in unit tests, so that short
/// sessions cross chunks).
const ROWS_PER_CHUNK: usize = if cfg!(test) { 16 } else { 2048 };

impl RowTable {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, row: Row) {
        self.0.push(row.encode());
    }

    fn get(&self, i: usize) -> Option<Row> {
        Row::decode(self.0.get(i)?)
    }

    /// Sets row `i`'s settlement.
    fn settle(&mut self, i: usize, by: u64) {
        let at = stored::ROW_SETTLED;
        if let Some(field) = self.0.get_mut(i).and_then(|r| r.get_mut(at..at + 8)) {
            field.copy_from_slice(&by.to_le_bytes());
        }
    }

    /// The bytes of rows `range`, as pieces in order.
    fn pieces(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &[u8]> {
        self.0.pieces(range)
    }
}

/// Tool names by call id, for the rows of results: the latest call with an id names its
/// tool. A result usually follows its call closely, so the calls folded last are looked
/// through first, newest first, in the checkpoint's list of calls (no copy of a name is
/// made for them); a result whose call is older has a map of every call built, once, then
/// extended by the calls folded since.
#[derive(Clone, Default)]
struct ToolNames {
    /// Where the last [`RECENT_CALLS`] calls folded since the checkpoint begin in its list
    /// of calls, oldest first.
    recent: std::collections::VecDeque<usize>,
    /// Every call's tool by id, the stored calls and those folded since up to `mapped`
    /// bytes of their list; built on the first look-up the recent calls do not answer.
    map: Option<HashMap<String, String>>,
    mapped: usize,
}

/// Calls [`ToolNames`] looks through before its map.
const RECENT_CALLS: usize = 32;

impl ToolNames {
    /// A call was folded; its id and tool begin at `at` in the list of calls.
    fn called(&mut self, at: usize) {
        if self.recent.len() == RECENT_CALLS {
            self.recent.pop_front();
        }
        self.recent.push_back(at);
    }

    /// The tool of the latest call with id `id`: `stored` holds the checkpoint's calls and
    /// `names` those folded since, each an id then a tool name.
    fn find<'a>(
        &'a mut self,
        stored: &Stored,
        names: &'a [u8],
        id: &str,
    ) -> Result<Option<&'a str>, ProjectionError> {
        for &at in self.recent.iter().rev() {
            let mut r = Reader::new(names.get(at..).unwrap_or_default());
            if r.str_bytes()? == id.as_bytes() {
                let tool = std::str::from_utf8(r.str_bytes()?)
                    .map_err(|_| ProjectionError::Undecodable("text that is not UTF-8".into()))?;
                return Ok(Some(tool));
            }
        }
        if self.map.is_none() {
            self.mapped = 0;
            // In the order of the calls: a call id called again names the later call's
            // tool.
            self.map = Some(stored.name_pairs()?.into_iter().collect());
        }
        let map = self.map.get_or_insert_with(HashMap::new);
        let mut r = Reader::new(names.get(self.mapped..).unwrap_or_default());
        while !r.rest().is_empty() {
            let call = String::from_utf8_lossy(r.str_bytes()?).into_owned();
            let tool = String::from_utf8_lossy(r.str_bytes()?).into_owned();
            map.insert(call, tool);
        }
        self.mapped = names.len();
        Ok(map.get(id).map(String::as_str))
    }
}

/// Surface events added since the checkpoint, in seq order (a checkpoint lists them in
/// order, and they are folded in order): a list they are pushed onto, and the set of those
/// that left the surface since, dropped from the list once it holds half of it, so that a
/// replacement taking many of them off costs a lookup each, not a shift of the list.
#[derive(Clone, Default)]
struct AddedSurface {
    seqs: Vec<u64>,
    left: SeqSet,
}

impl AddedSurface {
    /// Adds `seq`, above every seq added before.
    fn push(&mut self, seq: u64) {
        self.seqs.push(seq);
    }

    fn contains(&self, seq: u64) -> bool {
        self.seqs.binary_search(&seq).is_ok() && !self.left.contains(&seq)
    }

    /// Takes `seq` off; whether it was on.
    fn remove(&mut self, seq: u64) -> bool {
        if !self.contains(seq) {
            return false;
        }
        self.left.insert(seq);
        if self.left.len() * 2 > self.seqs.len() {
            let left = std::mem::take(&mut self.left);
            self.seqs.retain(|s| !left.contains(s));
        }
        true
    }

    fn len(&self) -> usize {
        self.seqs.len() - self.left.len()
    }

    /// The seqs on the surface, increasing.
    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let left = (!self.left.is_empty()).then_some(&self.left);
        self.seqs
            .iter()
            .copied()
            .filter(move |s| left.is_none_or(|l| !l.contains(s)))
    }
}

/// Shadowed seqs with the replacement that shadowed each, by seq. A replacement's sources
/// are mostly above every seq shadowed before (a summary cites the surface, which holds
/// nothing older than what earlier summaries shadowed), so most are appended to a sorted
/// list, costing a comparison where a tree costs a walk and a node; a seq below the list's
/// last that is not in it goes to a tree beside it, so no order of sources makes inserts
/// shift the list. Each seq is in one of the two.
#[derive(Clone, Default)]
struct ShadowedBy {
    appended: Vec<(u64, u64)>,
    others: BTreeMap<u64, u64>,
}

impl ShadowedBy {
    fn appended_at(&self, seq: u64) -> Option<usize> {
        match self.appended.last() {
            Some(&(last, _)) if last >= seq => {
                self.appended.binary_search_by_key(&seq, |&(s, _)| s).ok()
            }
            _ => None,
        }
    }

    fn get(&self, seq: u64) -> Option<u64> {
        match self.appended_at(seq) {
            Some(i) => self.appended.get(i).map(|&(_, by)| by),
            None => self.others.get(&seq).copied(),
        }
    }

    /// Sets `seq`'s replacement; whether `seq` was not listed before.
    fn insert(&mut self, seq: u64, by: u64) -> bool {
        if let Some(pair) = self.appended_at(seq).and_then(|i| self.appended.get_mut(i)) {
            pair.1 = by;
            return false;
        }
        // Every seq in the tree is below the list's last.
        if self.appended.last().is_none_or(|&(last, _)| last < seq) {
            self.appended.push((seq, by));
            return true;
        }
        self.others.insert(seq, by).is_none()
    }
}

/// The transcript of one session.
///
/// A transcript handed back from a checkpoint keeps the checkpoint's bytes and reads its
/// rows, surface and shadowed events in place; what later events add or change is kept
/// beside them. Two transcripts are equal when their checkpoints would be.
#[derive(Clone, Default)]
pub struct SessionTranscript {
    /// What the checkpoint held (empty when folded from the first event).
    stored: Stored,
    /// Rows folded after the checkpoint.
    rows: RowTable,
    /// Their text; offsets continue the stored text's.
    text: TextChunks,
    /// The chunk run being read: its first and last seq.
    run: Option<(u64, u64)>,
    /// Rows of chunk runs not settled yet.
    unsettled: Vec<usize>,
    /// Surface events added since the checkpoint (kept in order, since a checkpoint lists
    /// them in order).
    surface_added: AddedSurface,
    /// Stored surface events that left the surface since the checkpoint.
    surface_removed: SeqSet,
    /// Shadowed events set since the checkpoint, each with the latest replacement citing
    /// it (over the stored ones).
    shadowed_by: ShadowedBy,
    /// Shadowed events in all.
    shadowed: u64,
    /// Tool names by call id, for the rows of results.
    tool_names: ToolNames,
    /// Call ids and tool names of the calls folded since the checkpoint, in order, as
    /// the checkpoint's appended part lists them.
    names: Vec<u8>,
    /// The shadowings folded since the checkpoint (seq, then the replacement that shadowed
    /// it), in the order they were folded, as the checkpoint's appended part lists them.
    shadowings: Vec<u8>,
    events: u64,
    replacements: u64,
}

impl fmt::Debug for SessionTranscript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionTranscript")
            .field("events", &self.events)
            .field("rows", &self.row_count())
            .field("surface", &self.surface_count())
            .field("shadowed", &self.shadowed)
            .field("replacements", &self.replacements)
            .finish_non_exhaustive()
    }
}

impl PartialEq for SessionTranscript {
    fn eq(&self, other: &Self) -> bool {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        Transcript.encode(self, &mut a);
        Transcript.encode(other, &mut b);
        a == b
    }
}

impl Eq for SessionTranscript {}

impl SessionTranscript {
    /// Events folded.
    pub fn events(&self) -> u64 {
        self.events
    }

    fn row_count(&self) -> usize {
        self.stored.row_count() + self.rows.len()
    }

    /// Row `i` and the bytes of its text.
    fn row(&self, i: usize, start: u64) -> Option<(Row, &[u8])> {
        let stored = self.stored.row_count();
        let base = self.stored.text.len() as u64;
        let row = match i.checked_sub(stored) {
            None => self.stored.row(i)?,
            Some(j) => self.rows.get(j)?,
        };
        let text = if row.end <= base {
            self.stored.text.get(to_usize(start)..to_usize(row.end))
        } else {
            self.text
                .get(to_usize(start.saturating_sub(base))..to_usize(row.end - base))
                .map(str::as_bytes)
        };
        Some((row, text.unwrap_or_default()))
    }

    fn surface_count(&self) -> usize {
        self.stored.surface_count() - self.surface_removed.len() + self.surface_added.len()
    }

    /// Takes `seq` off the surface; whether it was on it.
    fn leave_surface(&mut self, seq: u64) -> bool {
        self.surface_added.remove(seq)
            || (self.stored.on_surface(seq) && self.surface_removed.insert(seq))
    }

    fn shadowed_by(&self, seq: u64) -> Option<u64> {
        self.shadowed_by
            .get(seq)
            .or_else(|| self.stored.shadowed_by(seq))
    }

    fn shadow(&mut self, seq: u64, by: u64) {
        let stored = self.stored.shadowed_by(seq).is_some();
        if self.shadowed_by.insert(seq, by) && !stored {
            self.shadowed += 1;
        }
        put_u64(&mut self.shadowings, seq);
        put_u64(&mut self.shadowings, by);
    }

    /// The tool of the latest call with id `id`, if a call had it.
    fn tool_name(&mut self, id: &str) -> Result<Option<&str>, ProjectionError> {
        self.tool_names.find(&self.stored, &self.names, id)
    }

    /// End of the text so far.
    fn text_end(&self) -> u64 {
        (self.stored.text.len() + self.text.len()) as u64
    }

    /// Adds a row whose text (the kind column, then its lines) was just appended.
    fn push_row(&mut self, kind: RowKind, event: &Event) {
        let end = self.text_end();
        self.rows.push(Row {
            kind,
            seq: event.seq().get(),
            last: event.seq().get(),
            settled: UNSETTLED,
            replacement: matches!(event.surface_op(), Some(SurfaceOp::Replace { .. })),
            end,
        });
    }

    /// Closes the chunk run being read into a row that waits for its settlement.
    fn close_run(&mut self) {
        if let Some((first, last)) = self.run.take() {
            self.unsettled.push(self.row_count());
            self.text.for_row().push_str("stream\n");
            let end = self.text_end();
            self.rows.push(Row {
                kind: RowKind::Stream,
                seq: first,
                last,
                settled: UNSETTLED,
                replacement: false,
                end,
            });
        }
    }

    /// Settles every chunk run not settled yet, all of them rows folded or held since the
    /// checkpoint (the stored ones are final).
    fn settle(&mut self, seq: u64) {
        let stored = self.stored.row_count();
        for row in std::mem::take(&mut self.unsettled) {
            if let Some(j) = row.checked_sub(stored) {
                self.rows.settle(j, seq);
            }
        }
    }

    /// Rows before the first chunk run not settled yet: they never change again, and are
    /// the checkpoint's appended row table. The others are held in the rest.
    fn final_rows(&self) -> usize {
        self.unsettled
            .iter()
            .copied()
            .min()
            .unwrap_or_else(|| self.row_count())
    }

    /// How many of the rows folded since the checkpoint are final (the rest of them are
    /// held).
    fn final_folded_rows(&self) -> usize {
        self.final_rows().saturating_sub(self.stored.row_count())
    }

    /// Accounts for events `self.events..events`, which the fold was not handed: the
    /// projection skips streamed chunks by kind, so they are chunks, and extend the run
    /// being read or begin one.
    fn skip_to(&mut self, events: u64) {
        if events <= self.events {
            return;
        }
        let first = self.run.map_or(self.events, |(first, _)| first);
        self.run = Some((first, events - 1));
        self.events = events;
    }

    fn fold(&mut self, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let event = e.event;
        let seq = event.seq().get();
        // Chunks skipped since the last event folded end just before this one.
        self.skip_to(seq);
        self.events = seq + 1;
        let event_type = event.event_type();
        if event_type == "assistant/chunk" {
            match &mut self.run {
                Some((_, last)) => *last = seq,
                None => self.run = Some((seq, seq)),
            }
            return Ok(());
        }
        self.close_run();
        if event_type == "assistant/message" {
            self.settle(seq);
        }
        // A call's name and id, read once: for its row and for the rows of its results.
        let call = (event_type == "tool/call").then(|| {
            let [name, id] = event.data_fields(["name", "callId"]);
            [text_of(name), text_of(id)]
        });
        if let Some([Some(name), Some(id)]) = &call {
            self.tool_names.called(self.names.len());
            put_str(&mut self.names, id);
            put_str(&mut self.names, name);
        }
        // Only an event whose kind tag says so can be of a surface type: the others are
        // not looked for among them.
        let surface = sessionlog_session::is_surface_kind(e.kind)
            .then(|| e.version.surface_type(event_type))
            .flatten();
        if surface.is_some() {
            if let Some(SurfaceOp::Replace { .. }) = event.surface_op() {
                self.replacements += 1;
                for s in event.source_event_seqs().unwrap_or_default() {
                    let s = s.get();
                    if self.leave_surface(s) || self.shadowed_by(s).is_some() {
                        self.shadow(s, seq);
                    }
                }
            }
            self.surface_added.push(seq);
        }
        // Only an event of a surface type derives a message.
        // The writer's state found it as it folded the event, or it is looked for here.
        let derived = surface.and_then(|surface| {
            e.message
                .unwrap_or_else(|| derive_surface_content(surface, event))
                .map(|(_, content)| (surface.message, content))
        });
        match derived {
            None if surface.is_some() => {
                let text = self.text.for_row();
                push_line(text, role_of(event_type));
                push_line(text, "(empty message)");
                self.push_row(RowKind::Empty, event);
            }
            None => {
                let text = self.text.for_row();
                push_line(text, kind_of(event_type));
                match &call {
                    Some([name, id]) => tool_call_line(text, name, id),
                    None => structural(text, event_type, event),
                }
                text.push('\n');
                self.push_row(RowKind::Structural, event);
            }
            Some((location, content)) => {
                // The row's chunk is taken out while the lines are written, which read the
                // rest of the transcript (the tool names).
                let mut text = self.text.take_for_row();
                push_line(&mut text, role_of(event_type));
                if let Some(SurfaceOp::Replace { start, end }) = event.surface_op() {
                    text.push_str("[replaces seq ");
                    push_u64(&mut text, start.get(), 0);
                    text.push_str("..=");
                    push_u64(&mut text, end.get(), 0);
                    text.push_str("; cites ");
                    cited(&mut text, event.source_event_seqs().unwrap_or_default());
                    text.push_str("]\n");
                }
                let written = message_lines(&mut text, content, event, location, self);
                if matches!(written, Ok(false)) {
                    text.push('(');
                    text.push_str(event_type);
                    text.push_str(" with no content)\n");
                }
                self.text.put_back(text);
                written?;
                self.push_row(RowKind::Message, event);
            }
        }
        Ok(())
    }

    /// The mark of a surface row; `stored` walks the stored surface.
    fn surface_mark(&self, row: &Row, stored: &mut Cursor<'_>) -> char {
        let seq = row.seq;
        let on_surface = self.surface_added.contains(seq)
            || (stored.find(seq).is_some() && !self.surface_removed.contains(&seq));
        if !on_surface {
            MARK_SHADOWED
        } else if row.replacement {
            MARK_REPLACEMENT
        } else {
            MARK_SURFACE
        }
    }

    /// Writes the transcript of the session named `name`: a heading, a legend, then the
    /// rows, aligned in columns (mark, seq, kind or role, text). A row of a checkpoint
    /// whose text is not UTF-8 is an [`io::ErrorKind::InvalidData`] error.
    pub fn write(&self, name: &str, out: &mut dyn Write) -> io::Result<()> {
        let seq_width = self.events.saturating_sub(1).to_string().len().max(3);
        write!(
            out,
            "session {name}: {}, {} on the surface, {} shadowed by {}\n{MARK_STRUCTURAL} structural event   {MARK_SHADOWED} shadowed by a replacement (kept in the log)   {MARK_REPLACEMENT} replacement\n\n",
            count(self.events, "event"),
            count(self.surface_count() as u64, "message"),
            self.shadowed,
            count(self.replacements, "replacement"),
        )?;
        // Continuation lines of a block leave the mark, seq and role columns blank.
        let blank = format!("  {:seq_width$}  {:KIND_WIDTH$}  ", "", "");
        let mut start = 0u64;
        // Rows are gathered into chunks of about `CHUNK_BYTES` and each chunk is written with
        // one call: a row at a time, a buffered writer copies every byte once more and is
        // called once per row of the session's whole history.
        const CHUNK_BYTES: usize = 64 << 10;
        let mut line = String::with_capacity(CHUNK_BYTES + 4096);
        // Rows come in seq order: the stored surface and shadowed events are walked along.
        let mut surface = self.stored.surface_cursor();
        let mut shadowed = self.stored.shadowed_cursor();
        // The stored text is checked to be UTF-8 in one pass when it is (rows end at
        // character boundaries, which decoding checked); otherwise each row is checked as
        // it is written, and the first that is not UTF-8 is named.
        let stored_text = std::str::from_utf8(&self.stored.text).ok();
        let base = self.stored.text.len() as u64;
        for i in 0..self.row_count() {
            let Some((row, bytes)) = self.row(i, start) else {
                break;
            };
            let checked = if row.end <= base {
                stored_text.and_then(|t| t.get(to_usize(start)..to_usize(row.end)))
            } else {
                self.text
                    .get(to_usize(start.saturating_sub(base))..to_usize(row.end - base))
            };
            start = row.end;
            let text = match checked {
                Some(text) => text,
                None => std::str::from_utf8(bytes).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the transcript checkpoint's row of seq {} is not UTF-8; delete the store's cache directory to rebuild it", row.seq),
                    )
                })?,
            };
            let mut lines = Lines(text);
            let column = lines.next().unwrap_or_default();
            let mark = match row.kind {
                RowKind::Message | RowKind::Empty => self.surface_mark(&row, &mut surface),
                RowKind::Structural | RowKind::Stream => MARK_STRUCTURAL,
            };
            let row_start = line.len();
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
                push_stream_line(&mut line, &row);
                line.push('\n');
            } else {
                for (i, text) in lines.enumerate() {
                    if i > 0 {
                        line.push_str(&blank);
                    }
                    line.push_str(text);
                    line.push('\n');
                }
                let by = match row.kind {
                    RowKind::Message => self
                        .shadowed_by
                        .get(seq)
                        .or_else(|| shadowed.find(seq).map(|i| shadowed.value(i))),
                    _ => None,
                };
                if let Some(by) = by {
                    if line.len() > prefix {
                        line.push_str(&blank);
                    }
                    line.push_str("[shadowed by seq ");
                    push_u64(&mut line, by, 0);
                    line.push_str("]\n");
                }
            }
            if line.len() == prefix {
                // A row with no line writes nothing.
                line.truncate(row_start);
            }
            if line.len() >= CHUNK_BYTES {
                out.write_all(line.as_bytes())?;
                line.clear();
            }
        }
        out.write_all(line.as_bytes())?;
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

    /// Reads a checkpoint from its rest and its appended parts (the row text, the final
    /// rows, the tool names, the shadowings), keeping the bytes: rows, text, surface,
    /// shadowed events and names are checked here and read in place later (the shadowings
    /// through a sorted copy, when they were not folded in seq order); the rows held in the
    /// rest (from the first chunk run not settled on) are taken into the rows folded since.
    /// spec: cache.md#transcript
    fn decode_parts(
        rest: Bytes,
        [text, rows, names, shadowings]: [Bytes; 4],
    ) -> Result<SessionTranscript, ProjectionError> {
        let bad = |what: &str| ProjectionError::Undecodable(what.to_owned());
        if rows.len() % stored::ROW_BYTES != 0 {
            return Err(bad("a row table that is no whole number of rows"));
        }
        let mut r = Reader::new(&rest);
        let events = r.u64()?;
        let replacements = r.u64()?;
        let final_rows = rows.len() / stored::ROW_BYTES;
        let row_count = usize::try_from(r.u64()?).map_err(|_| bad("a row count"))?;
        let held_count = row_count
            .checked_sub(final_rows)
            .ok_or_else(|| bad("fewer rows than the row table holds"))?;
        let held = r.take(
            held_count
                .checked_mul(stored::ROW_BYTES)
                .ok_or_else(|| bad("a row count"))?,
        )?;
        let mut stored = Stored::read(text, rows, held, events)?;
        let held = RowTable(RecordChunks::from_bytes(held));
        let run = match r.u8()? {
            0 => None,
            1 => Some((r.u64()?, r.u64()?)),
            _ => return Err(bad("a presence flag other than 0 or 1")),
        };
        let mut unsettled = Vec::new();
        for _ in 0..r.count(8)? {
            let row = usize::try_from(r.u64()?).map_err(|_| bad("a row index"))?;
            let held_row = row.checked_sub(final_rows).and_then(|j| held.get(j));
            if held_row.is_none_or(|r| r.kind != RowKind::Stream) {
                return Err(bad("an unsettled row that is no held stream"));
            }
            unsettled.push(row);
        }
        // The rest holds the rows from the first unsettled one on, and no others.
        if unsettled.iter().copied().min().unwrap_or(row_count) != final_rows {
            return Err(bad(
                "held rows that do not begin at the first unsettled one",
            ));
        }
        stored.read_surface(&rest, &mut r, events)?;
        r.finish()?;
        stored.read_names(names)?;
        stored.read_shadowings(shadowings, events)?;
        Ok(SessionTranscript {
            shadowed: stored.shadowed_count() as u64,
            stored,
            rows: held,
            run,
            unsettled,
            events,
            replacements,
            ..SessionTranscript::default()
        })
    }

    /// The checkpoint's appended parts: the row text; the rows before the first chunk run
    /// not settled yet, the stored ones and those folded since, handed over as kept; the
    /// tool names of the calls, in their order; the shadowings, in the order they were
    /// folded. All only grow, since rows before that run never change and a shadowing
    /// changed later is listed again. spec: cache.md#transcript
    fn parts(&self) -> [Vec<&[u8]>; 4] {
        let folded = self.final_folded_rows();
        let text = std::iter::once(&self.stored.text[..]).chain(self.text.pieces());
        let rows = std::iter::once(self.stored.row_bytes()).chain(self.rows.pieces(0..folded));
        [
            text.collect(),
            rows.collect(),
            vec![self.stored.name_bytes(), &self.names],
            vec![self.stored.shadowing_bytes(), &self.shadowings],
        ]
    }

    /// The rest of the checkpoint, after the appended parts: events, replacements and rows
    /// counted, the rows held (from the first chunk run not settled on), then the run being
    /// read, the unsettled runs and the surface.
    fn rest(&self) -> Vec<Cow<'_, [u8]>> {
        let mut head = Vec::with_capacity(24);
        put_u64(&mut head, self.events);
        put_u64(&mut head, self.replacements);
        put_u64(&mut head, self.row_count() as u64);
        let folded = self.final_folded_rows();
        let mut pieces = vec![Cow::Owned(head)];
        pieces.extend(self.rows.pieces(folded..usize::MAX).map(Cow::Borrowed));
        pieces.push(Cow::Owned(self.tail()));
        pieces
    }

    /// The bytes [`SessionTranscript::rest`] would write, without writing them.
    fn rest_len(&self) -> u64 {
        let rows = self.rows.len().saturating_sub(self.final_folded_rows());
        let run = if self.run.is_some() { 17 } else { 1 };
        let tail = run + 8 + self.unsettled.len() * 8 + 8 + self.surface_count() * 8;
        (24 + rows * stored::ROW_BYTES + tail) as u64
    }

    /// The part of the checkpoint after the rows: the chunk run being read, the unsettled
    /// runs and the surface.
    fn tail(&self) -> Vec<u8> {
        let mut bytes =
            Vec::with_capacity(40 + self.unsettled.len() * 8 + self.surface_count() * 8);
        let out = &mut bytes;
        match self.run {
            None => out.push(0),
            Some((first, last)) => {
                out.push(1);
                put_u64(out, first);
                put_u64(out, last);
            }
        }
        put_u64(out, self.unsettled.len() as u64);
        for &row in &self.unsettled {
            put_u64(out, row as u64);
        }
        // Seqs added since the checkpoint are all above the stored ones.
        put_u64(out, self.surface_count() as u64);
        if self.surface_removed.is_empty() {
            out.extend_from_slice(self.stored.surface_bytes());
        } else {
            for seq in self
                .stored
                .surface()
                .filter(|s| !self.surface_removed.contains(s))
            {
                put_u64(out, seq);
            }
        }
        for seq in self.surface_added.iter() {
            put_u64(out, seq);
        }
        bytes
    }
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Appends `text` and a line end.
fn push_line(out: &mut String, text: &str) {
    out.push_str(text);
    out.push('\n');
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

impl Projection for Transcript {
    type State = SessionTranscript;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> u32 {
        Self::VERSION
    }

    /// The transcript's text and the rows that never change again are appended parts,
    /// written once; each checkpoint rewrites only the rest (the rows still open, the runs
    /// unsettled and the surface), so it is written often while that is small.
    fn checkpoint_every(&self, s: &SessionTranscript, refresh_events: u64, events: u64) -> u64 {
        super::appended_checkpoint_every(refresh_events, events, s.rest_len())
    }

    /// Streamed chunks are not handed to the fold: all it keeps of them is where each run
    /// begins and ends, which the events around them tell ([`Projection::skipped`] tells of
    /// a run still being read at the end).
    fn wants(&self, kind: u8) -> bool {
        kind != sessionlog_session::codec::kind::ASSISTANT_CHUNK
    }

    /// The fold counts no tokens.
    fn reads_estimates(&self) -> bool {
        false
    }

    fn skipped(&self, state: &mut SessionTranscript, events: u64) {
        state.skip_to(events);
    }

    fn init(&self, _header: &SessionHeader) -> SessionTranscript {
        SessionTranscript::default()
    }

    fn apply(
        &self,
        state: &mut SessionTranscript,
        event: &StoredEvent<'_>,
    ) -> Result<(), ProjectionError> {
        state.fold(event)
    }

    /// The checkpoint in one buffer: each appended part after its length (8 bytes), then
    /// the rest.
    fn encode(&self, s: &SessionTranscript, out: &mut Vec<u8>) {
        super::encode_with_parts(self, s, out);
    }

    /// The rest of the checkpoint, after its appended parts.
    fn encode_pieces<'s>(&self, s: &'s SessionTranscript, pieces: &mut Vec<Cow<'s, [u8]>>) {
        pieces.extend(s.rest());
    }

    fn decode(&self, bytes: &[u8]) -> Result<SessionTranscript, ProjectionError> {
        self.decode_shared(Bytes::copy_from_slice(bytes))
    }

    /// Keeps `bytes` and reads the rows in place, so that handing a long transcript back
    /// costs a check of its structure rather than a copy of its rows.
    fn decode_shared(&self, bytes: Bytes) -> Result<SessionTranscript, ProjectionError> {
        super::decode_with_parts(self, bytes)
    }

    /// The row text, the rows that never change again, the tool names and the shadowings.
    fn appended_parts(&self) -> usize {
        4
    }

    fn appended<'s>(&self, s: &'s SessionTranscript, parts: &mut Vec<Vec<&'s [u8]>>) {
        parts.extend(s.parts());
    }

    fn decode_appended(
        &self,
        rest: Bytes,
        parts: Vec<Bytes>,
    ) -> Result<SessionTranscript, ProjectionError> {
        let parts: [Bytes; 4] = parts
            .try_into()
            .map_err(|_| ProjectionError::Undecodable("not four appended parts".into()))?;
        SessionTranscript::decode_parts(rest, parts)
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

/// Appends the seqs a replacement cites: listed when few, counted when many.
fn cited(out: &mut String, seqs: &[Seq]) {
    const LISTED: usize = 8;
    match seqs.len() {
        0 => out.push_str("nothing"),
        n if n <= LISTED => {
            out.push_str("seq ");
            for (i, &seq) in seqs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_u64(out, seq.get(), 0);
            }
        }
        n => {
            push_u64(out, n as u64, 0);
            out.push_str(" events");
        }
    }
}

fn role_of(event_type: &str) -> &'static str {
    match event_type {
        "user/message" => "user",
        "assistant/message" => "assistant",
        "tool/result" => "tool",
        "system/message" => "system",
        _ => "message",
    }
}

/// A block's `type`: the kinds a transcript renders compared as they are spelled, without
/// decoding them (this runs for every block of every message folded); any other value
/// read as [`text_of`] reads it.
fn block_kind<'a>(value: Option<JsonRef<'a>>) -> Option<Cow<'a, str>> {
    let value = value?;
    let raw = value.raw();
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or_default();
    match inner {
        known @ ("text" | "reasoning" | "tool-call" | "tool-result") => Some(Cow::Borrowed(known)),
        _ => value.as_str(),
    }
}

/// A string member's text, read in place.
fn text_of<'a>(value: Option<JsonRef<'a>>) -> Option<std::borrow::Cow<'a, str>> {
    value.and_then(|v| v.as_str())
}

/// Appends the lines of one message's `content` (its text blocks, reasoning, tool calls
/// and tool results), each ending in a line end; whether it wrote any. Reads the message's
/// JSON in place: no tree is built per folded event.
fn message_lines<'e>(
    out: &mut String,
    content: Option<JsonRef<'e>>,
    event: &'e Event,
    location: MessageLocation,
    transcript: &mut SessionTranscript,
) -> Result<bool, ProjectionError> {
    let Some(content) = content else {
        return Ok(false);
    };
    if content.as_str().is_some() {
        abbreviate_value(out, Some(content), TEXT_CHARS);
        out.push('\n');
        return Ok(true);
    }
    let mut written = false;
    // The members of every kind of block, found in one walk of each (or read from the
    // index the event's parse made of its blocks), each key matched once.
    for block in event.content_block_members(location, content) {
        written = true;
        let [kind, text, name, arguments, id, call_id, is_error, items] = block_fields(block);
        let kind = block_kind(kind);
        match kind.as_deref().unwrap_or("?") {
            "text" => abbreviate_value(out, text, TEXT_CHARS),
            "reasoning" => {
                out.push_str("(reasoning) ");
                abbreviate_value(out, text, TEXT_CHARS);
            }
            "tool-call" => {
                out.push_str("→ calls ");
                out.push_str(&str_or(name));
                out.push('(');
                match arguments.filter(|a| a.kind() == JsonKind::String) {
                    // A string's text, read from its literal.
                    Some(text) => abbreviate_value(out, Some(text), ARGUMENT_CHARS),
                    None => abbreviate_into(out, &arguments_line(arguments), ARGUMENT_CHARS),
                }
                out.push_str(") [");
                out.push_str(&str_or(id));
                out.push(']');
            }
            "tool-result" => {
                let id = text_of(call_id);
                let id = id.as_deref().unwrap_or("?");
                let tool = transcript.tool_name(id)?.unwrap_or("?");
                tool_result(out, id, tool, [is_error, items]);
            }
            other => {
                out.push('[');
                out.push_str(other);
                out.push_str(" block]");
            }
        }
        out.push('\n');
    }
    Ok(written)
}

/// The members of a block that some kind of block is rendered from, the first of each
/// key: `type`, `text`, `name`, `arguments`, `id`, `toolCallId`, `isError`, `content`.
fn block_fields(block: sessionlog_session::json::Block<'_>) -> [Option<JsonRef<'_>>; 8] {
    fn place(key: &str) -> Option<usize> {
        Some(match key {
            "type" => 0,
            "text" => 1,
            "name" => 2,
            "arguments" => 3,
            "id" => 4,
            "toolCallId" => 5,
            "isError" => 6,
            "content" => 7,
            _ => return None,
        })
    }
    let mut found = [None; 8];
    for (key, value) in block {
        let at = match key.plain() {
            Some(plain) => place(plain),
            None => place(&key.text()),
        };
        if let Some(slot) = at.and_then(|at| found.get_mut(at)) {
            slot.get_or_insert(value);
        }
    }
    found
}

/// Arguments that are no string as one line: nothing for null or none, or any other
/// value's JSON written compactly. (A string's text is read from its literal.)
fn arguments_line(value: Option<JsonRef<'_>>) -> String {
    let Some(value) = value else {
        return String::new();
    };
    if value.raw() == "null" {
        return String::new();
    }
    serde_json::from_str::<serde_json::Value>(value.raw())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| value.raw().to_owned())
}

/// The line of a `tool-result` block answering call `id` of tool `name`, from its
/// `isError` and `content`.
fn tool_result(
    out: &mut String,
    id: &str,
    name: &str,
    [is_error, content]: [Option<JsonRef<'_>>; 2],
) {
    let status = if is_error.and_then(|v| v.as_bool()) == Some(true) {
        "error"
    } else {
        "ok"
    };
    out.push_str("← ");
    out.push_str(name);
    out.push_str(" [");
    out.push_str(id);
    out.push_str("] ");
    out.push_str(status);
    out.push_str(": ");
    // The texts are shown joined by spaces, abbreviated. When the first alone is longer
    // than a line (a tool's output usually is), the line is its start: read from where the
    // first item's text begins, neither its end nor the other texts are looked for.
    let head = content
        .and_then(|items| items.first_element_value_onward("text"))
        .and_then(|onward| onward.strip_prefix('"'))
        .and_then(|inner| inner.get(..=TEXT_CHARS))
        .filter(|head| !head.contains('"'));
    if let Some(prefix) = head.and_then(|head| plain_prefix(head, TEXT_CHARS)) {
        // More than `TEXT_CHARS` bytes, none a quote or a backslash: the string goes on.
        if prefix.cut {
            out.push_str(prefix.text);
            out.push('…');
            return;
        }
    }
    let mut texts = content
        .into_iter()
        .flat_map(|items| items.element_fields(["text"]))
        .filter_map(|(_, [text])| text.filter(|t| t.kind() == JsonKind::String));
    let first = texts.next();
    // The first text found may still be longer than a line (it was not the first item's,
    // or its start holds an escape): then the others are neither found nor decoded.
    if let Some(prefix) = first.and_then(|t| plain_prefix(literal_inner(t), TEXT_CHARS)) {
        if prefix.cut {
            out.push_str(prefix.text);
            out.push('…');
            return;
        }
    }
    let text: Vec<std::borrow::Cow<'_, str>> = first
        .into_iter()
        .chain(texts)
        .filter_map(|t| t.as_str())
        .collect();
    abbreviate_into(out, &text.join(" "), TEXT_CHARS);
}

/// The kind column of a structural event: the part of its type before the slash.
fn kind_of(event_type: &str) -> &str {
    event_type.split('/').next().unwrap_or(event_type)
}

/// A string member's text, or `?`.
fn str_or<'a>(value: Option<JsonRef<'a>>) -> std::borrow::Cow<'a, str> {
    text_of(value).unwrap_or(std::borrow::Cow::Borrowed("?"))
}

/// Appends a JSON number that is a non-negative integer in decimal, or `?`.
fn push_number(out: &mut String, value: Option<JsonRef<'_>>) {
    let digits = value
        .map(|v| v.raw())
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    // Up to 19 digits without a leading zero are below 2^64 and read as they are written.
    if let Some(d) = digits.filter(|d| d.len() <= 19 && (d.len() == 1 || !d.starts_with('0'))) {
        out.push_str(d);
        return;
    }
    match digits.and_then(|d| d.parse::<u64>().ok()) {
        Some(n) => push_u64(out, n, 0),
        None => out.push('?'),
    }
}

/// Appends the line of a `tool/call` event from its `name` and `callId` (`?` for either
/// when it is missing or no string), without its line end.
fn tool_call_line(out: &mut String, name: &Option<Cow<'_, str>>, id: &Option<Cow<'_, str>>) {
    out.push_str("tool call ");
    out.push_str(name.as_deref().unwrap_or("?"));
    out.push_str(" [");
    out.push_str(id.as_deref().unwrap_or("?"));
    out.push(']');
}

/// Appends one line for a structural event (without its line end): what it says, in words
/// where its type (`ty`) is common. Reads the payload in place. A tool call is not handed
/// here: the fold writes its line with [`tool_call_line`] from the name and id it read.
fn structural(out: &mut String, ty: &str, e: &Event) {
    match ty {
        // The legacy upgrade spreads `trigger` into the payload; older logs nest it.
        "turn/start" => {
            let [turn, kind, trigger] = e.data_fields(["turn", "kind", "trigger"]);
            out.push_str("turn ");
            push_number(out, turn);
            out.push_str(" starts");
            let trigger = text_of(kind).or_else(|| text_of(trigger.and_then(|t| t.get("kind"))));
            if let Some(t) = trigger {
                out.push_str(" (");
                out.push_str(&t);
                out.push(')');
            }
        }
        "turn/end" => {
            let [turn, reason] = e.data_fields(["turn", "reason"]);
            out.push_str("turn ");
            push_number(out, turn);
            out.push_str(" ends: ");
            let reason = text_of(reason.and_then(|r| r.get("kind"))).or_else(|| text_of(reason));
            out.push_str(reason.as_deref().unwrap_or("?"));
        }
        "step/start" | "step/end" => {
            let [turn, step] = e.data_fields(["turn", "step"]);
            out.push_str("step ");
            push_number(out, turn);
            out.push('.');
            push_number(out, step);
            out.push_str(if ty == "step/start" {
                " starts"
            } else {
                " ends"
            });
        }
        "request/header" => {
            let [header, reason] = e.data_fields(["header", "reason"]);
            let config = header.and_then(|h| h.get("config"));
            let [provider, model] =
                config.map_or([None, None], |c| c.fields(["provider", "model"]));
            out.push_str("request to ");
            out.push_str(&str_or(provider));
            out.push('/');
            out.push_str(&str_or(model));
            out.push_str(" (");
            out.push_str(&str_or(reason));
            out.push(')');
        }
        // Anything else: the type and its payload as written, abbreviated.
        _ => {
            out.push_str(ty);
            out.push(' ');
            abbreviate_into(out, e.data().raw(), ARGUMENT_CHARS);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sessionlog_session::json::JsonRef;
    use sessionlog_session::{kind_tag, EventInput, FormatVersion};

    use super::{
        abbreviate, abbreviate_value, tool_result, SessionTranscript, ShadowedBy, StoredEvent,
        Transcript, RECENT_CALLS, TEXT_CHARS,
    };
    use crate::projection::Projection;

    /// `event` as a writer hands it to a fold, without the writer's figures.
    fn stored<'a>(
        event: &'a sessionlog_session::Event,
        version: &'a FormatVersion,
    ) -> StoredEvent<'a> {
        StoredEvent {
            kind: kind_tag(event),
            record_bytes: 0,
            event,
            version,
            message_estimate: None,
            usage: None,
            message: None,
        }
    }

    /// The transcript as `show` writes it.
    fn written(t: &SessionTranscript) -> String {
        let mut out = Vec::new();
        t.write("s", &mut out).expect("writes");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn a_json_string_abbreviates_undecoded_as_its_decoded_text_does() {
        let pieces = [
            "a",
            "word",
            " ",
            "  ",
            "\n",
            "\t",
            "\\",
            "\"",
            "é",
            "\u{2003}",
            "x.y",
            "0123456789",
            "/",
            "\u{1f600}",
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..2000 {
            let mut text = String::new();
            for _ in 0..case % 70 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
            }
            let literal = serde_json::to_string(&text).expect("a JSON string");
            let value = JsonRef::new(&literal);
            for max in [0, 1, 2, 5, 10, 60, 100] {
                let mut undecoded = String::new();
                abbreviate_value(&mut undecoded, Some(value), max);
                assert_eq!(undecoded, abbreviate(&text, max), "{literal} at {max}");
            }
            // A tool result's texts, joined: the first alone decides a long line.
            let second = format!("{{\"text\":{literal}}}");
            let items = format!("[{{\"text\":{literal}}},{{\"type\":\"image\"}},{second}]");
            let mut line = String::new();
            tool_result(&mut line, "?", "?", [None, Some(JsonRef::new(&items))]);
            let joined = abbreviate(&format!("{text} {text}"), TEXT_CHARS);
            assert_eq!(line, format!("← ? [?] ok: {joined}"), "{items}");
        }
        // Plain texts around a line's length, first in items of several shapes: the line
        // read from the first item's start is the line of the texts found and joined.
        for (len, pattern) in (90..130).flat_map(|len| {
            ["tool output ", "abcdefghij", "a b c ", r"ls -la /tmp\n"].map(|p| (len, p))
        }) {
            let text: String = pattern.chars().cycle().take(len).collect();
            let text = text.trim_end_matches([' ', '\\']);
            for items in [
                format!(r#"[{{"type":"text","text":"{text}"}},{{"text":"more"}}]"#),
                format!(r#"[ {{ "text" : "{text}" , "type" : "text" }} ]"#),
                format!(r#"[{{"type":"image"}},{{"text":"{text}"}}]"#),
                format!(r#"[{{"text":1,"type":"text"}},{{"text":"{text}"}}]"#),
                format!(r#"[{{"type":"text","text":"{text}\"q"}}]"#),
                format!(r#"[{{"type":"text","text":"{text}"}}]"#).replace("tool o", "tool é"),
            ] {
                let mut line = String::new();
                tool_result(&mut line, "?", "?", [None, Some(JsonRef::new(&items))]);
                let value: serde_json::Value = serde_json::from_str(&items).expect("JSON");
                let texts: Vec<&str> = value
                    .as_array()
                    .expect("an array")
                    .iter()
                    .filter_map(|item| item.get("text").and_then(|t| t.as_str()))
                    .collect();
                let joined = abbreviate(&texts.join(" "), TEXT_CHARS);
                assert_eq!(line, format!("← ? [?] ok: {joined}"), "{items}");
            }
        }
    }

    #[test]
    fn shadowed_pairs_are_kept_as_a_map_by_seq_keeps_them() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for case in 0..200u64 {
            let mut kept = ShadowedBy::default();
            let mut model = BTreeMap::new();
            let mut next = 0u64;
            for by in 0..300u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Mostly above every seq so far, as summaries shadow; sometimes an older
                // one again, or one below that was never shadowed (in a case of its own,
                // always).
                let seq = match rng % 8 {
                    _ if case % 5 == 4 => rng % 600,
                    0 | 1 => rng % (next + 1),
                    _ => {
                        next += 1 + rng % 3;
                        next
                    }
                };
                assert_eq!(kept.insert(seq, by), model.insert(seq, by).is_none());
                assert_eq!(kept.get(seq), Some(by));
                let probe = rng % (next + 2);
                assert_eq!(kept.get(probe), model.get(&probe).copied());
            }
            let pairs: Vec<(u64, u64)> = model.iter().map(|(&s, &b)| (s, b)).collect();
            // The list and the tree hold no seq in common: every pair, by seq.
            let mut held: Vec<(u64, u64)> = kept.appended.clone();
            held.extend(kept.others.iter().map(|(&s, &by)| (s, by)));
            held.sort_unstable();
            assert_eq!(held, pairs, "case {case}");
        }
    }

    #[test]
    fn chunks_skipped_by_kind_fold_to_the_transcript_of_every_event() {
        use crate::workload::{Workload, WorkloadConfig};
        let version = FormatVersion::dsh_v0();
        let mut w = Workload::new(9, WorkloadConfig::default());
        let mut events = Vec::new();
        for turn in 0..12 {
            let next = events.len() as u64;
            // Some turns stop mid-stream, so that runs of chunks end a session too.
            let interrupt = (turn % 4 == 3).then_some(7);
            for input in w.turn(next, 1, interrupt) {
                let seq = events.len() as u64;
                events.push(input.into_event(seq).expect("an event"));
            }
        }
        let chunks = events
            .iter()
            .filter(|e| !Transcript.wants(kind_tag(e)))
            .count();
        assert!(chunks > 0, "the session streams chunks");
        // Every prefix: each event handed over, against the wanted ones and a catch-up.
        let mut every = SessionTranscript::default();
        let mut wanted = SessionTranscript::default();
        for (i, event) in events.iter().enumerate() {
            let e = stored(event, &version);
            Transcript.apply(&mut every, &e).expect("folds");
            if Transcript.wants(e.kind) {
                Transcript.apply(&mut wanted, &e).expect("folds");
            }
            let mut caught_up = wanted.clone();
            Transcript.skipped(&mut caught_up, i as u64 + 1);
            assert!(caught_up == every, "after event {i}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            caught_up.write("s", &mut a).expect("writes");
            every.write("s", &mut b).expect("writes");
            assert_eq!(a, b, "after event {i}");
        }
    }

    #[test]
    fn a_transcript_over_many_chunks_writes_and_checkpoints_as_one_buffer_would() {
        use crate::workload::{Workload, WorkloadConfig};
        let version = FormatVersion::dsh_v0();
        let mut w = Workload::new(
            3,
            WorkloadConfig::default().with_compact_every_turns(Some(3)),
        );
        let mut t = SessionTranscript::default();
        // Checkpoints taken as the fold goes, each decoded and folded on from.
        let mut resumed: Vec<(SessionTranscript, u64)> = Vec::new();
        let mut seq = 0u64;
        for turn in 0..60 {
            for input in w.turn(seq, 1, None) {
                let event = input.into_event(seq).expect("an event");
                let e = stored(&event, &version);
                if Transcript.wants(e.kind) {
                    Transcript.apply(&mut t, &e).expect("folds");
                    for (r, _) in &mut resumed {
                        Transcript.apply(r, &e).expect("folds");
                    }
                }
                seq += 1;
            }
            if turn % 20 == 10 {
                let mut bytes = Vec::new();
                Transcript.encode(&t, &mut bytes);
                resumed.push((Transcript.decode(&bytes).expect("decodes"), seq));
            }
        }
        Transcript.skipped(&mut t, seq);
        let text_chunks = t.text.pieces().count();
        assert!(text_chunks > 4, "{text_chunks} text chunks");
        assert!(
            t.rows.len() > 4 * super::ROWS_PER_CHUNK,
            "{} rows",
            t.rows.len()
        );
        let shown = written(&t);
        // Its checkpoint holds the text and rows in one buffer each, read in place: what the
        // chunks hold, row for row.
        let mut bytes = Vec::new();
        Transcript.encode(&t, &mut bytes);
        let decoded = Transcript.decode(&bytes).expect("decodes");
        assert_eq!(decoded.text.len(), 0, "nothing folded past the checkpoint");
        assert_eq!(written(&decoded), shown);
        // The appended parts, as the store writes them, are the checkpoint's parts.
        let mut parts = Vec::new();
        Transcript.appended(&t, &mut parts);
        let mut rest = Vec::new();
        Transcript.encode_pieces(&t, &mut rest);
        let parts: Vec<bytes::Bytes> = parts.iter().map(|p| p.concat().into()).collect();
        let rest: Vec<u8> = rest.concat();
        let from_parts = Transcript
            .decode_appended(rest.into(), parts)
            .expect("decodes");
        assert!(from_parts == t);
        assert_eq!(written(&from_parts), shown);
        // Folded on from checkpoints taken mid-way, over chunks of their own.
        assert_eq!(resumed.len(), 3);
        for (mut r, at) in resumed {
            Transcript.skipped(&mut r, seq);
            assert!(r == t, "from the checkpoint at seq {at}");
            assert_eq!(written(&r), shown, "from the checkpoint at seq {at}");
        }
    }

    /// The size a writer's checkpoint interval is chosen by is the size of the rest it
    /// writes: after every event of a session that streams, stops mid-stream and compacts,
    /// folded from the start and from checkpoints decoded from their appended parts.
    #[test]
    fn the_rest_a_checkpoint_rewrites_is_as_long_as_rest_len_says() {
        use crate::workload::{Workload, WorkloadConfig};
        let version = FormatVersion::dsh_v0();
        let mut w = Workload::new(
            11,
            WorkloadConfig::default().with_compact_every_turns(Some(4)),
        );
        let rest_bytes = |t: &SessionTranscript| {
            let mut rest = Vec::new();
            Transcript.encode_pieces(t, &mut rest);
            rest.iter().map(|p| p.len() as u64).sum::<u64>()
        };
        let mut states = vec![SessionTranscript::default()];
        let mut seq = 0u64;
        let mut checked = 0;
        for turn in 0..40 {
            let interrupt = (turn % 5 == 4).then_some(5);
            for input in w.turn(seq, 1, interrupt) {
                let event = input.into_event(seq).expect("an event");
                let e = stored(&event, &version);
                seq += 1;
                for t in &mut states {
                    if Transcript.wants(e.kind) {
                        Transcript.apply(t, &e).expect("folds");
                    }
                    assert_eq!(t.rest_len(), rest_bytes(t), "at seq {seq}");
                    let mut caught_up = t.clone();
                    Transcript.skipped(&mut caught_up, seq);
                    assert_eq!(caught_up.rest_len(), rest_bytes(&caught_up), "at seq {seq}");
                    checked += 1;
                }
            }
            if turn % 10 == 5 {
                let mut t = states[0].clone();
                Transcript.skipped(&mut t, seq);
                let mut parts = Vec::new();
                Transcript.appended(&t, &mut parts);
                let parts = parts.iter().map(|p| p.concat().into()).collect();
                let mut rest = Vec::new();
                Transcript.encode_pieces(&t, &mut rest);
                let rest: Vec<u8> = rest.concat();
                let resumed = Transcript
                    .decode_appended(rest.into(), parts)
                    .expect("decodes");
                assert_eq!(resumed.rest_len(), rest_bytes(&resumed));
                states.push(resumed);
            }
        }
        assert!(
            states.len() > 3 && checked > 1000,
            "{checked} states checked"
        );
    }

    /// A tool call's arguments on its line: a string's text (plain, JSON held in a string,
    /// escapes of every kind, longer than the line), or any other value's compact JSON,
    /// abbreviated as the decoded text is.
    #[test]
    fn a_calls_arguments_read_on_its_line_as_their_text_abbreviates() {
        let version = FormatVersion::current();
        let long = "x".repeat(70);
        let cases = [
            (r#""ls""#.to_owned(), "ls".to_owned()),
            (
                r#""{\"command\": \"cargo test\"}""#.to_owned(),
                r#"{"command": "cargo test"}"#.to_owned(),
            ),
            (
                format!(r#""{{\"a\":\"{long}\"}}""#),
                format!(r#"{{"a":"{long}"}}"#),
            ),
            (
                r#""a\nb\\c\/d \u00e9""#.to_owned(),
                "a\nb\\c/d é".to_owned(),
            ),
            (
                r#""{\"k\": \"v  w\"}""#.to_owned(),
                r#"{"k": "v  w"}"#.to_owned(),
            ),
            (
                r#"{"command": "cargo   test"}"#.to_owned(),
                r#"{"command":"cargo   test"}"#.to_owned(),
            ),
            ("null".to_owned(), String::new()),
        ];
        for (arguments, text) in cases {
            let input = EventInput::new(
                "assistant/message",
                0,
                format!(
                    r#"{{"turn":1,"step":1,"message":{{"id":"m","role":"assistant","content":[{{"type":"tool-call","id":"c1","name":"bash","arguments":{arguments}}}]}}}}"#
                ),
            );
            let event = input.into_event(0).expect("an event");
            let mut t = SessionTranscript::default();
            t.fold(&stored(&event, &version)).expect("folds");
            let line = format!(
                "→ calls bash({}) [c1]",
                abbreviate(&text, super::ARGUMENT_CHARS)
            );
            assert!(written(&t).contains(&line), "{arguments}: {}", written(&t));
        }
    }

    #[test]
    fn a_result_names_the_tool_of_the_latest_call_with_its_id_however_far_back() {
        let version = FormatVersion::current();
        let result = |id: &str| {
            EventInput::new(
                "tool/result",
                0,
                format!(
                    r#"{{"turn":1,"step":1,"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"out"}}],"isError":false}}]}}}}"#
                ),
            )
        };
        let call = |id: &str, tool: &str| {
            EventInput::new(
                "tool/call",
                0,
                format!(
                    r#"{{"turn":1,"step":1,"callId":"{id}","name":"{tool}","arguments":"{{}}"}}"#
                ),
            )
        };
        let mut calls = vec![
            EventInput::new("turn/start", 0, r#"{"turn":1}"#),
            EventInput::new("step/start", 0, r#"{"turn":1,"step":1}"#),
        ];
        // More calls than are looked through before the map, one id called twice.
        calls.extend((0..2 * RECENT_CALLS).map(|k| call(&format!("c{k}"), &format!("t{k}"))));
        calls.push(call("c3", "again"));
        let results = ["c0", "c3", "c40", "c63", "nobody", "c1"].map(result);
        let fold = |t: &mut SessionTranscript, inputs: &[EventInput], from: usize| {
            for (i, input) in inputs.iter().enumerate() {
                let event = input
                    .clone()
                    .into_event((from + i) as u64)
                    .expect("an event");
                t.fold(&stored(&event, &version)).expect("folds");
            }
        };
        let mut t = SessionTranscript::default();
        fold(&mut t, &calls, 0);
        // The same calls from a checkpoint: the results look them up among the stored ones.
        let mut bytes = Vec::new();
        Transcript.encode(&t, &mut bytes);
        let mut resumed = Transcript.decode(&bytes).expect("decodes");
        fold(&mut t, &results, calls.len());
        fold(&mut resumed, &results, calls.len());
        let shown = written(&t);
        for line in [
            "← t0 [c0] ok: out",
            "← again [c3] ok: out",
            "← t40 [c40] ok: out",
            "← t63 [c63] ok: out",
            "← ? [nobody] ok: out",
            "← t1 [c1] ok: out",
        ] {
            assert!(shown.contains(line), "{line} missing from\n{shown}");
        }
        assert!(!shown.contains("← t3 [c3]"), "{shown}");
        assert_eq!(written(&resumed), shown);
    }

    /// A transcript of a turn's start and a step's start, its checkpoint's bytes.
    fn two_rows() -> Vec<u8> {
        let version = FormatVersion::dsh_v0();
        let mut t = SessionTranscript::default();
        let inputs = [
            EventInput::new("turn/start", 0, r#"{"turn":1}"#),
            EventInput::new("step/start", 0, r#"{"turn":1,"step":1}"#),
        ];
        for (seq, input) in inputs.into_iter().enumerate() {
            let event = input.into_event(seq as u64).expect("an event");
            t.fold(&stored(&event, &version)).expect("folds");
        }
        let mut bytes = Vec::new();
        Transcript.encode(&t, &mut bytes);
        bytes
    }

    #[test]
    fn a_stored_row_that_is_not_utf8_fails_the_write_and_is_named() {
        // The row text, the first appended part, follows its length; the first row's is
        // "turn\nturn 1 starts\n".
        const TEXT: usize = 8;
        let rows = two_rows();
        let first_row_end = TEXT + "turn\nturn 1 starts\n".len();
        for (at, seq) in [(TEXT + 1, 0), (first_row_end + 1, 1)] {
            let mut bytes = rows.clone();
            bytes[at] = 0xFF;
            let t = Transcript.decode(&bytes).expect("its structure decodes");
            let err = t.write("s", &mut Vec::new()).expect_err("not UTF-8");
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
            assert!(
                err.to_string().contains(&format!("row of seq {seq} ")),
                "{err}"
            );
        }
        let t = Transcript.decode(&rows).expect("decodes");
        let mut out = Vec::new();
        t.write("s", &mut out).expect("writes");
        assert!(String::from_utf8_lossy(&out).contains("turn 1 starts"));
    }
}
