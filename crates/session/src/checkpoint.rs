//! The checkpoint codec: a [`SessionState`] as bytes and back. spec: format-spec/cache.md#session-state
//!
//! A checkpoint is exactly the state, so resuming a session costs the events after it:
//! decode, then fold the rest. It records the identity of what made it (state version,
//! format version name and fingerprint, token counter) and decoding refuses any other.
//! Decoding never panics and never trusts a count: every length is checked against the
//! bytes left before anything is allocated, and the decoded state is checked for the
//! invariants the fold keeps (nodes below the next seq, increasing order keys, one slot per
//! pending call), so a damaged checkpoint is refused rather than resumed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::compaction::CompactionLocks;
use crate::event::Seq;
use crate::header::SessionHeader;
use crate::repair::{PendingCall, TurnTracker};
use crate::state::{LastEvent, RequestSeqs, SessionState};
use crate::surface::{NodeFacts, Surface};
use crate::tokens::projection::{Anchor, Envelope, TokenTally};
use crate::tokens::{
    CumulativeUsage, RequestKind, RequestUsage, TokenCounter, UnreadableUsage, Usage, UsageLedger,
    UsageShape, LEDGER_RECENT,
};
use crate::version::FormatVersion;

/// `SLST` in little-endian byte order. spec: cache.md#session-state
pub const CHECKPOINT_MAGIC: u32 = u32::from_le_bytes(*b"SLST");

/// The version of the checkpoint encoding and of the fold's meaning: bump it whenever
/// either changes, so older checkpoints are rebuilt from the log.
pub const CHECKPOINT_STATE_VERSION: u32 = 3;

/// Why a checkpoint was not used. Every case means the same thing to the caller: rebuild
/// the state by folding the session from the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The bytes do not start with the checkpoint magic.
    #[error("not a session state checkpoint (bad magic); rebuild the state from the log")]
    NotACheckpoint,
    /// A checkpoint of another state version.
    #[error(
        "checkpoint has state version {found}, this build reads {expected}; rebuild the state \
         from the log"
    )]
    StateVersion {
        /// The version in the checkpoint.
        found: u32,
        /// The version this build writes and reads.
        expected: u32,
    },
    /// A checkpoint made under another format version (name or table).
    #[error(
        "checkpoint was made under format version {found:?}, the session uses {expected:?} \
         (or another table of it); rebuild the state from the log"
    )]
    FormatVersion {
        /// The format version named in the checkpoint.
        found: String,
        /// The format version the caller folds with.
        expected: String,
    },
    /// A checkpoint made with another token counter, or with tokens measured where the
    /// caller measures none (or the reverse).
    #[error(
        "checkpoint measured tokens with {found:?}, the caller with {expected:?}; rebuild the \
         state from the log"
    )]
    TokenCounter {
        /// The counter named in the checkpoint (`None`: tokens not measured).
        found: Option<String>,
        /// The caller's counter.
        expected: Option<String>,
    },
    /// Bytes that do not decode to a state the fold could have made.
    #[error("checkpoint is damaged at byte {offset}: {detail}; rebuild the state from the log")]
    Damaged {
        /// Where decoding stopped.
        offset: usize,
        /// What is wrong.
        detail: &'static str,
    },
}

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    /// A length as u64 (lengths of in-memory collections always fit).
    fn len(&mut self, n: usize) {
        self.u64(u64::try_from(n).unwrap_or(u64::MAX));
    }
    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                f(self, v);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

type Decoded<T> = Result<T, CheckpointError>;

impl<'a> Reader<'a> {
    fn damaged(&self, detail: &'static str) -> CheckpointError {
        CheckpointError::Damaged {
            offset: self.offset,
            detail,
        }
    }
    fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        let rest = self.bytes.get(self.offset..).unwrap_or_default();
        let Some(head) = rest.get(..n) else {
            return Err(self.damaged("truncated"));
        };
        self.offset += n;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Decoded<[u8; N]> {
        let bytes = self.take(N)?;
        bytes.try_into().map_err(|_| self.damaged("truncated"))
    }
    fn u8(&mut self) -> Decoded<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Decoded<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Decoded<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Decoded<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn bool(&mut self) -> Decoded<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.damaged("a flag is neither 0 nor 1")),
        }
    }
    /// A count of items each at least `min_item` bytes long: refused when the bytes left
    /// cannot hold them, so a damaged count never allocates.
    fn count(&mut self, min_item: usize) -> Decoded<usize> {
        let n = self.u64()?;
        let left = self.bytes.len().saturating_sub(self.offset);
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(min_item.max(1)) <= left => Ok(n),
            _ => Err(self.damaged("a count exceeds the bytes left")),
        }
    }
    fn str(&mut self) -> Decoded<&'a str> {
        let n = self.count(1)?;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map_err(|_| self.damaged("a string is not UTF-8"))
    }
    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Decoded<T>) -> Decoded<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => f(self).map(Some),
            _ => Err(self.damaged("an option tag is neither 0 nor 1")),
        }
    }
    fn end(&self) -> Decoded<()> {
        if self.offset == self.bytes.len() {
            Ok(())
        } else {
            Err(self.damaged("bytes after the end of the state"))
        }
    }
}

