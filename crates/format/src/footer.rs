//! The footer of a sealed segment: per-stream summaries, the sparse index, the catalog
//! entries the segment holds, and the fixed trailer at the very end of the file that locates
//! them. spec: segment.md#footer
//!
//! Opening a store reads footers instead of data. The index entries are fixed-size and sorted,
//! so the log can binary-search them in place in the mapped file without copying them.

use crate::checksum::SegmentCrc;
use crate::error::{FormatError, Structure};
use crate::le::{put_u32, put_u64, slice_at, u32_at, u64_at};

/// Magic that opens a footer: `SLF1`.
pub const FOOTER_MAGIC: u32 = u32::from_le_bytes(*b"SLF1");
/// Magic that opens the footer trailer: `SLFE`.
pub const FOOTER_TRAILER_MAGIC: u32 = u32::from_le_bytes(*b"SLFE");

// spec: segment.md#footer-header
const F_MAGIC_AT: usize = 0;
const F_RESERVED_AT: usize = F_MAGIC_AT + 4;
const F_DATA_END_AT: usize = F_RESERVED_AT + 4;
const F_STREAMS_AT: usize = F_DATA_END_AT + 8;
const F_INDEX_AT: usize = F_STREAMS_AT + 4;
const F_CATALOG_COUNT_AT: usize = F_INDEX_AT + 4;
const F_CATALOG_LEN_AT: usize = F_CATALOG_COUNT_AT + 4;
/// Bytes in the footer header.
pub const FOOTER_HEADER_LEN: usize = F_CATALOG_LEN_AT + 4;

// spec: segment.md#stream-summary
const S_STREAM_AT: usize = 0;
const S_FIRST_SEQ_AT: usize = S_STREAM_AT + 8;
const S_LAST_SEQ_AT: usize = S_FIRST_SEQ_AT + 8;
const S_DATA_BYTES_AT: usize = S_LAST_SEQ_AT + 8;
const S_FIRST_OFF_AT: usize = S_DATA_BYTES_AT + 8;
const S_LAST_OFF_AT: usize = S_FIRST_OFF_AT + 4;
const S_INDEX_START_AT: usize = S_LAST_OFF_AT + 4;
const S_INDEX_COUNT_AT: usize = S_INDEX_START_AT + 4;
/// Bytes in one stream summary.
pub const STREAM_SUMMARY_LEN: usize = S_INDEX_COUNT_AT + 4;

// spec: segment.md#index-entry
const I_SEQ_AT: usize = 0;
const I_OFFSET_AT: usize = I_SEQ_AT + 8;
/// Bytes in one sparse index entry.
pub const INDEX_ENTRY_LEN: usize = I_OFFSET_AT + 4;

// spec: segment.md#catalog-entry
const C_OP_AT: usize = 0;
const C_RESERVED_AT: usize = C_OP_AT + 1;
const C_NAME_LEN_AT: usize = C_RESERVED_AT + 3;
const C_STREAM_AT: usize = C_NAME_LEN_AT + 4;
const C_SEQ_AT: usize = C_STREAM_AT + 8;
/// Bytes in a catalog entry before its name.
pub const CATALOG_ENTRY_FIXED_LEN: usize = C_SEQ_AT + 8;

// spec: segment.md#footer-trailer
const X_MAGIC_AT: usize = 0;
const X_CRC_AT: usize = X_MAGIC_AT + 4;
const X_FOOTER_OFFSET_AT: usize = X_CRC_AT + 4;
const X_FOOTER_LEN_AT: usize = X_FOOTER_OFFSET_AT + 8;
const X_SEGMENT_AT: usize = X_FOOTER_LEN_AT + 8;
/// Bytes in the footer trailer; always the last bytes of a sealed segment.
pub const FOOTER_TRAILER_LEN: usize = X_SEGMENT_AT + 8;

const _: () = assert!(
    FOOTER_HEADER_LEN == 32
        && STREAM_SUMMARY_LEN == 48
        && INDEX_ENTRY_LEN == 12
        && CATALOG_ENTRY_FIXED_LEN == 24
        && FOOTER_TRAILER_LEN == 32
);

