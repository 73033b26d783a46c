//! Offline verification of a whole store: every checksum, every footer against the data it
//! summarises, every sparse index entry, and the continuity of every stream. Reports each
//! damaged place instead of stopping at the first. Changes nothing on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sessionlog_format::{
    verify_batch, CatalogEntry, FooterView, RecordHeader, SegmentHeader, StreamSummary,
    CATALOG_STREAM, RECORD_ALIGN, SEGMENT_HEADER_LEN,
};

use crate::error::{io_err, Result};
use crate::ids::SegmentId;
use crate::index::ActiveStreamIndex;
use crate::segment::segment_path;
use crate::snapshot::read_copy;
use crate::storage::{OpenMode, Storage};

/// One damaged place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment.
    pub segment: SegmentId,
    /// Byte offset in the segment.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

/// Per-segment findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    /// The segment.
    pub segment: SegmentId,
    /// File size in bytes.
    pub bytes: u64,
    /// Whether it has a valid footer (sealed).
    pub sealed: bool,
    /// Valid batches found.
    pub batches: u64,
    /// Valid records found.
    pub records: u64,
    /// Index entries checked against the records they point at.
    pub index_entries_checked: u64,
}

/// The result of [`verify_store`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every segment, in order.
    pub segments: Vec<SegmentCheck>,
    /// Every damaged place found.
    pub damages: Vec<Damage>,
    /// Streams created and not deleted.
    pub live_streams: u64,
}

impl VerifyReport {
    /// True when nothing is damaged.
    pub fn is_intact(&self) -> bool {
        self.damages.is_empty()
    }
}

/// Verifies the store in `dir`. Takes no lock and writes nothing, so it runs beside a live
/// writer and without write permission; refuses a directory that is not a store. A live
/// writer may be appending to the last segment while it is read: damage found there counts
/// only when a second read shows the same bytes (otherwise the segment is checked again).
pub fn verify_store(storage: Arc<dyn Storage>, dir: &Path) -> Result<VerifyReport> {
    crate::open::prepare_dir(&*storage, dir, crate::Access::ReadOnly)?;
    let mut ids: Vec<u64> = storage
        .list_dir(dir)
        .map_err(io_err("listing", dir))?
        .iter()
        .filter_map(|n| sessionlog_format::parse_segment_file_name(n))
        .collect();
    ids.sort_unstable();
    let mut report = VerifyReport::default();
    let mut streams = Streams::default();
    let mut store_id = None;
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 && id != ids[i - 1] + 1 {
            report.damages.push(Damage {
                segment: SegmentId(ids[i - 1] + 1),
                offset: 0,
                what: "segment file is missing".into(),
            });
        }
        let path = segment_path(dir, SegmentId(id));
        let file = storage
            .open_file(&path, OpenMode::ReadOnly)
            .map_err(io_err("opening", &path))?;
        let last = i + 1 == ids.len();
        let mut bytes = read_copy(&*file).map_err(io_err("reading", &path))?;
        if !last {
            // Sealed before the next segment was created: it cannot change under a writer,
            // so one read is checked in place; a compressed one, through its logical image
            // after every block's checksum. spec: segment.md#compressed-segments
            let check = match crate::compress::logical_image(&bytes, SegmentId(id)) {
                Ok(image) => SegmentCheck {
                    bytes: bytes.len() as u64,
                    ..verify_segment(
                        &image,
                        SegmentId(id),
                        last,
                        &mut store_id,
                        &mut streams,
                        &mut report.damages,
                    )
                },
                Err(e) => {
                    report.damages.push(Damage {
                        segment: SegmentId(id),
                        offset: match &e {
                            crate::Error::Corrupted { offset, .. } => *offset,
                            _ => 0,
                        },
                        what: format!("compressed segment: {e}"),
                    });
                    SegmentCheck {
                        segment: SegmentId(id),
                        bytes: bytes.len() as u64,
                        sealed: false,
                        batches: 0,
                        records: 0,
                        index_entries_checked: 0,
                    }
                }
            };
            report.segments.push(check);
            continue;
        }
        // The last segment may be appended to while it is read: a copy that shows damage is
        // checked again from a fresh copy (against the state before it) while they differ.
        let mut attempt = 1;
        loop {
            let (mut s, mut d, mut sid) = (streams.clone(), Vec::new(), store_id);
            let check = verify_segment(&bytes, SegmentId(id), last, &mut sid, &mut s, &mut d);
            if !d.is_empty() && attempt < VERIFY_READ_ATTEMPTS {
                let fresh = read_copy(&*file).map_err(io_err("reading", &path))?;
                if fresh != bytes {
                    bytes = fresh;
                    attempt += 1;
                    continue;
                }
            }
            (streams, store_id) = (s, sid);
            report.damages.extend(d);
            report.segments.push(check);
            break;
        }
    }
    for (stream, (segment, first, last)) in &streams.holes {
        if streams.live.get(stream).copied().unwrap_or(false) {
            report.damages.push(Damage {
                segment: *segment,
                offset: 0,
                what: format!(
                    "live stream {stream} is missing seqs {first}..={last} (no segment holds them)"
                ),
            });
        }
    }
    report.live_streams = streams.live.values().filter(|&&l| l).count() as u64;
    Ok(report)
}

