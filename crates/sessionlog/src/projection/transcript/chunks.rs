//! Buffers for what a transcript folds after its checkpoint (the rows' text and the row
//! table), which grow for as long as a writer appends. Each is kept in chunks that are
//! never moved once allocated: one contiguous buffer would be copied whole at every
//! doubling, into pages the kernel must hand over and zero anew each time, and on a long
//! session that costs more than folding the rows does.

use std::ops::Range;

/// Bytes a text chunk is allocated with. Pages of it that are never written are never
/// touched, so a short session pays for what it writes, not for this. (Smaller in unit
/// tests, so that short sessions cross chunks.)
const TEXT_CHUNK: usize = if cfg!(test) { 8 << 10 } else { 256 << 10 };
/// A new chunk is begun for a row when the open one has less room than this left (a longer
/// row grows the open chunk, which is correct, only slower).
const ROW_ROOM: usize = if cfg!(test) { 1 << 10 } else { 4 << 10 };

/// Text in chunks, each holding whole rows: a row's text is written to one chunk (the open
/// one, see [`TextChunks::for_row`]), so every row can be read as one `&str`.
#[derive(Clone, Default)]
pub(super) struct TextChunks {
    /// The chunks before the open one, each with the offset of its first byte.
    full: Vec<(usize, String)>,
    /// The chunk rows are written to, and the offset of its first byte.
    open: String,
    open_at: usize,
}

impl TextChunks {
    pub(super) fn len(&self) -> usize {
        self.open_at + self.open.len()
    }

    /// The chunk to write the next row's text to, whole: the open chunk, or a new one when
    /// it has less than [`ROW_ROOM`] left.
    pub(super) fn for_row(&mut self) -> &mut String {
        if self.open.capacity() - self.open.len() < ROW_ROOM {
            let next = String::with_capacity(TEXT_CHUNK);
            let filled = std::mem::replace(&mut self.open, next);
            if !filled.is_empty() {
                let at = self.open_at;
                self.open_at += filled.len();
                self.full.push((at, filled));
            }
        }
        &mut self.open
    }

    /// The open chunk taken out, with room for a row (as [`TextChunks::for_row`] leaves
    /// it), so that a row's text can be written while the rest of the transcript is read;
    /// [`TextChunks::put_back`] returns it. Taking it leaves no chunk behind: until it is
    /// back, nothing else is written to the text.
    pub(super) fn take_for_row(&mut self) -> String {
        self.for_row();
        std::mem::take(&mut self.open)
    }

    /// Returns the chunk [`TextChunks::take_for_row`] took, with the row written to it.
    pub(super) fn put_back(&mut self, open: String) {
        self.open = open;
    }

    /// The text in `range`, which must lie in one chunk (a row's text does).
    pub(super) fn get(&self, range: Range<usize>) -> Option<&str> {
        let (at, chunk) = match range.start.checked_sub(self.open_at) {
            Some(_) => (self.open_at, &self.open),
            None => {
                let i = self
                    .full
                    .partition_point(|(at, _)| *at <= range.start)
                    .checked_sub(1)?;
                let (at, chunk) = self.full.get(i)?;
                (*at, chunk)
            }
        };
        chunk.get(range.start - at..range.end.checked_sub(at)?)
    }

    /// The whole text, as the chunks' bytes in order.
    pub(super) fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        self.full
            .iter()
            .map(|(_, chunk)| chunk.as_bytes())
            .chain(std::iter::once(self.open.as_bytes()))
    }
}

/// Records of `RECORD` bytes each, in chunks of `PER_CHUNK` records: a record never spans
/// two chunks, so each is read and changed in place.
#[derive(Clone, Default)]
pub(super) struct RecordChunks<const RECORD: usize, const PER_CHUNK: usize> {
    chunks: Vec<Vec<u8>>,
    len: usize,
}

impl<const RECORD: usize, const PER_CHUNK: usize> RecordChunks<RECORD, PER_CHUNK> {
    /// Records `bytes` hold, whole ones only (the rest is dropped).
    pub(super) fn from_bytes(bytes: &[u8]) -> Self {
        let mut records = Self::default();
        for record in bytes.chunks_exact(RECORD) {
            records.push(record.try_into().unwrap_or([0; RECORD]));
        }
        records
    }