/// What one stream has in a sealed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSummary {
    /// The stream.
    pub stream_id: u64,
    /// Seq of its first record in the segment.
    pub first_seq: u64,
    /// Seq of its last record in the segment.
    pub last_seq: u64,
    /// Record bytes (headers, payloads, padding) the stream has in the segment.
    pub data_bytes: u64,
    /// Segment offset of its first record.
    pub first_offset: u32,
    /// Segment offset of its last record.
    pub last_offset: u32,
    /// Position of its first index entry in the footer's index.
    pub index_start: u32,
    /// Number of its index entries (at least one).
    pub index_count: u32,
}

/// One sparse index entry: a record of a stream and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The record's seq.
    pub seq: u64,
    /// Segment offset of the record header.
    pub offset: u32,
}

/// A catalog operation recorded in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogOp {
    /// A stream id was bound to a name.
    Create,
    /// A stream was deleted.
    Delete,
    /// A live stream was bound to a new name (the entry's name).
    Rename,
    /// The whole live catalog ([`crate::CatalogCheckpoint::from_entry`] reads it).
    Checkpoint,
}

/// A catalog entry as the footer lists it (a copy of a catalog record's meaning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// What happened.
    pub op: CatalogOp,
    /// The stream it happened to.
    pub stream_id: u64,
    /// Seq of the catalog record in the catalog stream.
    pub seq: u64,
    /// The stream's name (the new name for `Rename`, empty for `Delete`).
    pub name: Vec<u8>,
}

/// The decoded footer trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterTrailer {
    /// Masked checksum over the footer and the trailer fields after it.
    pub footer_crc: u32,
    /// Segment offset of the footer (the end of the data).
    pub footer_offset: u64,
    /// Bytes from the footer's start to the trailer's start.
    pub footer_len: u64,
    /// Segment the trailer says it belongs to.
    pub segment_id: u64,
}

/// The trailer at the end of `bytes` and where it starts, checked for magic and segment only.
fn trailer_fields(
    segment_bytes: &[u8],
    segment_id: u64,
) -> Result<(FooterTrailer, usize), FormatError> {
    const S: Structure = Structure::FooterTrailer;
    let at = segment_bytes
        .len()
        .checked_sub(FOOTER_TRAILER_LEN)
        .ok_or(FormatError::Truncated {
            structure: S,
            needed: FOOTER_TRAILER_LEN,
            available: segment_bytes.len(),
        })?;
    let t = &segment_bytes[at..];
    let magic = u32_at(t, X_MAGIC_AT, S)?;
    if magic != FOOTER_TRAILER_MAGIC {
        if t.iter().all(|&b| b == 0) {
            return Err(FormatError::Zeroed { structure: S });
        }
        return Err(FormatError::BadMagic {
            structure: S,
            found: u64::from(magic),
        });
    }
    let trailer = FooterTrailer {
        footer_crc: u32_at(t, X_CRC_AT, S)?,
        footer_offset: u64_at(t, X_FOOTER_OFFSET_AT, S)?,
        footer_len: u64_at(t, X_FOOTER_LEN_AT, S)?,
        segment_id: u64_at(t, X_SEGMENT_AT, S)?,
    };
    if trailer.segment_id != segment_id {
        return Err(FormatError::invalid(
            S,
            "segment_id",
            format!(
                "trailer names segment {}, file is segment {segment_id}",
                trailer.segment_id
            ),
        ));
    }
    Ok((trailer, at))
}

/// Decodes the trailer at the end of `segment_bytes`, without verifying the footer.
pub fn decode_footer_trailer(
    segment_bytes: &[u8],
    segment_id: u64,
) -> Result<FooterTrailer, FormatError> {
    const S: Structure = Structure::FooterTrailer;
    let (trailer, at) = trailer_fields(segment_bytes, segment_id)?;
    if trailer.footer_offset.checked_add(trailer.footer_len) != Some(at as u64) {
        return Err(FormatError::invalid(
            S,
            "footer_len",
            "footer does not end where the trailer starts",
        ));
    }
    Ok(trailer)
}

