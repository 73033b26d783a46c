//! The catalog checkpoint record: the whole live catalog in one payload, so a segment that
//! starts with one (and the segments after it) describe every stream name without any older
//! segment. spec: segment.md#streams-and-the-catalog

use crate::error::{FormatError, Structure};
use crate::footer::{CatalogEntry, CatalogOp};

// spec: segment.md#streams-and-the-catalog (checkpoint payload)
const P_NEXT_STREAM_AT: usize = 0;
const P_COUNT_AT: usize = P_NEXT_STREAM_AT + 8;
/// Bytes of a checkpoint payload before its streams.
const P_STREAMS_AT: usize = P_COUNT_AT + 4;
// Each stream, relative to its start.
const S_ID_AT: usize = 0;
const S_NEXT_SEQ_AT: usize = S_ID_AT + 8;
const S_NAME_LEN_AT: usize = S_NEXT_SEQ_AT + 8;
const S_NAME_AT: usize = S_NAME_LEN_AT + 4;

/// Longest stream name a checkpoint may list, as for a create. spec: segment.md#streams-and-the-catalog
const MAX_NAME_BYTES: usize = 4096;

/// The catalog as a checkpoint states it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogCheckpoint {
    /// The id the next create binds.
    pub next_stream_id: u64,
    /// Every live stream, in increasing id order.
    pub streams: Vec<CheckpointStream>,
}

/// One live stream as a checkpoint lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStream {
    /// Its id.
    pub stream_id: u64,
    /// The seq its next record gets: how many records it had before the checkpoint.
    pub next_seq: u64,
    /// Its name, 1 to 4096 bytes of UTF-8.
    pub name: Vec<u8>,
}