fn kind_tag(kind: RequestKind) -> u8 {
    match kind {
        RequestKind::Settlement => 0,
        RequestKind::CompactionSummary => 1,
    }
}

fn shape_tag(shape: UsageShape) -> u8 {
    match shape {
        UsageShape::Dsh => 0,
        UsageShape::Anthropic => 1,
        UsageShape::OpenAiChat => 2,
        UsageShape::OpenAiResponses => 3,
        UsageShape::DeepSeek => 4,
        UsageShape::Gemini => 5,
    }
}

impl SessionState {
    /// Appends the checkpoint of this state to `out`. spec: cache.md#session-state
    ///
    /// An atomic change in progress is not part of the state: checkpoint between changes.
    pub fn encode_checkpoint(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        w.u32(CHECKPOINT_MAGIC);
        w.u32(CHECKPOINT_STATE_VERSION);
        w.str(self.version.name());
        w.u64(self.version.fingerprint());
        w.opt(self.tokens.as_ref(), |w, t| w.str(t.counter().name()));
        w.str(self.header.raw());
        w.u64(self.next_seq);
        w.opt(self.last, |w, last| {
            w.bool(last.end_seed);
            w.i64(last.time);
        });
        encode_surface(&mut w, &self.surface);
        encode_tracker(&mut w, &self.tracker);
        w.opt(self.requests.header, Writer::u64);
        w.opt(self.requests.context, Writer::u64);
        encode_locks(&mut w, &self.locks);
        if let Some(tokens) = &self.tokens {
            encode_tokens(&mut w, tokens);
        }
    }

    /// Decodes a checkpoint made by [`SessionState::encode_checkpoint`] for a session folded
    /// under `version`, measuring tokens with `counter` (or not, with `None`). Refuses a
    /// checkpoint of another state version, format version or counter, and any bytes that
    /// are not a state the fold could have made; never panics.
    pub fn decode_checkpoint(
        bytes: &[u8],
        version: FormatVersion,
        counter: Option<Arc<dyn TokenCounter>>,
    ) -> Result<SessionState, CheckpointError> {
        let mut r = Reader { bytes, offset: 0 };
        if bytes.get(..4) != Some(&CHECKPOINT_MAGIC.to_le_bytes()[..]) {
            return Err(CheckpointError::NotACheckpoint);
        }
        r.u32()?;
        let state_version = r.u32()?;
        if state_version != CHECKPOINT_STATE_VERSION {
            return Err(CheckpointError::StateVersion {
                found: state_version,
                expected: CHECKPOINT_STATE_VERSION,
            });
        }
        let name = r.str()?;
        let fingerprint = r.u64()?;
        let found = r.opt(Reader::str)?;
        let expected = counter.as_ref().map(|c| c.name());
        if found != expected {
            return Err(CheckpointError::TokenCounter {
                found: found.map(str::to_owned),
                expected: expected.map(str::to_owned),
            });
        }
        let header_at = r.offset;
        let header = SessionHeader::parse(r.str()?).map_err(|_| CheckpointError::Damaged {
            offset: header_at,
            detail: "the session header does not parse",
        })?;
        // A session declaring DSH V1 or later is folded under its own format's rules (the
        // state picks them from the header), so its checkpoint names that format, not the
        // caller's default.
        let mut state = SessionState::new(header, version);
        if name != state.version().name() || fingerprint != state.version().fingerprint() {
            return Err(CheckpointError::FormatVersion {
                found: name.to_owned(),
                expected: state.version().name().to_owned(),
            });
        }
        let next_seq = r.u64()?;
        let last = r.opt(|r| {
            Ok(LastEvent {
                end_seed: r.bool()?,
                time: r.i64()?,
            })
        })?;
        if last.is_some() != (next_seq > 0) {
            return Err(r.damaged("the last event disagrees with the next seq"));
        }
        let surface = decode_surface(&mut r, next_seq)?;
        let tracker = decode_tracker(&mut r, next_seq)?;
        let requests = RequestSeqs {
            header: decode_seq(&mut r, next_seq)?,
            context: decode_seq(&mut r, next_seq)?,
        };
        let locks = decode_locks(&mut r)?;
        let tokens = match counter {
            Some(counter) => Some(decode_tokens(&mut r, counter, &surface, next_seq)?),
            None => None,
        };
        r.end()?;
        state.next_seq = next_seq;
        state.last = last;
        state.surface = surface;
        state.tracker = tracker;
        state.requests = requests;
        state.locks = locks;
        state.tokens = tokens;
        Ok(state)
    }
}