/// Appends a footer and its trailer to `buf`. The footer will live at segment offset
/// `footer_offset` (a multiple of 8) of `segment_id`. `streams` must be sorted by stream id and
/// their `index_start`/`index_count` must refer into `index`. Returns the bytes appended.
pub fn encode_footer(
    buf: &mut Vec<u8>,
    segment_id: u64,
    footer_offset: u64,
    streams: &[StreamSummary],
    index: &[IndexEntry],
    catalog: &[CatalogEntry],
) -> usize {
    let start = buf.len();
    let catalog_len: usize = catalog
        .iter()
        .map(|c| CATALOG_ENTRY_FIXED_LEN + crate::padded_len(c.name.len()))
        .sum();
    buf.resize(start + FOOTER_HEADER_LEN, 0);
    {
        let h = &mut buf[start..];
        put_u32(h, F_MAGIC_AT, FOOTER_MAGIC);
        put_u64(h, F_DATA_END_AT, footer_offset);
        put_u32(h, F_STREAMS_AT, streams.len() as u32);
        put_u32(h, F_INDEX_AT, index.len() as u32);
        put_u32(h, F_CATALOG_COUNT_AT, catalog.len() as u32);
        put_u32(h, F_CATALOG_LEN_AT, catalog_len as u32);
    }
    for s in streams {
        let mut e = [0u8; STREAM_SUMMARY_LEN];
        put_u64(&mut e, S_STREAM_AT, s.stream_id);
        put_u64(&mut e, S_FIRST_SEQ_AT, s.first_seq);
        put_u64(&mut e, S_LAST_SEQ_AT, s.last_seq);
        put_u64(&mut e, S_DATA_BYTES_AT, s.data_bytes);
        put_u32(&mut e, S_FIRST_OFF_AT, s.first_offset);
        put_u32(&mut e, S_LAST_OFF_AT, s.last_offset);
        put_u32(&mut e, S_INDEX_START_AT, s.index_start);
        put_u32(&mut e, S_INDEX_COUNT_AT, s.index_count);
        buf.extend_from_slice(&e);
    }
    for i in index {
        buf.extend_from_slice(&i.seq.to_le_bytes());
        buf.extend_from_slice(&i.offset.to_le_bytes());
    }
    for c in catalog {
        let mut e = [0u8; CATALOG_ENTRY_FIXED_LEN];
        e[C_OP_AT] = match c.op {
            CatalogOp::Create => 1,
            CatalogOp::Delete => 2,
            CatalogOp::Rename => 3,
            CatalogOp::Checkpoint => 4,
        };
        put_u32(&mut e, C_NAME_LEN_AT, c.name.len() as u32);
        put_u64(&mut e, C_STREAM_AT, c.stream_id);
        put_u64(&mut e, C_SEQ_AT, c.seq);
        buf.extend_from_slice(&e);
        buf.extend_from_slice(&c.name);
        buf.resize(
            buf.len() + crate::padded_len(c.name.len()) - c.name.len(),
            0,
        );
    }
    // Index entries are 12 bytes; pad the footer to a multiple of 8.
    let unpadded = buf.len() - start;
    buf.resize(start + crate::padded_len(unpadded), 0);
    let footer_len = (buf.len() - start) as u64;
    let mut t = [0u8; FOOTER_TRAILER_LEN];
    put_u32(&mut t, X_MAGIC_AT, FOOTER_TRAILER_MAGIC);
    put_u64(&mut t, X_FOOTER_OFFSET_AT, footer_offset);
    put_u64(&mut t, X_FOOTER_LEN_AT, footer_len);
    put_u64(&mut t, X_SEGMENT_AT, segment_id);
    let crc = footer_crc(segment_id, &buf[start..], &t);
    put_u32(&mut t, X_CRC_AT, crc);
    buf.extend_from_slice(&t);
    buf.len() - start
}

fn footer_crc(segment_id: u64, footer: &[u8], trailer: &[u8; FOOTER_TRAILER_LEN]) -> u32 {
    let mut crc = SegmentCrc::new(segment_id);
    crc.update(footer);
    crc.update(&trailer[X_FOOTER_OFFSET_AT..]);
    crc.finish()
}