    /// Records held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn push(&mut self, record: [u8; RECORD]) {
        if self.len % PER_CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(RECORD * PER_CHUNK));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.extend_from_slice(&record);
        }
        self.len += 1;
    }

    /// Record `i`.
    pub(super) fn get(&self, i: usize) -> Option<&[u8]> {
        let chunk = self.chunks.get(i / PER_CHUNK)?;
        let at = (i % PER_CHUNK) * RECORD;
        chunk.get(at..at + RECORD)
    }

    /// Record `i`, to change in place.
    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let chunk = self.chunks.get_mut(i / PER_CHUNK)?;
        let at = (i % PER_CHUNK) * RECORD;
        chunk.get_mut(at..at + RECORD)
    }

    /// The bytes of records `range` (clamped to those held), as pieces in order.
    pub(super) fn pieces(&self, range: Range<usize>) -> impl Iterator<Item = &[u8]> {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        let chunk_bytes = RECORD * PER_CHUNK;
        let (from, to) = (start * RECORD, end * RECORD);
        self.chunks
            .iter()
            .enumerate()
            .filter_map(move |(k, chunk)| {
                let base = k * chunk_bytes;
                let lo = from.max(base) - base;
                let hi = to.min(base + chunk.len()).checked_sub(base)?;
                chunk.get(lo..hi).filter(|piece| !piece.is_empty())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row reads back whole from its range, and the pieces are the rows in order;
    /// returns the rows' bytes.
    fn assert_rows_read_back(text: &TextChunks, rows: &[(Range<usize>, String)]) -> Vec<u8> {
        let mut all = Vec::new();
        for (range, row) in rows {
            assert_eq!(text.get(range.clone()), Some(row.as_str()));
            all.extend_from_slice(row.as_bytes());
        }
        assert_eq!(text.pieces().collect::<Vec<_>>().concat(), all);
        all
    }

    #[test]
    fn rows_of_text_read_back_whole_across_chunks() {
        let mut text = TextChunks::default();
        let mut rows = Vec::new();
        // Rows long enough to fill several chunks, and one longer than the room left.
        for i in 0..2_000usize {
            let start = text.len();
            let row = if i == 1_900 {
                "x".repeat(3 * TEXT_CHUNK)
            } else {
                format!("row {i}\n{}\n", "y".repeat(i % 2_000))
            };
            text.for_row().push_str(&row);
            rows.push((start..text.len(), row));
        }
        assert!(text.full.len() > 3, "{} chunks", text.full.len());
        let all = assert_rows_read_back(&text, &rows);
        assert_eq!(text.len(), all.len());
        // An empty row at a chunk's start reads as empty, not as a miss.
        let boundary = text.full[1].0;
        assert_eq!(text.get(boundary..boundary), Some(""));
    }

    #[test]
    fn a_chunk_taken_for_a_row_comes_back_as_the_open_one() {
        let mut text = TextChunks::default();
        let mut rows = Vec::new();
        for i in 0..500usize {
            let start = text.len();
            let row = format!("row {i}\n{}\n", "z".repeat(i * 7 % 900));
            if i % 2 == 0 {
                let mut open = text.take_for_row();
                let capacity = open.capacity();
                assert!(
                    capacity - open.len() >= ROW_ROOM,
                    "row {i}: too little room"
                );
                open.push_str(&row);
                assert_eq!(open.capacity(), capacity, "row {i}: the chunk moved");
                text.put_back(open);
            } else {
                text.for_row().push_str(&row);
            }
            rows.push((start..text.len(), row));
        }
        assert!(text.full.len() > 3, "{} chunks", text.full.len());
        assert_rows_read_back(&text, &rows);
    }

    #[test]
    fn records_are_read_changed_and_cut_across_chunks() {
        let mut records = RecordChunks::<3, 4>::default();
        for i in 0..11u8 {
            records.push([i, i, i]);
        }
        assert_eq!(records.len(), 11);
        assert_eq!(records.get(9), Some(&[9u8, 9, 9][..]));
        assert_eq!(records.get(11), None);
        records.get_mut(5).expect("held")[1] = 50;
        let bytes = |r: Range<usize>| records.pieces(r).collect::<Vec<_>>().concat();
        let all: Vec<u8> = (0..11u8)
            .flat_map(|i| [i, if i == 5 { 50 } else { i }, i])
            .collect();
        assert_eq!(bytes(0..11), all);
        for (a, b) in [(0, 4), (3, 9), (4, 8), (8, 11), (6, 6), (10, 30), (12, 30)] {
            let (lo, hi) = (a.min(11) * 3, b.min(11) * 3);
            assert_eq!(bytes(a..b), all[lo.min(hi)..hi], "{a}..{b}");
        }
        assert_eq!(
            RecordChunks::<3, 4>::from_bytes(&all)
                .pieces(0..11)
                .collect::<Vec<_>>()
                .concat(),
            all
        );
    }
}
