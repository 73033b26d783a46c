//! The part of a transcript that came from its checkpoint, read in place: the checkpoint's
//! bytes are kept (mapped or read once) and its rows, surface and shadowed events are looked
//! up in them, so handing a transcript back costs a check of its structure, not a copy of
//! every row. spec: format-spec/cache.md#transcript

use bytes::Bytes;

use super::{Row, RowKind};
use crate::projection::bytes::Reader;
use crate::projection::ProjectionError;

/// Bytes of one row in the checkpoint: kind, seq, last seq, settlement, end of its text.
pub(super) const ROW_BYTES: usize = 33;
/// Offset of a row's settlement in its bytes (after the kind, seq and last seq).
pub(super) const ROW_SETTLED: usize = 17;

/// What a transcript's checkpoint holds that later events only add to, in the checkpoint's
/// own bytes. Empty for a transcript folded from the first event.
#[derive(Clone, Default)]
pub(super) struct Stored {
    /// Row text, every row's lines in order (UTF-8 is checked row by row as it is read).
    pub(super) text: Bytes,
    /// [`ROW_BYTES`] per row, in seq order.
    rows: Bytes,
    /// Seqs on the surface, 8 bytes each, increasing.
    surface: Bytes,
    /// Shadowed seqs with the latest replacement citing each, 16 bytes a pair, by seq: the
    /// stored shadowings themselves when they were folded in seq order, else a sorted copy.
    shadowed: Bytes,
    /// The shadowings as stored: seq and replacement, 16 bytes a pair, in fold order (a seq
    /// listed again takes the later replacement).
    shadowings: Bytes,
    /// Call ids and tool names in the order of their calls, as `put_str` wrote them.
    names: Bytes,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

fn bad(what: &str) -> ProjectionError {
    ProjectionError::Undecodable(what.to_owned())
}

/// The `i`th of the `width`-byte items of `table` whose first 8 bytes are a seq in
/// increasing order, found by binary search.
fn find(table: &[u8], width: usize, seq: u64) -> Option<usize> {
    let (mut lo, mut hi) = (0, table.len() / width);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match u64_at(table, mid * width).cmp(&seq) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// A walk through a table of `width`-byte items keyed by increasing seqs, for lookups of
/// increasing seqs: each item is passed once, where a binary search per lookup would jump
/// about the table.
pub(super) struct Cursor<'a> {
    table: &'a [u8],
    width: usize,
    at: usize,
}

impl Cursor<'_> {
    /// The item keyed `seq`, if any; later calls must ask for larger seqs.
    pub(super) fn find(&mut self, seq: u64) -> Option<usize> {
        let count = self.table.len() / self.width;
        while self.at < count && u64_at(self.table, self.at * self.width) < seq {
            self.at += 1;
        }
        (self.at < count && u64_at(self.table, self.at * self.width) == seq).then_some(self.at)
    }

    /// The 8 bytes after the key of item `i`.
    pub(super) fn value(&self, i: usize) -> u64 {
        u64_at(self.table, i * self.width + 8)
    }
}

