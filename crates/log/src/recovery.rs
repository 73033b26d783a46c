//! Recovery as decision tables. spec: recovery.md
//!
//! Recovery looks at a few facts and maps each combination to exactly one decision. Two
//! tables: one per segment file (is its header valid, is it the last segment, does its footer
//! verify) and one per place inside a segment where no valid batch starts (what is there, what
//! lies after it, is the segment sealed, which mode). `tests::every_case_matches_exactly_one_row`
//! enumerates every combination.

use sessionlog_format::{
    verify_batch_in, BatchView, SegmentCrc, BATCH_HEADER_LEN, BATCH_MAGIC, FOOTER_MAGIC,
    RECORD_ALIGN,
};

use crate::options::RecoveryMode;

/// What the segment header looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderFact {
    /// It verifies and names this store.
    Valid,
    /// The file is shorter than a header and what is there is zero, or the header is all
    /// zeros.
    Missing,
    /// Non-zero bytes that do not verify, or a header of another store.
    Damaged,
}

impl std::fmt::Display for HeaderFact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HeaderFact::Valid => "valid",
            HeaderFact::Missing => "missing (zero bytes where the header belongs)",
            HeaderFact::Damaged => {
                "damaged (bytes that do not verify as this store's segment header)"
            }
        })
    }
}

/// Where the segment stands in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionFact {
    /// The highest-numbered segment.
    Last,
    /// Any other segment: it was sealed before the next one was created.
    NotLast,
}

/// Whether the footer at the end of the file verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FooterFact {
    /// Trailer and footer verify.
    Valid,
    /// Missing or damaged.
    Invalid,
}

/// Whether any valid batch exists anywhere in the file after the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaterBatchFact {
    /// At least one.
    Some,
    /// None.
    None,
}

/// What to do with a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentDecision {
    /// Use it as a sealed segment through its footer.
    UseSealed,
    /// Sealed, but the footer is bad: rebuild it by scanning the data, then use it.
    RebuildFooter,
    /// The active segment: scan its batches.
    ScanActive,
    /// A segment whose creation was cut by a crash: its header never became durable, so
    /// nothing acknowledged can be in it. Remove it.
    DiscardTornSegment,
    /// Refuse to open.
    Corrupt,
}

/// One row of the segment table; an empty slice matches any value.
#[derive(Debug)]
pub struct SegmentRow {
    /// Header facts this row covers.
    pub header: &'static [HeaderFact],
    /// Positions this row covers.
    pub position: &'static [PositionFact],
    /// Footer facts this row covers.
    pub footer: &'static [FooterFact],
    /// Later-batch facts this row covers.
    pub later: &'static [LaterBatchFact],
    /// Modes this row covers.
    pub mode: &'static [RecoveryMode],
    /// The decision.
    pub decision: SegmentDecision,
    /// Why, for reports and the spec.
    pub why: &'static str,
}

use FooterFact as F;
use HeaderFact as H;
use LaterBatchFact as L;
use PositionFact as P;
use RecoveryMode as M;

/// The segment table. spec: recovery.md#segment-table
pub static SEGMENT_TABLE: &[SegmentRow] = &[
    SegmentRow {
        header: &[H::Valid],
        position: &[],
        footer: &[F::Valid],
        later: &[],
        mode: &[],
        decision: SegmentDecision::UseSealed,
        why: "a sealed segment",
    },
    SegmentRow {
        header: &[H::Valid],
        position: &[P::NotLast],
        footer: &[F::Invalid],
        later: &[],
        mode: &[M::TolerateTornTail],
        decision: SegmentDecision::RebuildFooter,
        why: "every segment but the last was sealed; its footer is derived data",
    },
    SegmentRow {
        header: &[H::Valid],
        position: &[P::NotLast],
        footer: &[F::Invalid],
        later: &[],
        mode: &[M::AbsoluteConsistency],
        decision: SegmentDecision::Corrupt,
        why: "a damaged footer is damage in this mode; nothing is rewritten",
    },
    SegmentRow {
        header: &[H::Valid],
        position: &[P::Last],
        footer: &[F::Invalid],
        later: &[],
        mode: &[],
        decision: SegmentDecision::ScanActive,
        why: "the active segment",
    },
    SegmentRow {
        header: &[H::Missing, H::Damaged],
        position: &[P::NotLast],
        footer: &[],
        later: &[],
        mode: &[],
        decision: SegmentDecision::Corrupt,
        why: "a sealed segment lost its header",
    },
    SegmentRow {
        header: &[H::Missing, H::Damaged],
        position: &[P::Last],
        footer: &[],
        later: &[L::Some],
        mode: &[],
        decision: SegmentDecision::Corrupt,
        why: "records exist behind a bad header, which is synced before any record",
    },
    SegmentRow {
        header: &[H::Missing, H::Damaged],
        position: &[P::Last],
        footer: &[],
        later: &[L::None],
        mode: &[M::TolerateTornTail],
        decision: SegmentDecision::DiscardTornSegment,
        why: "segment creation torn by a crash; it never held a record",
    },
    SegmentRow {
        header: &[H::Missing, H::Damaged],
        position: &[P::Last],
        footer: &[],
        later: &[L::None],
        mode: &[M::AbsoluteConsistency],
        decision: SegmentDecision::Corrupt,
        why: "a torn segment creation is damage in this mode",
    },
];