/// Where the parts of a verified footer are, as offsets into the segment's bytes. Holds no
/// borrow, so the log can keep it next to a mapped segment and look entries up in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterView {
    /// Segment offset where data ends and the footer begins.
    pub data_end: u64,
    /// Number of stream summaries.
    pub stream_count: u32,
    /// Number of index entries.
    pub index_entry_count: u32,
    /// Number of catalog entries.
    pub catalog_count: u32,
    streams_at: usize,
    index_at: usize,
    catalog_at: usize,
    catalog_len: usize,
    footer_len: usize,
}

impl FooterView {
    /// Verifies the footer of a sealed segment whose complete bytes are `segment_bytes`.
    pub fn decode(segment_bytes: &[u8], segment_id: u64) -> Result<FooterView, FormatError> {
        let trailer = decode_footer_trailer(segment_bytes, segment_id)?;
        let footer_at = usize::try_from(trailer.footer_offset)
            .map_err(|_| FormatError::invalid(Structure::Footer, "footer_offset", "too large"))?;
        Self::decode_body(segment_bytes, segment_id, trailer, footer_at)
    }

    /// Verifies the footer at the end of a compressed segment's file: the trailer is the last
    /// 32 bytes and the footer the `footer_len` bytes before it, while the trailer's
    /// `footer_offset` (and the footer's `data_end`) name the end of data in the segment's
    /// logical image. spec: segment.md#compressed-segments
    pub fn decode_at_end(file: &[u8], segment_id: u64) -> Result<FooterView, FormatError> {
        let (trailer, at) = trailer_fields(file, segment_id)?;
        let footer_at = usize::try_from(trailer.footer_len)
            .ok()
            .and_then(|len| at.checked_sub(len))
            .ok_or(FormatError::invalid(
                Structure::FooterTrailer,
                "footer_len",
                "longer than the file",
            ))?;
        Self::decode_body(file, segment_id, trailer, footer_at)
    }

    /// Bytes of the footer, padding included (the trailer not counted).
    pub fn footer_len(&self) -> usize {
        self.footer_len
    }

    /// Verifies a footer kept apart from its segment (the clean-close file of the active
    /// segment): `bytes` is exactly a footer and its trailer, as [`encode_footer`] appends them
    /// for a footer at `data_end`. Accessors then take `bytes`, not the segment's bytes.
    /// spec: recovery.md#clean-close
    pub fn decode_detached(bytes: &[u8], segment_id: u64) -> Result<FooterView, FormatError> {
        let (trailer, at) = trailer_fields(bytes, segment_id)?;
        if trailer.footer_len != at as u64 {
            return Err(FormatError::invalid(
                Structure::FooterTrailer,
                "footer_len",
                "a detached footer must fill the bytes before its trailer",
            ));
        }
        Self::decode_body(bytes, segment_id, trailer, 0)
    }

