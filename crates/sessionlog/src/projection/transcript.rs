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
use std::fmt;
use std::io::{self, Write};

use bytes::Bytes;
use sessionlog_session::{derive_surface_content, Event, SessionHeader, SurfaceOp};

use super::bytes::{put_str, put_u64, Reader};
use super::{Projection, ProjectionError, SeqSet, StoredEvent};

mod chunks;
mod kept;
mod lines;
mod rows;
mod stored;
mod text;

use chunks::{RecordChunks, TextChunks};
use kept::{AddedSurface, ShadowedBy, ToolNames};
use lines::{cited, count, kind_of, message_lines, role_of, structural, text_of, tool_call_line};
use rows::{Row, RowKind, RowTable};
use stored::{Cursor, Stored};
pub use text::abbreviate;
use text::{push_left, push_u64, Lines};

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

#[cfg(test)]
mod tests;