/// What lies at a place where no valid batch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HereFact {
    /// A batch header of all zeros.
    Zero,
    /// The start of a footer.
    FooterStart,
    /// Anything else that does not verify.
    Garbage,
    /// A batch that verifies but whose records do not continue their streams' seqs.
    OutOfSequence,
}

/// What lies after that place, up to the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFact {
    /// Only zero bytes.
    OnlyZeros,
    /// Non-zero bytes, but no valid batch.
    NoValidBatch,
    /// A valid batch whose `synced_through` does not reach this place: it, too, was unsynced.
    UnattestedBatch,
    /// A valid batch whose `synced_through` lies past this place: these bytes were durable.
    AttestedBatch,
}

/// Whether the segment is sealed or active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleFact {
    /// The active segment.
    Active,
    /// A sealed segment being scanned (to rebuild its footer, or by `verify`).
    Sealed,
}

/// What to do at a place where no valid batch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailDecision {
    /// The data ends here; nothing is lost.
    EndOfData,
    /// Cut here: the bytes from here on are an unsynced tail torn by a crash.
    CutTornTail,
    /// Refuse: acknowledged data is damaged.
    Corrupt,
}

/// One row of the tail table; an empty slice matches any value.
#[derive(Debug)]
pub struct TailRow {
    /// Facts about this place.
    pub here: &'static [HereFact],
    /// Facts about what follows.
    pub after: &'static [AfterFact],
    /// Segment role.
    pub role: &'static [RoleFact],
    /// Modes.
    pub mode: &'static [RecoveryMode],
    /// The decision.
    pub decision: TailDecision,
    /// Why.
    pub why: &'static str,
}

use AfterFact as A;
use HereFact as W;
use RoleFact as R;

/// The tail table. spec: recovery.md#tail-table
pub static TAIL_TABLE: &[TailRow] = &[
    TailRow {
        here: &[W::FooterStart],
        after: &[],
        role: &[R::Sealed],
        mode: &[],
        decision: TailDecision::EndOfData,
        why: "sealed data ends at its footer",
    },
    TailRow {
        here: &[W::Zero, W::Garbage, W::OutOfSequence],
        after: &[],
        role: &[R::Sealed],
        mode: &[],
        decision: TailDecision::Corrupt,
        why: "sealed data must be valid up to its footer",
    },
    TailRow {
        here: &[W::OutOfSequence],
        after: &[],
        role: &[R::Active],
        mode: &[],
        decision: TailDecision::Corrupt,
        why: "a valid batch that breaks its streams' sequence is never produced by the writer",
    },
    TailRow {
        here: &[W::Zero],
        after: &[A::OnlyZeros],
        role: &[R::Active],
        mode: &[],
        decision: TailDecision::EndOfData,
        why: "the unwritten rest of the segment",
    },
    TailRow {
        here: &[W::Zero, W::Garbage, W::FooterStart],
        after: &[A::AttestedBatch],
        role: &[R::Active],
        mode: &[],
        decision: TailDecision::Corrupt,
        why: "a later batch proves these bytes were durable",
    },
    TailRow {
        here: &[W::Garbage, W::FooterStart],
        after: &[A::OnlyZeros, A::NoValidBatch, A::UnattestedBatch],
        role: &[R::Active],
        mode: &[M::TolerateTornTail],
        decision: TailDecision::CutTornTail,
        why: "a write (or a seal) torn by a crash, never acknowledged",
    },
    TailRow {
        here: &[W::Zero],
        after: &[A::NoValidBatch, A::UnattestedBatch],
        role: &[R::Active],
        mode: &[M::TolerateTornTail],
        decision: TailDecision::CutTornTail,
        why: "unsynced pages reached the disk out of order",
    },
    TailRow {
        here: &[W::Garbage, W::FooterStart],
        after: &[A::OnlyZeros, A::NoValidBatch, A::UnattestedBatch],
        role: &[R::Active],
        mode: &[M::AbsoluteConsistency],
        decision: TailDecision::Corrupt,
        why: "a torn tail is damage in this mode",
    },
    TailRow {
        here: &[W::Zero],
        after: &[A::NoValidBatch, A::UnattestedBatch],
        role: &[R::Active],
        mode: &[M::AbsoluteConsistency],
        decision: TailDecision::Corrupt,
        why: "a torn tail is damage in this mode",
    },
];