fn encode_locks(w: &mut Writer<'_>, locks: &CompactionLocks) {
    w.len(locks.entries().count());
    for (id, turn, replaced) in locks.entries() {
        w.str(id);
        w.str(turn);
        w.bool(replaced);
    }
}

// Per lock at least: two empty strings (8 bytes each) and the flag.
const LOCK_BYTES: usize = 17;

fn decode_locks(r: &mut Reader<'_>) -> Decoded<CompactionLocks> {
    let count = r.count(LOCK_BYTES)?;
    let mut locks = CompactionLocks::new();
    for _ in 0..count {
        let id = r.str()?;
        let turn = r.str()?;
        let replaced = r.bool()?;
        if !locks.restore(id, turn, replaced) {
            return Err(r.damaged("a compaction lock is listed twice"));
        }
    }
    Ok(locks)
}

/// An optional seq of an event already folded (below `next_seq`).
fn decode_seq(r: &mut Reader<'_>, next_seq: u64) -> Decoded<Option<u64>> {
    let seq = r.opt(Reader::u64)?;
    if seq.is_some_and(|s| s >= next_seq) {
        return Err(r.damaged("a seq at or past the next seq"));
    }
    Ok(seq)
}

// Per node: seq 8, key 8, flags 1, estimate 4.
const NODE_BYTES: usize = 21;

fn encode_surface(w: &mut Writer<'_>, surface: &Surface) {
    w.u64(surface.replace_generation());
    w.u64(surface.next_key());
    w.len(surface.len());
    for (seq, key, node) in surface.nodes() {
        w.u64(seq);
        w.u64(key);
        w.u8(u8::from(node.message));
        w.u32(node.estimate);
    }
}

fn decode_surface(r: &mut Reader<'_>, next_seq: u64) -> Decoded<Surface> {
    let generation = r.u64()?;
    let next_key = r.u64()?;
    let n = r.count(NODE_BYTES)?;
    let mut nodes = Vec::with_capacity(n);
    let mut seen = HashSet::with_capacity(n);
    let mut previous_key = None;
    for _ in 0..n {
        let seq = r.u64()?;
        let key = r.u64()?;
        let message = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(r.damaged("unknown surface node flags")),
        };
        let estimate = r.u32()?;
        if seq >= next_seq || !seen.insert(seq) {
            return Err(r.damaged("a surface node past the next seq or listed twice"));
        }
        if previous_key.is_some_and(|p| key <= p) || key >= next_key {
            return Err(r.damaged("surface order keys out of order"));
        }
        previous_key = Some(key);
        nodes.push((seq, key, NodeFacts { message, estimate }));
    }
    Ok(Surface::from_nodes(&nodes, next_key, generation))
}

fn encode_tracker(w: &mut Writer<'_>, tracker: &TurnTracker) {
    w.bool(tracker.stepped);
    w.opt(tracker.last_turn, Writer::u64);
    w.opt(tracker.last_step, Writer::u64);
    w.opt(tracker.open_turn.as_deref(), Writer::str);
    w.opt(tracker.open_step.as_deref(), Writer::str);
    w.len(tracker.pending.len());
    for slot in &tracker.pending {
        w.opt(slot.as_ref(), |w, call| {
            w.str(&call.call_id);
            w.str(&call.step);
            w.opt(call.call_seq, Writer::u64);
        });
    }
}

fn decode_tracker(r: &mut Reader<'_>, next_seq: u64) -> Decoded<TurnTracker> {
    let stepped = r.bool()?;
    let last_turn = r.opt(Reader::u64)?;
    let last_step = r.opt(Reader::u64)?;
    let open_turn = r.opt(|r| r.str().map(str::to_owned))?;
    let open_step = r.opt(|r| r.str().map(str::to_owned))?;
    let n = r.count(1)?;
    let mut pending = Vec::with_capacity(n);
    let mut index = HashMap::new();
    for slot in 0..n {
        let call = r.opt(|r| {
            Ok(PendingCall {
                call_id: r.str()?.to_owned(),
                step: r.str()?.to_owned(),
                call_seq: decode_seq(r, next_seq)?,
            })
        })?;
        if let Some(call) = &call {
            if index.insert(call.call_id.clone(), slot).is_some() {
                return Err(r.damaged("a pending call listed twice"));
            }
        }
        pending.push(call);
    }
    Ok(TurnTracker {
        open_turn,
        open_step,
        pending,
        index,
        stepped,
        last_turn,
        last_step,
    })
}