impl CatalogCheckpoint {
    /// The record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.next_stream_id.to_le_bytes());
        out.extend_from_slice(&(self.streams.len() as u32).to_le_bytes());
        self.encode_streams(&mut out);
        out
    }

    /// Bytes of [`encode`](Self::encode)'s output.
    pub fn encoded_len(&self) -> usize {
        P_STREAMS_AT
            + self
                .streams
                .iter()
                .map(|s| S_NAME_AT + s.name.len())
                .sum::<usize>()
    }

    fn encode_streams(&self, out: &mut Vec<u8>) {
        for s in &self.streams {
            out.extend_from_slice(&s.stream_id.to_le_bytes());
            out.extend_from_slice(&s.next_seq.to_le_bytes());
            out.extend_from_slice(&(s.name.len() as u32).to_le_bytes());
            out.extend_from_slice(&s.name);
        }
    }

    /// Decodes and checks a payload: exact length, ids increasing, non-zero and below
    /// `next_stream_id`, names 1 to 4096 bytes of UTF-8 and distinct.
    pub fn decode(payload: &[u8]) -> Result<CatalogCheckpoint, FormatError> {
        let next_stream_id = u64_at(payload, P_NEXT_STREAM_AT)?;
        let listed = payload.get(P_COUNT_AT..).unwrap_or_default();
        // No allocation sized by an untrusted count: each stream takes at least 21 bytes. (A
        // count that is not there is the walk's error.)
        let count = u32_at(listed, 0).unwrap_or(0) as usize;
        let mut streams = Vec::with_capacity(count.min(payload.len() / (S_NAME_AT + 1)));
        let mut names = std::collections::HashSet::new();
        let mut twice = None;
        let walked = walk_streams(next_stream_id, listed, |stream_id, next_seq, name| {
            if !names.insert(name) {
                twice = Some(stream_id);
                return false;
            }
            streams.push(CheckpointStream {
                stream_id,
                next_seq,
                name: name.to_vec(),
            });
            true
        })?;
        if let (None, Some(stream_id)) = (walked, twice) {
            return Err(invalid(format!("name of stream {stream_id} listed twice")));
        }
        Ok(CatalogCheckpoint {
            next_stream_id,
            streams,
        })
    }

    /// The footer's catalog entry for this checkpoint, written as catalog record `seq`:
    /// op checkpoint, `stream_id` the next stream id, `name` the payload from byte 8 on.
    /// spec: segment.md#catalog-entry
    pub fn to_entry(&self, seq: u64) -> CatalogEntry {
        let mut name = Vec::with_capacity(self.encoded_len() - P_COUNT_AT);
        name.extend_from_slice(&(self.streams.len() as u32).to_le_bytes());
        self.encode_streams(&mut name);
        CatalogEntry {
            op: CatalogOp::Checkpoint,
            stream_id: self.next_stream_id,
            seq,
            name,
        }
    }

    /// Walks the streams of the checkpoint a footer's catalog entry carries without copying
    /// it: checks what [`decode`](Self::decode) checks except that names are distinct, and
    /// hands `visit` each stream's id, next seq and name in increasing id order until it
    /// returns `false`. Returns the next stream id and how many streams it lists, or `None`
    /// when `visit` stopped the walk. For a reader that compares the checkpoint with a catalog
    /// of its own (whose names are distinct) rather than adopting it.
    pub fn walk_entry(
        entry: &CatalogEntry,
        visit: impl FnMut(u64, u64, &[u8]) -> bool,
    ) -> Result<Option<(u64, usize)>, FormatError> {
        if entry.op != CatalogOp::Checkpoint {
            return Err(invalid("catalog entry is not a checkpoint".into()));
        }
        let count = walk_streams(entry.stream_id, &entry.name, visit)?;
        Ok(count.map(|count| (entry.stream_id, count)))
    }

    /// The checkpoint a footer's catalog entry carries.
    pub fn from_entry(entry: &CatalogEntry) -> Result<CatalogCheckpoint, FormatError> {
        if entry.op != CatalogOp::Checkpoint {
            return Err(invalid("catalog entry is not a checkpoint".into()));
        }
        let mut payload = Vec::with_capacity(P_COUNT_AT + entry.name.len());
        payload.extend_from_slice(&entry.stream_id.to_le_bytes());
        payload.extend_from_slice(&entry.name);
        CatalogCheckpoint::decode(&payload)
    }
}

/// Walks `listed`, a checkpoint payload from its stream count on (relative offsets in errors
/// are those of the whole payload): exact length, ids increasing, non-zero and below
/// `next_stream_id`, names 1 to 4096 bytes of UTF-8; `visit` gets each stream and may stop
/// the walk (`None`). Returns the count.
fn walk_streams<'a>(
    next_stream_id: u64,
    listed: &'a [u8],
    mut visit: impl FnMut(u64, u64, &'a [u8]) -> bool,
) -> Result<Option<usize>, FormatError> {
    // `listed` starts at the payload's `P_COUNT_AT`: errors name payload offsets.
    let base = P_COUNT_AT;
    let short = |needed: usize| truncated(base + needed, base + listed.len());
    let u64_field = |at: usize| u64_at(listed, at).map_err(|_| short(at + 8));
    let u32_field = |at: usize| u32_at(listed, at).map_err(|_| short(at + 4));
    let count = u32_field(P_COUNT_AT - base)?;
    let mut at = P_STREAMS_AT - base;
    let mut last_id = 0;
    for _ in 0..count {
        let id = u64_field(at + S_ID_AT)?;
        let next_seq = u64_field(at + S_NEXT_SEQ_AT)?;
        let name_len = u32_field(at + S_NAME_LEN_AT)? as usize;
        let name = listed
            .get(at + S_NAME_AT..)
            .and_then(|rest| rest.get(..name_len))
            .ok_or_else(|| short(at + S_NAME_AT + name_len))?;
        if id == 0 || id >= next_stream_id {
            return Err(invalid(format!(
                "stream id {id} outside 1..{next_stream_id}"
            )));
        }
        if last_id >= id {
            return Err(invalid(format!("stream id {id} out of order")));
        }
        if name.is_empty() || name.len() > MAX_NAME_BYTES || std::str::from_utf8(name).is_err() {
            return Err(invalid(format!(
                "name of stream {id} is not 1 to {MAX_NAME_BYTES} bytes of UTF-8"
            )));
        }
        if !visit(id, next_seq, name) {
            return Ok(None);
        }
        last_id = id;
        at += S_NAME_AT + name_len;
    }
    if at != listed.len() {
        return Err(invalid(format!(
            "{} bytes after the last stream",
            listed.len() - at
        )));
    }
    Ok(Some(count as usize))
}

