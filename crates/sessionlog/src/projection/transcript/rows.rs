//! A transcript's rows: what each is, and the table of those folded since the checkpoint,
//! kept as the checkpoint stores them.

use super::chunks::RecordChunks;
use super::stored;

/// What a row is; decides its mark and what is added when it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum RowKind {
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
    pub(super) fn from_tag(tag: u8) -> Option<RowKind> {
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
pub(super) struct Row {
    pub(super) kind: RowKind,
    pub(super) seq: u64,
    /// A stream row's last chunk; else `seq`.
    pub(super) last: u64,
    /// A stream row's settlement, or [`UNSETTLED`](super::UNSETTLED).
    pub(super) settled: u64,
    /// Whether the event replaced a range (its mark is `»` while on the surface).
    pub(super) replacement: bool,
    /// End of the row's text in the transcript's text (the stored text, then the text of
    /// rows folded after it): the kind column, then each line, each ending in `\n`.
    pub(super) end: u64,
}

impl Row {
    /// The row as the checkpoint stores it. spec: cache.md#transcript
    pub(super) fn encode(&self) -> [u8; stored::ROW_BYTES] {
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
    pub(super) fn decode(b: &[u8]) -> Option<Row> {
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
pub(super) struct RowTable(pub(super) RecordChunks<{ stored::ROW_BYTES }, ROWS_PER_CHUNK>);

/// Rows in a chunk of the row table (about 66 KB; fewer in unit tests, so that short
/// sessions cross chunks).
pub(super) const ROWS_PER_CHUNK: usize = if cfg!(test) { 16 } else { 2048 };

impl RowTable {
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn push(&mut self, row: Row) {
        self.0.push(row.encode());
    }

    pub(super) fn get(&self, i: usize) -> Option<Row> {
        Row::decode(self.0.get(i)?)
    }

    /// Sets row `i`'s settlement.
    pub(super) fn settle(&mut self, i: usize, by: u64) {
        let at = stored::ROW_SETTLED;
        if let Some(field) = self.0.get_mut(i).and_then(|r| r.get_mut(at..at + 8)) {
            field.copy_from_slice(&by.to_le_bytes());
        }
    }

    /// The bytes of rows `range`, as pieces in order.
    pub(super) fn pieces(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &[u8]> {
        self.0.pieces(range)
    }
}