/// What the records read so far say about every stream.
#[derive(Debug, Clone, Default)]
struct Streams {
    /// Stream -> the seq its next record must have.
    next: BTreeMap<u64, u64>,
    /// Stream -> whether it is live (created, not deleted).
    live: BTreeMap<u64, bool>,
    /// Streams a checkpoint put past records no segment holds (a rewrite dropped them), with
    /// the first missing seq: damage unless the stream ends up deleted.
    /// spec: segment.md#rewriting-a-segment
    holes: BTreeMap<u64, (SegmentId, u64, u64)>,
}

/// Reads of a changing last segment before its damage is reported as it stands.
const VERIFY_READ_ATTEMPTS: usize = 4;

fn verify_segment(
    seg: &[u8],
    id: SegmentId,
    last: bool,
    store_id: &mut Option<[u8; 16]>,
    streams: &mut Streams,
    damages: &mut Vec<Damage>,
) -> SegmentCheck {
    let mut damage = |offset: u64, what: String| {
        damages.push(Damage {
            segment: id,
            offset,
            what,
        })
    };
    let mut check = SegmentCheck {
        segment: id,
        bytes: seg.len() as u64,
        sealed: false,
        batches: 0,
        records: 0,
        index_entries_checked: 0,
    };
    match SegmentHeader::decode(seg) {
        Ok(h) if h.segment_id != id.0 => {
            damage(0, format!("header names segment {}", h.segment_id))
        }
        Ok(h) if store_id.is_some_and(|s| s != h.store_id) => {
            damage(0, "header names another store".into())
        }
        Ok(h) => *store_id = Some(h.store_id),
        Err(e) => damage(0, format!("segment header: {e}")),
    }
    let footer = FooterView::decode(seg, id.0);
    let data_end = match &footer {
        Ok(f) => {
            check.sealed = true;
            f.data_end as usize
        }
        Err(e) => {
            if !last {
                damage(
                    seg.len().saturating_sub(32) as u64,
                    format!("footer of a sealed segment: {e}"),
                );
            }
            seg.len()
        }
    };
    // Walk the data, resynchronising after damage at the next valid batch.
    let mut found: BTreeMap<u64, ActiveStreamIndex> = BTreeMap::new();
    let mut catalog: Vec<CatalogEntry> = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while at < data_end {
        match verify_batch(&seg[at..data_end], id.0, at as u64) {
            Ok(batch) => {
                check.batches += 1;
                for r in batch.records() {
                    check.records += 1;
                    let payload = batch.payload(&r);
                    note(&mut found, &r.header, r.offset);
                    check_seq(
                        streams,
                        id,
                        &r.header,
                        payload,
                        &mut catalog,
                        &mut damage,
                        r.offset,
                    );
                }
                at = batch.end_offset() as usize;
            }
            Err(e) => {
                let rest_zero = crate::recovery::is_zero(&seg[at..data_end]);
                if rest_zero && (last || footer.is_err()) {
                    break; // the unwritten (preallocated) rest of the active segment
                }
                let what = if last && !check.sealed {
                    format!("torn or damaged batch (open would cut the tail here if nothing valid follows): {e}")
                } else {
                    format!("damaged batch: {e}")
                };
                damage(at as u64, what);
                match crate::recovery::next_valid_batch(&seg[..data_end], id.0, at + RECORD_ALIGN) {
                    Some(next) => at = next.offset() as usize,
                    None => break,
                }
            }
        }
    }
    if let Ok(f) = footer {
        compare_footer(seg, &f, &found, &catalog, &mut damage, &mut check);
    }
    check
}