/// Whether every byte is zero; compares page-sized chunks against zeros (a `memcmp`), so
/// checking the unwritten rest of a 64 MiB segment costs milliseconds.
pub fn is_zero(bytes: &[u8]) -> bool {
    static ZEROES: [u8; 4096] = [0; 4096];
    bytes.chunks(ZEROES.len()).all(|c| c == &ZEROES[..c.len()])
}

fn matches<T: PartialEq>(allowed: &[T], value: &T) -> bool {
    allowed.is_empty() || allowed.contains(value)
}

/// The rows of the segment table that match these facts (exactly one, by construction).
pub fn segment_rows(
    h: HeaderFact,
    p: PositionFact,
    f: FooterFact,
    l: LaterBatchFact,
    m: RecoveryMode,
) -> impl Iterator<Item = &'static SegmentRow> {
    SEGMENT_TABLE.iter().filter(move |r| {
        matches(r.header, &h)
            && matches(r.position, &p)
            && matches(r.footer, &f)
            && matches(r.later, &l)
            && matches(r.mode, &m)
    })
}

/// The decision of the segment table.
pub fn decide_segment(
    h: HeaderFact,
    p: PositionFact,
    f: FooterFact,
    l: LaterBatchFact,
    m: RecoveryMode,
) -> &'static SegmentRow {
    // Every combination matches a row (tested); were one not to, refusing is the safe answer.
    segment_rows(h, p, f, l, m)
        .next()
        .unwrap_or(&SEGMENT_TABLE[4])
}

/// The rows of the tail table that match these facts (exactly one, by construction).
pub fn tail_rows(
    w: HereFact,
    a: AfterFact,
    r: RoleFact,
    m: RecoveryMode,
) -> impl Iterator<Item = &'static TailRow> {
    TAIL_TABLE.iter().filter(move |row| {
        matches(row.here, &w)
            && matches(row.after, &a)
            && matches(row.role, &r)
            && matches(row.mode, &m)
    })
}

/// The decision of the tail table.
pub fn decide_tail(w: HereFact, a: AfterFact, r: RoleFact, m: RecoveryMode) -> &'static TailRow {
    tail_rows(w, a, r, m).next().unwrap_or(&TAIL_TABLE[1])
}

/// Classifies the bytes at `at`, a place where no valid batch starts.
pub fn here_fact(seg: &[u8], at: usize) -> HereFact {
    let head = seg
        .get(at..at + BATCH_HEADER_LEN.min(seg.len().saturating_sub(at)))
        .unwrap_or(&[]);
    if is_zero(head) {
        HereFact::Zero
    } else if head.get(..4) == Some(&FOOTER_MAGIC.to_le_bytes()[..]) {
        HereFact::FooterStart
    } else {
        HereFact::Garbage
    }
}

/// Looks at everything after `at` (exclusive of the 8 bytes at `at`) for the tail table. Every
/// valid batch after the damage is consulted: if any of them attests that the writer knew
/// the damaged place to be durable, the damage hit acknowledged data.
pub fn after_fact(seg: &[u8], segment_id: u64, at: usize) -> AfterFact {
    let start = at + RECORD_ALIGN;
    // The common case, a preallocated segment's unwritten rest, needs no batch search.
    if is_zero(seg.get(start..).unwrap_or(&[])) {
        return AfterFact::OnlyZeros;
    }
    let mut found = AfterFact::NoValidBatch;
    for batch in valid_batches_from(seg, segment_id, start) {
        if batch.header.synced_through > at as u64 {
            return AfterFact::AttestedBatch;
        }
        found = AfterFact::UnattestedBatch;
    }
    found
}

/// Whether any valid batch starts anywhere at or after `from`.
pub fn any_valid_batch(seg: &[u8], segment_id: u64, from: usize) -> bool {
    next_valid_batch(seg, segment_id, from).is_some()
}