impl Stored {
    /// A walk through the stored surface.
    pub(super) fn surface_cursor(&self) -> Cursor<'_> {
        Cursor {
            table: &self.surface,
            width: 8,
            at: 0,
        }
    }

    /// A walk through the stored shadowed events.
    pub(super) fn shadowed_cursor(&self) -> Cursor<'_> {
        Cursor {
            table: &self.shadowed,
            width: 16,
            at: 0,
        }
    }

    /// Rows.
    pub(super) fn row_count(&self) -> usize {
        self.rows.len() / ROW_BYTES
    }

    /// Row `i`, as stored.
    pub(super) fn row(&self, i: usize) -> Option<Row> {
        let at = i.checked_mul(ROW_BYTES)?;
        Row::decode(self.rows.get(at..at + ROW_BYTES)?)
    }

    /// Every row's bytes, as stored.
    pub(super) fn row_bytes(&self) -> &[u8] {
        &self.rows
    }

    /// Whether `seq` was on the surface at the checkpoint.
    pub(super) fn on_surface(&self, seq: u64) -> bool {
        find(&self.surface, 8, seq).is_some()
    }

    /// The surface at the checkpoint, as stored (8 bytes a seq).
    pub(super) fn surface_bytes(&self) -> &[u8] {
        &self.surface
    }

    /// The shadowings at the checkpoint, as stored (16 bytes a pair, in fold order).
    pub(super) fn shadowing_bytes(&self) -> &[u8] {
        &self.shadowings
    }

    /// Seqs on the surface at the checkpoint, increasing.
    pub(super) fn surface(&self) -> impl Iterator<Item = u64> + '_ {
        self.surface.chunks_exact(8).map(|c| u64_at(c, 0))
    }

    pub(super) fn surface_count(&self) -> usize {
        self.surface.len() / 8
    }

    /// The replacement that shadowed `seq`, as of the checkpoint.
    pub(super) fn shadowed_by(&self, seq: u64) -> Option<u64> {
        find(&self.shadowed, 16, seq).map(|i| u64_at(&self.shadowed, i * 16 + 8))
    }

    pub(super) fn shadowed_count(&self) -> usize {
        self.shadowed.len() / 16
    }

    /// The stored tool names, as encoded: call id and tool name, in the order of the calls.
    pub(super) fn name_bytes(&self) -> &[u8] {
        &self.names
    }

    /// The stored tool names, decoded, in the order of the calls.
    pub(super) fn name_pairs(&self) -> Result<Vec<(String, String)>, ProjectionError> {
        let mut r = Reader::new(&self.names);
        let mut pairs = Vec::new();
        while !r.rest().is_empty() {
            pairs.push((r.str()?, r.str()?));
        }
        Ok(pairs)
    }

    /// Takes the tool names of a checkpoint's appended part, checking that they are pairs
    /// of UTF-8 strings.
    pub(super) fn read_names(&mut self, names: Bytes) -> Result<(), ProjectionError> {
        let mut r = Reader::new(&names);
        while !r.rest().is_empty() {
            let id = r.str_bytes()?;
            let name = r.str_bytes()?;
            if std::str::from_utf8(id).is_err() || std::str::from_utf8(name).is_err() {
                return Err(bad("text that is not UTF-8"));
            }
        }
        self.names = names;
        Ok(())
    }

    /// The row text and the row table of a checkpoint (its appended parts), with the rows
    /// its rest holds after them, checked together: the stored part keeps the text and the
    /// table, the held rows are the caller's.
    pub(super) fn read(
        text: Bytes,
        rows: Bytes,
        held: &[u8],
        events: u64,
    ) -> Result<Stored, ProjectionError> {
        check_rows(
            &text,
            rows.chunks_exact(ROW_BYTES)
                .chain(held.chunks_exact(ROW_BYTES)),
            events,
        )?;
        Ok(Stored {
            text,
            rows,
            ..Stored::default()
        })
    }

    /// Reads the surface, which follows the rows.
    pub(super) fn read_surface(
        &mut self,
        bytes: &Bytes,
        r: &mut Reader<'_>,
        events: u64,
    ) -> Result<(), ProjectionError> {
        let surface_count = r.count(8)?;
        let surface = r.take(surface_count * 8)?;
        increasing(surface.chunks_exact(8).map(|c| u64_at(c, 0)), events)
            .map_err(|()| bad("surface seqs not increasing or past the events"))?;
        self.surface = bytes.slice_ref(surface);
        Ok(())
    }

    /// Takes the shadowings of a checkpoint's appended part, checking that they are whole
    /// pairs of seqs below `events`. Folded
    /// in seq order (the usual case: replacements take the surface's oldest part), they are
    /// looked up in place; otherwise a copy sorted by seq is made, the later of two pairs
    /// of one seq kept.
    pub(super) fn read_shadowings(
        &mut self,
        shadowings: Bytes,
        events: u64,
    ) -> Result<(), ProjectionError> {
        if shadowings.len() % 16 != 0 {
            return Err(bad("shadowings that are no whole number of pairs"));
        }
        let pairs = || {
            shadowings
                .chunks_exact(16)
                .map(|c| (u64_at(c, 0), u64_at(c, 8)))
        };
        if pairs().any(|(_, by)| by >= events) {
            return Err(bad("a shadowing by a replacement past the events"));
        }
        self.shadowed = if increasing(pairs().map(|(seq, _)| seq), events).is_ok() {
            shadowings.clone()
        } else {
            // A stable sort keeps the pairs of one seq in fold order; the last is kept.
            // The pairs come mostly in order, which the sort runs through in about one pass.
            let mut all: Vec<(u64, u64)> = pairs().collect();
            all.sort_by_key(|&(seq, _)| seq);
            let mut sorted = Vec::with_capacity(all.len() * 16);
            for (i, &(seq, by)) in all.iter().enumerate() {
                if all.get(i + 1).is_some_and(|&(next, _)| next == seq) {
                    continue;
                }
                sorted.extend_from_slice(&seq.to_le_bytes());
                sorted.extend_from_slice(&by.to_le_bytes());
            }
            Bytes::from(sorted)
        };
        self.shadowings = shadowings;
        Ok(())
    }
}

/// Whether `seqs` increase strictly and stay below `events`.
fn increasing(seqs: impl Iterator<Item = u64>, events: u64) -> Result<(), ()> {
    let mut previous: Option<u64> = None;
    for seq in seqs {
        if seq >= events || previous.is_some_and(|p| p >= seq) {
            return Err(());
        }
        previous = Some(seq);
    }
    Ok(())
}

/// Checks the row table against the text: kinds known, rows in seq order and not
/// overlapping, within the events folded, each row's text ending where the next begins, at
/// a character boundary, the last one at the end of the text.
fn check_rows<'a>(
    text: &[u8],
    rows: impl Iterator<Item = &'a [u8]>,
    events: u64,
) -> Result<(), ProjectionError> {
    let mut previous_end = 0u64;
    let mut previous_last: Option<u64> = None;
    for b in rows {
        let tag = b.first().copied().unwrap_or(u8::MAX);
        let (seq, last, end) = (u64_at(b, 1), u64_at(b, 9), u64_at(b, 25));
        let boundary = usize::try_from(end)
            .ok()
            .is_some_and(|end| match text.get(end) {
                // Not a UTF-8 continuation byte: a character starts here.
                Some(&byte) => byte & 0xC0 != 0x80,
                None => end == text.len(),
            });
        if RowKind::from_tag(tag & 0x7F).is_none() {
            return Err(bad("a row kind"));
        }
        if end < previous_end
            || !boundary
            || last < seq
            || last >= events
            || previous_last.is_some_and(|p| p >= seq)
        {
            return Err(bad("rows out of order or past the text"));
        }
        previous_end = end;
        previous_last = Some(last);
    }
    if previous_end != text.len() as u64 {
        return Err(bad("text after the last row"));
    }
    Ok(())
}