fn note(found: &mut BTreeMap<u64, ActiveStreamIndex>, h: &RecordHeader, offset: u64) {
    let bytes = (sessionlog_format::RECORD_HEADER_LEN
        + sessionlog_format::padded_len(h.payload_len as usize)) as u64;
    match found.get_mut(&h.stream_id) {
        // After damage the walk resynchronises past lost records; the gap is reported
        // elsewhere, and the stream's summary is restarted so it never claims them.
        Some(ix) if h.seq != ix.last_seq + 1 => {
            *ix = ActiveStreamIndex::new(h.seq, offset as u32, bytes)
        }
        Some(ix) => ix.push(h.seq, offset as u32, bytes, u32::MAX),
        None => {
            found.insert(
                h.stream_id,
                ActiveStreamIndex::new(h.seq, offset as u32, bytes),
            );
        }
    }
}

/// Describes a record whose seq is not the one its stream expects next: which seqs are
/// missing, or that a seq came again.
fn seq_break(stream: u64, expected: u64, found: u64) -> String {
    if found == expected + 1 {
        format!("stream {stream} is missing seq {expected} (the next record found has seq {found})")
    } else if found > expected {
        format!(
            "stream {stream} is missing seqs {expected}..={} (the next record found has seq {found})",
            found - 1
        )
    } else {
        format!("stream {stream} repeats seq {found} (seq {expected} was expected next)")
    }
}

fn check_seq(
    streams: &mut Streams,
    segment: SegmentId,
    h: &RecordHeader,
    payload: &[u8],
    catalog: &mut Vec<CatalogEntry>,
    damage: &mut impl FnMut(u64, String),
    offset: u64,
) {
    let next = streams.next.entry(h.stream_id).or_insert(h.seq);
    if *next != h.seq {
        damage(offset, seq_break(h.stream_id, *next, h.seq));
    }
    *next = h.seq + 1;
    if h.stream_id == CATALOG_STREAM {
        let Some(e) = crate::segment::catalog_entry(h, payload) else {
            damage(offset, "malformed catalog record".into());
            return;
        };
        let now_live = match e.op {
            sessionlog_format::CatalogOp::Checkpoint => {
                match sessionlog_format::CatalogCheckpoint::from_entry(&e) {
                    Ok(cp) => apply_checkpoint(streams, segment, &cp, offset, damage),
                    Err(why) => damage(offset, format!("catalog checkpoint: {why}")),
                }
                catalog.push(e);
                return;
            }
            sessionlog_format::CatalogOp::Create => true,
            sessionlog_format::CatalogOp::Delete => false,
            // A rename keeps the stream as it was: live, or a damage report later.
            sessionlog_format::CatalogOp::Rename => {
                streams.live.get(&e.stream_id).copied().unwrap_or(false)
            }
        };
        streams.live.insert(e.stream_id, now_live);
        streams.next.entry(e.stream_id).or_insert(0);
        catalog.push(e);
    } else if !streams.live.get(&h.stream_id).copied().unwrap_or(false) {
        damage(
            offset,
            format!("record of stream {} that is not live", h.stream_id),
        );
    }
}