    fn decode_body(
        segment_bytes: &[u8],
        segment_id: u64,
        trailer: FooterTrailer,
        footer_at: usize,
    ) -> Result<FooterView, FormatError> {
        const S: Structure = Structure::Footer;
        let footer_len = usize::try_from(trailer.footer_len)
            .map_err(|_| FormatError::invalid(S, "footer_len", "too large"))?;
        let footer = slice_at(segment_bytes, footer_at, footer_len, S)?;
        let t_at = footer_at + footer_len;
        let mut t = [0u8; FOOTER_TRAILER_LEN];
        t.copy_from_slice(slice_at(segment_bytes, t_at, FOOTER_TRAILER_LEN, S)?);
        let computed = footer_crc(segment_id, footer, &t);
        if computed != trailer.footer_crc {
            return Err(FormatError::ChecksumMismatch {
                structure: S,
                stored: trailer.footer_crc,
                computed,
            });
        }
        if u32_at(footer, F_MAGIC_AT, S)? != FOOTER_MAGIC {
            return Err(FormatError::BadMagic {
                structure: S,
                found: u64::from(u32_at(footer, F_MAGIC_AT, S)?),
            });
        }
        if u32_at(footer, F_RESERVED_AT, S)? != 0 {
            return Err(FormatError::invalid(S, "reserved", "must be zero"));
        }
        let data_end = u64_at(footer, F_DATA_END_AT, S)?;
        if data_end != trailer.footer_offset {
            return Err(FormatError::invalid(
                S,
                "data_end",
                "does not match the trailer",
            ));
        }
        let stream_count = u32_at(footer, F_STREAMS_AT, S)?;
        let index_entry_count = u32_at(footer, F_INDEX_AT, S)?;
        let catalog_count = u32_at(footer, F_CATALOG_COUNT_AT, S)?;
        let catalog_len = u32_at(footer, F_CATALOG_LEN_AT, S)? as usize;
        let streams_at = footer_at + FOOTER_HEADER_LEN;
        let index_at = streams_at + stream_count as usize * STREAM_SUMMARY_LEN;
        let catalog_at = index_at + index_entry_count as usize * INDEX_ENTRY_LEN;
        let used = catalog_at - footer_at + catalog_len;
        if crate::padded_len(used) != footer_len {
            return Err(FormatError::invalid(
                S,
                "counts",
                "sections do not add up to the footer length",
            ));
        }
        let view = FooterView {
            data_end,
            stream_count,
            index_entry_count,
            catalog_count,
            streams_at,
            index_at,
            catalog_at,
            catalog_len,
            footer_len,
        };
        view.check_sections(segment_bytes)?;
        if footer[used..].iter().any(|&b| b != 0) {
            return Err(FormatError::invalid(S, "padding", "must be zero"));
        }
        Ok(view)
    }

    fn check_sections(&self, seg: &[u8]) -> Result<(), FormatError> {
        const S: Structure = Structure::Footer;
        for i in 0..self.stream_count {
            let s = self
                .stream(seg, i)
                .ok_or(FormatError::invalid(S, "streams", "short"))?;
            let index_end = s.index_start.checked_add(s.index_count);
            if s.first_seq > s.last_seq
                || s.index_count == 0
                || index_end.is_none_or(|e| e > self.index_entry_count)
                || u64::from(s.last_offset) >= self.data_end
                || s.first_offset > s.last_offset
            {
                return Err(FormatError::invalid(
                    S,
                    "stream_summary",
                    format!("summary {i} is inconsistent"),
                ));
            }
        }
        let mut seen = 0usize;
        let mut at = self.catalog_at;
        for _ in 0..self.catalog_count {
            let (_, next) = self.catalog_entry_at(seg, at)?;
            seen += next - at;
            at = next;
        }
        if seen != self.catalog_len {
            return Err(FormatError::invalid(
                S,
                "catalog_len",
                "does not match the entries",
            ));
        }
        Ok(())
    }

    /// The `i`th stream summary (sorted by stream id).
    pub fn stream(&self, seg: &[u8], i: u32) -> Option<StreamSummary> {
        let at = self.streams_at + i as usize * STREAM_SUMMARY_LEN;
        let e = seg.get(at..at + STREAM_SUMMARY_LEN)?;
        let s = Structure::Footer;
        Some(StreamSummary {
            stream_id: u64_at(e, S_STREAM_AT, s).ok()?,
            first_seq: u64_at(e, S_FIRST_SEQ_AT, s).ok()?,
            last_seq: u64_at(e, S_LAST_SEQ_AT, s).ok()?,
            data_bytes: u64_at(e, S_DATA_BYTES_AT, s).ok()?,
            first_offset: u32_at(e, S_FIRST_OFF_AT, s).ok()?,
            last_offset: u32_at(e, S_LAST_OFF_AT, s).ok()?,
            index_start: u32_at(e, S_INDEX_START_AT, s).ok()?,
            index_count: u32_at(e, S_INDEX_COUNT_AT, s).ok()?,
        })
    }

    /// The `i`th index entry of the whole index.
    pub fn index_entry(&self, seg: &[u8], i: u32) -> Option<IndexEntry> {
        let at = self.index_at + i as usize * INDEX_ENTRY_LEN;
        let e = seg.get(at..at + INDEX_ENTRY_LEN)?;
        Some(IndexEntry {
            seq: u64_at(e, I_SEQ_AT, Structure::Footer).ok()?,
            offset: u32_at(e, I_OFFSET_AT, Structure::Footer).ok()?,
        })
    }