/// The first valid batch at or after `from` (rounded up to the alignment), found by trying
/// every aligned position: the one search behind every resynchronisation after damage.
pub fn next_valid_batch(seg: &[u8], segment_id: u64, from: usize) -> Option<BatchView<'_>> {
    next_valid_batch_in(seg, &SegmentCrc::new(segment_id), from, seg.len())
}

/// [`next_valid_batch`] with the segment's checksum state already seeded, trying only the
/// positions before `before` (the batch found may end past it).
pub(crate) fn next_valid_batch_in<'a>(
    seg: &'a [u8],
    seeded: &SegmentCrc,
    from: usize,
    before: usize,
) -> Option<BatchView<'a>> {
    let mut q = from.next_multiple_of(RECORD_ALIGN);
    while q < before && q + BATCH_HEADER_LEN <= seg.len() {
        if seg[q..q + 4] == BATCH_MAGIC.to_le_bytes() {
            if let Ok(batch) = verify_batch_in(&seg[q..], seeded, q as u64) {
                return Some(batch);
            }
        }
        q += RECORD_ALIGN;
    }
    None
}

/// Every valid batch at or after `from`, each search resuming after the previous batch.
pub fn valid_batches_from(
    seg: &[u8],
    segment_id: u64,
    from: usize,
) -> impl Iterator<Item = BatchView<'_>> {
    let mut next = Some(from);
    std::iter::from_fn(move || {
        let batch = next_valid_batch(seg, segment_id, next?)?;
        next = Some(batch.end_offset() as usize);
        Some(batch)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODES: [RecoveryMode; 2] = [M::AbsoluteConsistency, M::TolerateTornTail];

    #[test]
    fn every_case_matches_exactly_one_row() {
        for h in [H::Valid, H::Missing, H::Damaged] {
            for p in [P::Last, P::NotLast] {
                for f in [F::Valid, F::Invalid] {
                    for l in [L::Some, L::None] {
                        for m in MODES {
                            let n = segment_rows(h, p, f, l, m).count();
                            assert_eq!(
                                n, 1,
                                "segment facts {h:?} {p:?} {f:?} {l:?} {m:?} match {n} rows"
                            );
                        }
                    }
                }
            }
        }
        for w in [W::Zero, W::FooterStart, W::Garbage, W::OutOfSequence] {
            for a in [
                A::OnlyZeros,
                A::NoValidBatch,
                A::UnattestedBatch,
                A::AttestedBatch,
            ] {
                for r in [R::Active, R::Sealed] {
                    for m in MODES {
                        let n = tail_rows(w, a, r, m).count();
                        assert_eq!(n, 1, "tail facts {w:?} {a:?} {r:?} {m:?} match {n} rows");
                    }
                }
            }
        }
    }

    #[test]
    fn every_row_is_reachable() {
        for row in SEGMENT_TABLE {
            let mut hit = false;
            for h in [H::Valid, H::Missing, H::Damaged] {
                for p in [P::Last, P::NotLast] {
                    for f in [F::Valid, F::Invalid] {
                        for l in [L::Some, L::None] {
                            for m in MODES {
                                hit |= std::ptr::eq(decide_segment(h, p, f, l, m), row);
                            }
                        }
                    }
                }
            }
            assert!(hit, "segment row never chosen: {}", row.why);
        }
        for row in TAIL_TABLE {
            let mut hit = false;
            for w in [W::Zero, W::FooterStart, W::Garbage, W::OutOfSequence] {
                for a in [
                    A::OnlyZeros,
                    A::NoValidBatch,
                    A::UnattestedBatch,
                    A::AttestedBatch,
                ] {
                    for r in [R::Active, R::Sealed] {
                        for m in MODES {
                            hit |= std::ptr::eq(decide_tail(w, a, r, m), row);
                        }
                    }
                }
            }
            assert!(hit, "tail row never chosen: {}", row.why);
        }
    }

    #[test]
    fn a_torn_tail_is_cut_only_when_the_mode_allows() {
        assert_eq!(
            decide_tail(W::Garbage, A::OnlyZeros, R::Active, M::TolerateTornTail).decision,
            TailDecision::CutTornTail
        );
        assert_eq!(
            decide_tail(W::Garbage, A::OnlyZeros, R::Active, M::AbsoluteConsistency).decision,
            TailDecision::Corrupt
        );
        assert_eq!(
            decide_tail(W::Garbage, A::AttestedBatch, R::Active, M::TolerateTornTail).decision,
            TailDecision::Corrupt
        );
    }
}