fn encode_tokens(w: &mut Writer<'_>, tokens: &TokenTally) {
    w.opt(tokens.envelope.as_ref(), |w, e| {
        w.u64(e.fingerprint);
        w.u64(e.tokens);
    });
    w.opt(tokens.context_window, Writer::u64);
    w.opt(tokens.anchor.as_ref(), |w, a| {
        w.u64(a.seq.get());
        w.u64(a.prompt_tokens);
        w.u64(a.surface_tokens_at_request);
        w.opt(a.envelope_fingerprint, Writer::u64);
    });
    encode_ledger(w, &tokens.ledger);
}

fn decode_tokens(
    r: &mut Reader<'_>,
    counter: Arc<dyn TokenCounter>,
    surface: &Surface,
    next_seq: u64,
) -> Decoded<TokenTally> {
    let envelope = r.opt(|r| {
        Ok(Envelope {
            fingerprint: r.u64()?,
            tokens: r.u64()?,
        })
    })?;
    let context_window = r.opt(Reader::u64)?;
    let anchor = r.opt(|r| {
        let seq = r.u64()?;
        if seq >= next_seq {
            return Err(r.damaged("the pressure anchor is past the next seq"));
        }
        Ok(Anchor {
            seq: Seq(seq),
            prompt_tokens: r.u64()?,
            surface_tokens_at_request: r.u64()?,
            envelope_fingerprint: r.opt(Reader::u64)?,
        })
    })?;
    let ledger = decode_ledger(r, next_seq)?;
    // The fold keeps the sum of the current nodes' estimates; it is not stored twice.
    let surface_tokens = surface
        .nodes()
        .map(|(_, _, node)| u64::from(node.estimate))
        .sum();
    Ok(TokenTally::from_parts(
        counter,
        surface_tokens,
        ledger,
        envelope,
        context_window,
        anchor,
    ))
}

// Per request at least: seq 8, kind 1, turn tag 1, step tag 1, two string lengths 16,
// five buckets 40, shape 1.
const REQUEST_BYTES: usize = 68;

fn encode_request(w: &mut Writer<'_>, request: &RequestUsage) {
    w.u64(request.seq.get());
    w.u8(kind_tag(request.kind));
    w.opt(request.turn, Writer::i64);
    w.opt(request.step, Writer::i64);
    w.str(&request.provider);
    w.str(&request.model);
    encode_usage(w, &request.usage);
    w.u8(shape_tag(request.shape));
}

fn encode_usage(w: &mut Writer<'_>, u: &Usage) {
    for bucket in [u.input, u.output, u.cache_read, u.cache_write, u.reasoning] {
        w.u64(bucket);
    }
}

fn encode_ledger(w: &mut Writer<'_>, ledger: &UsageLedger) {
    for total in [ledger.settlements(), ledger.auxiliary()] {
        w.u64(total.requests());
        encode_usage(w, total.usage());
    }
    match ledger.last_settlement() {
        Some(request) => {
            w.u8(1);
            encode_request(w, request);
        }
        None => w.u8(0),
    }
    w.len(ledger.requests().len());
    for request in ledger.requests() {
        encode_request(w, request);
    }
    w.u64(ledger.unreadable_count());
    w.len(ledger.unreadable().len());
    for unreadable in ledger.unreadable() {
        w.u64(unreadable.seq.get());
        w.u8(kind_tag(unreadable.kind));
        w.len(unreadable.keys.len());
        for key in &unreadable.keys {
            w.str(key);
        }
    }
}

fn decode_kind(r: &mut Reader<'_>) -> Decoded<RequestKind> {
    match r.u8()? {
        0 => Ok(RequestKind::Settlement),
        1 => Ok(RequestKind::CompactionSummary),
        _ => Err(r.damaged("unknown request kind")),
    }
}

fn decode_shape(r: &mut Reader<'_>) -> Decoded<UsageShape> {
    Ok(match r.u8()? {
        0 => UsageShape::Dsh,
        1 => UsageShape::Anthropic,
        2 => UsageShape::OpenAiChat,
        3 => UsageShape::OpenAiResponses,
        4 => UsageShape::DeepSeek,
        5 => UsageShape::Gemini,
        _ => return Err(r.damaged("unknown usage shape")),
    })
}