fn truncated(needed: usize, available: usize) -> FormatError {
    FormatError::Truncated {
        structure: Structure::Record,
        needed,
        available,
    }
}

fn invalid(detail: String) -> FormatError {
    FormatError::invalid(Structure::Record, "catalog checkpoint", detail)
}

fn u64_at(b: &[u8], at: usize) -> Result<u64, FormatError> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| truncated(at + 8, b.len()))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, FormatError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| truncated(at + 4, b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(stream_id: u64, name: &[u8]) -> CheckpointStream {
        CheckpointStream {
            stream_id,
            next_seq: stream_id * 10,
            name: name.to_vec(),
        }
    }

    fn sample() -> CatalogCheckpoint {
        CatalogCheckpoint {
            next_stream_id: 5,
            streams: vec![stream(1, b"alpha"), stream(4, b"beta")],
        }
    }

    #[test]
    fn a_cut_payload_is_refused_as_truncated_at_its_own_length() {
        let payload = sample().encode();
        for len in 0..payload.len() {
            match CatalogCheckpoint::decode(&payload[..len]) {
                Err(FormatError::Truncated {
                    needed, available, ..
                }) => {
                    assert_eq!(available, len, "cut to {len}");
                    assert!(
                        needed > len && needed <= payload.len(),
                        "cut to {len}: {needed}"
                    );
                }
                other => panic!("cut to {len}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_checkpoint_round_trips_through_its_payload_and_its_footer_entry() {
        let c = sample();
        let payload = c.encode();
        assert_eq!(payload.len(), c.encoded_len());
        assert_eq!(CatalogCheckpoint::decode(&payload), Ok(c.clone()));
        let entry = c.to_entry(9);
        assert_eq!(entry.seq, 9);
        assert_eq!(entry.name[..], payload[8..]);
        assert_eq!(CatalogCheckpoint::from_entry(&entry), Ok(c));
    }

    #[test]
    fn a_bad_checkpoint_is_refused_and_no_prefix_or_extension_decodes() {
        let payload = sample().encode();
        for len in 0..payload.len() {
            assert!(
                CatalogCheckpoint::decode(&payload[..len]).is_err(),
                "cut at {len}"
            );
        }
        let mut longer = payload.clone();
        longer.push(0);
        assert!(CatalogCheckpoint::decode(&longer).is_err());
        let bad = [
            CatalogCheckpoint {
                next_stream_id: 4,
                ..sample()
            },
            CatalogCheckpoint {
                next_stream_id: 5,
                streams: vec![stream(4, b"a"), stream(1, b"b")],
            },
            CatalogCheckpoint {
                next_stream_id: 5,
                streams: vec![stream(1, b"a"), stream(2, b"a")],
            },
            CatalogCheckpoint {
                next_stream_id: 5,
                streams: vec![stream(1, b"")],
            },
            CatalogCheckpoint {
                next_stream_id: 5,
                streams: vec![stream(0, b"z")],
            },
        ];
        for c in bad {
            assert!(CatalogCheckpoint::decode(&c.encode()).is_err(), "{c:?}");
        }
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..200usize {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 7) as u8
                })
                .collect();
            let _ = CatalogCheckpoint::decode(&bytes);
        }
    }
}