    /// The catalog entries, in record order.
    pub fn catalog(&self, seg: &[u8]) -> Result<Vec<CatalogEntry>, FormatError> {
        let mut out = Vec::with_capacity(self.catalog_count as usize);
        let mut at = self.catalog_at;
        for _ in 0..self.catalog_count {
            let (entry, next) = self.catalog_entry_at(seg, at)?;
            out.push(entry);
            at = next;
        }
        Ok(out)
    }

    fn catalog_entry_at(
        &self,
        seg: &[u8],
        at: usize,
    ) -> Result<(CatalogEntry, usize), FormatError> {
        const S: Structure = Structure::Footer;
        let e = slice_at(seg, at, CATALOG_ENTRY_FIXED_LEN, S)?;
        let op = match e[C_OP_AT] {
            1 => CatalogOp::Create,
            2 => CatalogOp::Delete,
            3 => CatalogOp::Rename,
            4 => CatalogOp::Checkpoint,
            other => {
                return Err(FormatError::invalid(
                    S,
                    "catalog.op",
                    format!("unknown op {other}"),
                ))
            }
        };
        if e[C_RESERVED_AT..C_NAME_LEN_AT].iter().any(|&b| b != 0) {
            return Err(FormatError::invalid(S, "catalog.reserved", "must be zero"));
        }
        let name_len = u32_at(e, C_NAME_LEN_AT, S)? as usize;
        let name = slice_at(seg, at + CATALOG_ENTRY_FIXED_LEN, name_len, S)?.to_vec();
        let next = at + CATALOG_ENTRY_FIXED_LEN + crate::padded_len(name_len);
        if next > self.catalog_at + self.catalog_len {
            return Err(FormatError::invalid(
                S,
                "catalog",
                "entry runs past the catalog",
            ));
        }
        let entry = CatalogEntry {
            op,
            stream_id: u64_at(e, C_STREAM_AT, S)?,
            seq: u64_at(e, C_SEQ_AT, S)?,
            name,
        };
        Ok((entry, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(footer_offset: u64) -> Vec<u8> {
        let mut seg = vec![0xAB; footer_offset as usize];
        let streams = [
            StreamSummary {
                stream_id: 0,
                first_seq: 0,
                last_seq: 0,
                data_bytes: 48,
                first_offset: 96,
                last_offset: 96,
                index_start: 0,
                index_count: 1,
            },
            StreamSummary {
                stream_id: 7,
                first_seq: 3,
                last_seq: 9,
                data_bytes: 900,
                first_offset: 160,
                last_offset: 800,
                index_start: 1,
                index_count: 2,
            },
        ];
        let index = [
            IndexEntry { seq: 0, offset: 96 },
            IndexEntry {
                seq: 3,
                offset: 160,
            },
            IndexEntry {
                seq: 8,
                offset: 700,
            },
        ];
        let catalog = [CatalogEntry {
            op: CatalogOp::Create,
            stream_id: 7,
            seq: 0,
            name: b"session-a".to_vec(),
        }];
        encode_footer(&mut seg, 3, footer_offset, &streams, &index, &catalog);
        seg
    }

    #[test]
    fn footer_round_trips() {
        let seg = sample(1024);
        let f = FooterView::decode(&seg, 3).expect("valid footer");
        assert_eq!(f.data_end, 1024);
        assert_eq!(f.stream(&seg, 1).map(|s| s.stream_id), Some(7));
        assert_eq!(
            f.index_entry(&seg, 2),
            Some(IndexEntry {
                seq: 8,
                offset: 700
            })
        );
        assert_eq!(f.catalog(&seg).expect("catalog")[0].name, b"session-a");
    }

    #[test]
    fn every_single_bit_flip_in_a_footer_is_detected() {
        let good = sample(1024);
        for byte in 1024..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    FooterView::decode(&bad, 3).is_err(),
                    "flip at {byte}:{bit} accepted"
                );
            }
        }
    }

    #[test]
    fn a_footer_from_another_segment_is_refused() {
        let seg = sample(1024);
        assert!(FooterView::decode(&seg, 4).is_err());
    }
}