/// A checkpoint in a store read from its first record on must list exactly the live streams,
/// each at the seq its records reached or past it (records a rewrite dropped: a hole, checked
/// at the end); in a store whose older segments were reclaimed (nothing known yet) it sets
/// them.
fn apply_checkpoint(
    streams: &mut Streams,
    segment: SegmentId,
    cp: &sessionlog_format::CatalogCheckpoint,
    offset: u64,
    damage: &mut impl FnMut(u64, String),
) {
    if streams.live.is_empty() {
        for s in &cp.streams {
            streams.live.insert(s.stream_id, true);
            streams.next.insert(s.stream_id, s.next_seq);
        }
        return;
    }
    let listed: Vec<u64> = cp.streams.iter().map(|s| s.stream_id).collect();
    let known_live: Vec<u64> = streams
        .live
        .iter()
        .filter(|(_, l)| **l)
        .map(|(id, _)| *id)
        .collect();
    if listed != known_live {
        damage(
            offset,
            "catalog checkpoint does not list exactly the live streams".into(),
        );
    }
    for s in &cp.streams {
        let next = streams.next.get(&s.stream_id).copied().unwrap_or(0);
        if next < s.next_seq {
            streams
                .holes
                .entry(s.stream_id)
                .or_insert((segment, next, 0))
                .2 = s.next_seq - 1;
            streams.next.insert(s.stream_id, s.next_seq);
        } else if next != s.next_seq {
            damage(
                offset,
                format!(
                    "catalog checkpoint gives stream {} next seq {} where its records give {next}",
                    s.stream_id, s.next_seq
                ),
            );
        }
    }
}

fn compare_footer(
    seg: &[u8],
    f: &FooterView,
    found: &BTreeMap<u64, ActiveStreamIndex>,
    catalog: &[CatalogEntry],
    damage: &mut impl FnMut(u64, String),
    check: &mut SegmentCheck,
) {
    let at = f.data_end;
    if f.stream_count as usize != found.len() {
        damage(
            at,
            format!(
                "footer lists {} streams, data holds {}",
                f.stream_count,
                found.len()
            ),
        );
    }
    for i in 0..f.stream_count {
        let Some(s) = f.stream(seg, i) else { continue };
        let Some(ix) = found.get(&s.stream_id) else {
            damage(
                at,
                format!(
                    "footer lists stream {} that has no records here",
                    s.stream_id
                ),
            );
            continue;
        };
        let expect = StreamSummary {
            index_start: s.index_start,
            index_count: s.index_count,
            ..ix.summary(s.stream_id, s.index_start)
        };
        if expect != s {
            damage(
                at,
                format!(
                    "footer summary of stream {} does not match the data",
                    s.stream_id
                ),
            );
        }
        for j in 0..s.index_count {
            let Some(e) = f.index_entry(seg, s.index_start + j) else {
                continue;
            };
            check.index_entries_checked += 1;
            match sessionlog_format::verify_record(
                seg.get(e.offset as usize..).unwrap_or(&[]),
                check.segment.0,
                u64::from(e.offset),
            ) {
                Ok((h, _)) if h.stream_id == s.stream_id && h.seq == e.seq => {}
                _ => damage(
                    u64::from(e.offset),
                    format!(
                        "index entry of stream {} seq {} points at no such record",
                        s.stream_id, e.seq
                    ),
                ),
            }
        }
    }
    match f.catalog(seg) {
        Ok(c) if c == catalog => {}
        Ok(_) => damage(
            at,
            "footer catalog does not match the catalog records".into(),
        ),
        Err(e) => damage(at, format!("footer catalog: {e}")),
    }
}