/// A seq of a folded event, strictly after `previous` (ledger records are in log order).
fn decode_record_seq(
    r: &mut Reader<'_>,
    previous: &mut Option<u64>,
    next_seq: u64,
) -> Decoded<Seq> {
    let seq = r.u64()?;
    if seq >= next_seq || previous.is_some_and(|p| seq <= p) {
        return Err(r.damaged("usage records out of log order"));
    }
    *previous = Some(seq);
    Ok(Seq(seq))
}

/// Reuses the previous record's text when equal, as the fold does, so a restored ledger
/// is as small as a folded one.
fn shared(text: &str, previous: Option<&Arc<str>>) -> Arc<str> {
    match previous {
        Some(p) if **p == *text => Arc::clone(p),
        _ => Arc::from(text),
    }
}

fn decode_usage(r: &mut Reader<'_>) -> Decoded<Usage> {
    Ok(Usage {
        input: r.u64()?,
        output: r.u64()?,
        cache_read: r.u64()?,
        cache_write: r.u64()?,
        reasoning: r.u64()?,
    })
}

/// One usage record whose seq is checked by `seq` (the caller's order rule).
fn decode_request(
    r: &mut Reader<'_>,
    seq: Seq,
    previous: Option<&RequestUsage>,
) -> Decoded<RequestUsage> {
    let kind = decode_kind(r)?;
    let turn = r.opt(Reader::i64)?;
    let step = r.opt(Reader::i64)?;
    let provider = shared(r.str()?, previous.map(|l| &l.provider));
    let model = shared(r.str()?, previous.map(|l| &l.model));
    let usage = decode_usage(r)?;
    let shape = decode_shape(r)?;
    Ok(RequestUsage {
        seq,
        kind,
        turn,
        step,
        provider,
        model,
        usage,
        shape,
    })
}

fn decode_ledger(r: &mut Reader<'_>, next_seq: u64) -> Decoded<UsageLedger> {
    let mut totals = [CumulativeUsage::default(), CumulativeUsage::default()];
    for total in &mut totals {
        let requests = r.u64()?;
        *total = CumulativeUsage::from_parts(requests, decode_usage(r)?);
    }
    let last_settlement = match r.u8()? {
        0 => None,
        1 => {
            let seq = decode_record_seq(r, &mut None, next_seq)?;
            let request = decode_request(r, seq, None)?;
            if request.kind != RequestKind::Settlement {
                return Err(r.damaged("the newest settlement is not a settlement"));
            }
            Some(request)
        }
        _ => return Err(r.damaged("unknown flag")),
    };
    let n = r.count(REQUEST_BYTES)?;
    if n > LEDGER_RECENT {
        return Err(r.damaged("more usage records than a bounded ledger keeps"));
    }
    let mut requests: Vec<RequestUsage> = Vec::with_capacity(n);
    let mut previous = None;
    for _ in 0..n {
        let seq = decode_record_seq(r, &mut previous, next_seq)?;
        let request = decode_request(r, seq, requests.last())?;
        requests.push(request);
    }
    let kept = |kind| requests.iter().filter(|q| q.kind == kind).count() as u64;
    let newest_kept = requests
        .iter()
        .rev()
        .find(|q| q.kind == RequestKind::Settlement);
    if kept(RequestKind::Settlement) > totals[0].requests()
        || kept(RequestKind::CompactionSummary) > totals[1].requests()
        || (newest_kept.is_some() && newest_kept != last_settlement.as_ref())
        || last_settlement.is_some() != (totals[0].requests() > 0)
    {
        return Err(r.damaged("usage totals disagree with the usage records"));
    }
    let unreadable_total = r.u64()?;
    // Per unreadable record at least: seq 8, kind 1, key count 8.
    let n = r.count(17)?;
    if n > LEDGER_RECENT || n as u64 > unreadable_total {
        return Err(r.damaged("more unreadable usage records than counted or kept"));
    }
    let mut unreadable = Vec::with_capacity(n);
    let mut previous = None;
    for _ in 0..n {
        let seq = decode_record_seq(r, &mut previous, next_seq)?;
        let kind = decode_kind(r)?;
        let keys = r.count(8)?;
        let keys = (0..keys)
            .map(|_| r.str().map(str::to_owned))
            .collect::<Decoded<Vec<_>>>()?;
        unreadable.push(UnreadableUsage { seq, kind, keys });
    }
    Ok(UsageLedger::from_parts(
        requests,
        totals,
        last_settlement,
        unreadable,
        unreadable_total,
    ))
}
