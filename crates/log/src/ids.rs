//! Identifier newtypes, so a stream id is never passed where a seq is meant.

use std::fmt;

/// A stream (one session's records) in a log. Stream 0 is the log's own catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

/// A record's position in its stream: 0, 1, 2, … with no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

/// A segment file's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

/// A position in the whole log: segment number in the high 32 bits, byte offset in the low
/// 32. Positions compare in the order the log wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    pub(crate) fn new(segment: SegmentId, offset: u64) -> Lsn {
        Lsn((segment.0 << 32) | offset)
    }

    /// The segment this position lies in.
    pub fn segment(self) -> SegmentId {
        SegmentId(self.0 >> 32)
    }

    /// Byte offset inside the segment.
    pub fn offset(self) -> u64 {
        self.0 & 0xFFFF_FFFF
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.segment().0, self.offset())
    }
}
