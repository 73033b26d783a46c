//! `stats`: what a session holds, counted. spec: format-spec/cache.md#stats
//!
//! Events and record bytes by event type; turns and how they ended; tool calls, results
//! and errors by tool name; the exact provider usage of every settlement and compaction
//! summary (summed bucket by bucket), and an estimate of the model-visible text of every
//! surface message appended (by [`HeuristicCounter`], labelled as such).

use std::collections::BTreeMap;

use sessionlog_session::json::{same_bytes, JsonRef};
use sessionlog_session::tokens::{estimate_message, HeuristicCounter, TokenCounter, Usage};
use sessionlog_session::{derive_message, SessionHeader};

use super::bytes::{put_str, put_u64, Reader};
use super::tool_audit::{ToolCallFields, ToolResultFields};
use super::{Projection, ProjectionError, StoredEvent, Tally};

/// The `stats` projection. Register with
/// [`StoreOptions::with_projection`](crate::StoreOptions::with_projection)`(Stats)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats;

impl Stats {
    /// The name it is registered under.
    pub const NAME: &'static str = "stats";
    /// The version of its fold and encoding.
    pub const VERSION: u32 = 1;
}

/// Events and bytes of one event type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeCount {
    /// Events of the type.
    pub events: u64,
    /// Their record payload bytes.
    pub bytes: u64,
}

/// Events and bytes by event type, in the order of the type names.
///
/// The fold looks a type up for every event appended: the type found last for the event's
/// record kind is tried first (a kind tag names one type, or a few), then a binary search of
/// the few types there are. A map would compare the name with each of them in turn.
#[derive(Clone, Default)]
pub struct TypeCounts {
    /// By type name, ascending.
    entries: Vec<(String, TypeCount)>,
    /// Where the type looked up last for each record kind (modulo [`KIND_HINTS`]) is: hints,
    /// checked before use.
    hints: [u16; KIND_HINTS],
}

/// Record kinds [`TypeCounts`] keeps a hint for; kinds above share them.
const KIND_HINTS: usize = 32;

impl TypeCounts {
    /// The counts of event type `ty`, if the session has any.
    pub fn get(&self, ty: &str) -> Option<&TypeCount> {
        let i = self.find(ty).ok()?;
        self.entries.get(i).map(|(_, c)| c)
    }

    /// Each type with its counts, in the order of the type names.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TypeCount)> {
        self.into_iter()
    }

    /// The counts, in the order of the type names.
    pub fn values(&self) -> impl Iterator<Item = &TypeCount> {
        self.entries.iter().map(|(_, c)| c)
    }

    /// Types counted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no type is counted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, ty: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(t, _)| t.as_str().cmp(ty))
    }

    /// Adds `c` for a type not counted yet; the counts it had if it was.
    fn insert(&mut self, ty: String, c: TypeCount) -> Option<TypeCount> {
        match self.find(&ty) {
            Ok(i) => self
                .entries
                .get_mut(i)
                .map(|(_, old)| std::mem::replace(old, c)),
            Err(i) => {
                self.entries.insert(i, (ty, c));
                None
            }
        }
    }

    /// Counts `events` events of type `ty`, of record kind `kind` and `bytes` record bytes
    /// in all.
    fn add(&mut self, kind: u8, ty: &str, events: u64, bytes: u64) {
        let slot = usize::from(kind) % KIND_HINTS;
        let hint = usize::from(self.hints[slot]);
        let i = match self.entries.get(hint) {
            // Each event's type is compared with the last one of its kind, inline.
            Some((t, _)) if same_bytes(t, ty) => hint,
            _ => match self.find(ty) {
                Ok(i) => i,
                Err(i) => {
                    self.entries
                        .insert(i, (ty.to_owned(), TypeCount::default()));
                    i
                }
            },
        };
        self.hints[slot] = u16::try_from(i).unwrap_or(u16::MAX);
        if let Some((_, c)) = self.entries.get_mut(i) {
            c.events += events;
            c.bytes += bytes;
        }
    }
}

impl PartialEq for TypeCounts {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Eq for TypeCounts {}

impl std::fmt::Debug for TypeCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl std::ops::Index<&str> for TypeCounts {
    type Output = TypeCount;

    /// The counts of `ty`; panics when the session has no event of that type.
    fn index(&self, ty: &str) -> &TypeCount {
        match self.get(ty) {
            Some(c) => c,
            None => panic!("no event of type {ty:?} counted"),
        }
    }
}

/// A type and its counts, as [`TypeCounts`] lists them.
type TypeEntry<'a> = (&'a str, &'a TypeCount);

impl<'a> IntoIterator for &'a TypeCounts {
    type Item = TypeEntry<'a>;
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, TypeCount)>,
        fn(&'a (String, TypeCount)) -> TypeEntry<'a>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(ty, c)| (ty.as_str(), c))
    }
}

/// Calls, results and errors of one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolCount {
    /// `tool/call` events naming it.
    pub calls: u64,
    /// Tool results answering those calls.
    pub results: u64,
    /// Results that report an error.
    pub errors: u64,
}

/// Summed exact provider usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Settlements and compaction summaries whose usage was read.
    pub requests: u64,
    /// Their usage, bucket by bucket.
    pub usage: Usage,
    /// Usage objects present but in no known shape (not counted in `usage`).
    pub unreadable: u64,
}

/// The counts of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Events folded.
    pub events: u64,
    /// Record payload bytes of those events.
    pub bytes: u64,
    /// Events and bytes by event type (as the event names it, after upgrade).
    pub by_type: TypeCounts,
    /// `turn/start` events.
    pub turns: u64,
    /// `turn/end` events by reason kind.
    pub turn_ends: BTreeMap<String, u64>,
    /// `step/start` events.
    pub steps: u64,
    /// Tool calls, results and errors by tool name (`?` for a result whose call is unknown).
    pub tools: BTreeMap<String, ToolCount>,
    /// Exact provider usage.
    pub usage: UsageTotals,
    /// Estimated tokens of the surface messages appended, by [`HeuristicCounter`].
    pub estimated_tokens: u64,
    /// Replacements applied.
    pub replacements: u64,
    /// Time of the first and of the last event (ms).
    pub first_time: Option<i64>,
    /// Time of the last event (ms).
    pub last_time: Option<i64>,
    /// Calls not answered yet: call id and tool name.
    pub open_calls: BTreeMap<String, String>,
}

impl SessionStats {
    /// The counter that made [`SessionStats::estimated_tokens`].
    pub fn estimate_counter(&self) -> &'static str {
        "heuristic-bytes/4"
    }

    /// Counts what every event counts, for a run of `t.events` events of one type and kind
    /// (one applied event is a run of one): events, bytes, by type, times, and turns and
    /// steps by their kind alone.
    fn count_run(&mut self, t: &Tally<'_>) {
        self.events += t.events;
        self.bytes += t.record_bytes;
        self.by_type
            .add(t.kind, t.event_type, t.events, t.record_bytes);
        if self.first_time.is_none() {
            self.first_time = Some(t.first_time);
        }
        self.last_time = Some(t.last_time);
        use sessionlog_session::codec::kind;
        match t.kind {
            kind::TURN_START => self.turns += t.events,
            kind::STEP_START => self.steps += t.events,
            _ => {}
        }
    }

    /// Updates the counts of tool `name` (its name is copied only the first time).
    fn tool(&mut self, name: &str, update: impl FnOnce(&mut ToolCount)) {
        match self.tools.get_mut(name) {
            Some(count) => update(count),
            None => {
                let mut count = ToolCount::default();
                update(&mut count);
                self.tools.insert(name.to_owned(), count);
            }
        }
    }
}

impl UsageTotals {
    /// Counts usage already read (by the writer's session state, with [`Usage::read`]).
    fn count_read(&mut self, usage: &Usage) {
        self.requests += 1;
        self.usage.add(usage);
    }

    /// Counts a usage object (a settlement's or a summary's), if there is one.
    pub(crate) fn count(&mut self, usage: Option<JsonRef<'_>>) {
        let Some(usage) = usage.filter(|u| u.kind() != sessionlog_session::json::JsonKind::Null)
        else {
            return;
        };
        match Usage::read(usage) {
            Some((u, _)) => {
                self.requests += 1;
                self.usage.add(&u);
            }
            None => self.unreadable += 1,
        }
    }

    /// Adds `other` in.
    pub(crate) fn add(&mut self, other: &UsageTotals) {
        self.requests += other.requests;
        self.usage.add(&other.usage);
        self.unreadable += other.unreadable;
    }

    /// Appends the seven counts. spec: format-spec/cache.md#stats
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let u = &self.usage;
        for v in [
            self.requests,
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.reasoning,
            self.unreadable,
        ] {
            put_u64(out, v);
        }
    }

    /// Reads what [`UsageTotals::encode`] wrote.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<UsageTotals, ProjectionError> {
        Ok(UsageTotals {
            requests: r.u64()?,
            usage: Usage {
                input: r.u64()?,
                output: r.u64()?,
                cache_read: r.u64()?,
                cache_write: r.u64()?,
                reasoning: r.u64()?,
            },
            unreadable: r.u64()?,
        })
    }
}

/// The `heuristic-bytes/4` estimate of the message `e` derives (0 when it derives none):
/// the one the writer's session state made, when it made it with that counter, else made
/// here.
fn message_estimate(e: &StoredEvent<'_>) -> u32 {
    // Only an event whose kind tag says so can derive a message (as the writer's state and
    // the transcript read it): most events are chunks, steps and calls, and derive none.
    if !sessionlog_session::is_surface_kind(e.kind) {
        return 0;
    }
    let heuristic = HeuristicCounter.name();
    if let Some(made) = e.message_estimate.filter(|m| m.counter == heuristic) {
        return made.tokens;
    }
    let Some(message) = derive_message(e.version, e.event) else {
        return 0;
    };
    // One scratch buffer per thread: the fold runs once per appended event.
    thread_local!(static TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) });
    TEXT.with(|text| {
        estimate_message(
            &HeuristicCounter,
            JsonRef::new(message),
            &mut text.borrow_mut(),
        )
    })
}

/// Whether [`Stats`] reads the payload of events of record kind `k`: surface messages (for
/// their estimates, tool results and settlements' usage), turn ends, tool calls and
/// compaction summaries. It tallies the others.
fn reads_payload(k: u8) -> bool {
    use sessionlog_session::codec::kind;
    sessionlog_session::is_surface_kind(k)
        || matches!(
            k,
            kind::TURN_END | kind::TOOL_CALL | kind::COMPACTION_SUMMARY
        )
}

/// The counts of an event whose payload [`Stats`] reads: a surface message's estimate, a
/// turn's end reason, a tool call or result, a settlement's or summary's usage. Out of
/// line: most events are of none of these kinds.
#[inline(never)]
fn read(s: &mut SessionStats, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
    let event = e.event;
    s.estimated_tokens += u64::from(message_estimate(e));
    use sessionlog_session::codec::kind;
    if !matches!(
        e.kind,
        kind::TURN_END
            | kind::TOOL_CALL
            | kind::TOOL_RESULT
            | kind::ASSISTANT_MESSAGE
            | kind::COMPACTION_SUMMARY
    ) {
        return Ok(());
    }
    match event.event_type() {
        "turn/end" => {
            let [reason] = event.data_fields(["reason"]);
            let reason = reason.and_then(|r| r.get("kind")).and_then(|k| k.as_str());
            let reason = reason.as_deref().unwrap_or("?");
            // The reason's name is copied only the first time it is counted.
            match s.turn_ends.get_mut(reason) {
                Some(n) => *n += 1,
                None => {
                    s.turn_ends.insert(reason.to_owned(), 1);
                }
            }
        }
        "tool/call" => {
            let (call_id, name) = ToolCallFields::names(event)?;
            s.tool(&name, |t| t.calls += 1);
            s.open_calls.insert(call_id.into_owned(), name.into_owned());
        }
        "tool/result" => {
            // A replacement of a result (a shortened one) is not another answer.
            if matches!(
                event.surface_op(),
                Some(sessionlog_session::SurfaceOp::Replace { .. })
            ) {
                return Ok(());
            }
            let result = ToolResultFields::read(event)?;
            let name = s
                .open_calls
                .remove(result.call_id.as_ref())
                .unwrap_or_else(|| "?".to_owned());
            let failed = result.is_error();
            s.tool(&name, |t| {
                t.results += 1;
                t.errors += u64::from(failed);
            });
        }
        "assistant/message" | "compaction/summary" => match e.usage {
            Some(usage) => s.usage.count_read(usage),
            None => {
                let [usage] = event.data_fields(["usage"]);
                s.usage.count(usage);
            }
        },
        _ => {}
    }
    Ok(())
}

impl Projection for Stats {
    type State = SessionStats;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> u32 {
        Self::VERSION
    }

    fn init(&self, _header: &SessionHeader) -> SessionStats {
        SessionStats::default()
    }

    /// Every kind whose payload the fold does not read (chunks, steps, turn starts,
    /// requests, compaction markers and the like): their counts, bytes and times come in
    /// runs.
    fn tallies(&self, k: u8) -> bool {
        !reads_payload(k)
    }

    fn tally(&self, s: &mut SessionStats, t: &Tally<'_>) -> Result<(), ProjectionError> {
        s.count_run(t);
        Ok(())
    }

    fn apply(&self, s: &mut SessionStats, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        let event = e.event;
        let (seq, time) = (event.seq().get(), event.time());
        s.count_run(&Tally {
            event_type: event.event_type(),
            kind: e.kind,
            events: 1,
            record_bytes: e.record_bytes,
            first_seq: seq,
            last_seq: seq,
            first_time: time,
            last_time: time,
        });
        if matches!(
            event.surface_op(),
            Some(sessionlog_session::SurfaceOp::Replace { .. })
        ) {
            s.replacements += 1;
        }
        // Kinds whose payload the counts do not read (most events: chunks, steps, step
        // ends) are not parsed, nor is anything more set up for them.
        if reads_payload(e.kind) {
            return read(s, e);
        }
        Ok(())
    }

    fn encode(&self, s: &SessionStats, out: &mut Vec<u8>) {
        for v in [
            s.events,
            s.bytes,
            s.turns,
            s.steps,
            s.replacements,
            s.estimated_tokens,
        ] {
            put_u64(out, v);
        }
        put_u64(out, s.by_type.len() as u64);
        for (ty, c) in &s.by_type {
            put_str(out, ty);
            put_u64(out, c.events);
            put_u64(out, c.bytes);
        }
        put_u64(out, s.turn_ends.len() as u64);
        for (reason, n) in &s.turn_ends {
            put_str(out, reason);
            put_u64(out, *n);
        }
        put_u64(out, s.tools.len() as u64);
        for (name, c) in &s.tools {
            put_str(out, name);
            put_u64(out, c.calls);
            put_u64(out, c.results);
            put_u64(out, c.errors);
        }
        s.usage.encode(out);
        put_time(out, s.first_time);
        put_time(out, s.last_time);
        put_u64(out, s.open_calls.len() as u64);
        for (id, name) in &s.open_calls {
            put_str(out, id);
            put_str(out, name);
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<SessionStats, ProjectionError> {
        let mut r = Reader::new(bytes);
        let mut s = SessionStats {
            events: r.u64()?,
            bytes: r.u64()?,
            turns: r.u64()?,
            steps: r.u64()?,
            replacements: r.u64()?,
            estimated_tokens: r.u64()?,
            ..SessionStats::default()
        };
        for _ in 0..r.count(24)? {
            let ty = r.str()?;
            let c = TypeCount {
                events: r.u64()?,
                bytes: r.u64()?,
            };
            unique(s.by_type.insert(ty, c))?;
        }
        for _ in 0..r.count(16)? {
            let reason = r.str()?;
            unique(s.turn_ends.insert(reason, r.u64()?))?;
        }
        for _ in 0..r.count(32)? {
            let name = r.str()?;
            let c = ToolCount {
                calls: r.u64()?,
                results: r.u64()?,
                errors: r.u64()?,
            };
            unique(s.tools.insert(name, c))?;
        }
        s.usage = UsageTotals::decode(&mut r)?;
        s.first_time = get_time(&mut r)?;
        s.last_time = get_time(&mut r)?;
        for _ in 0..r.count(16)? {
            let id = r.str()?;
            unique(s.open_calls.insert(id, r.str()?))?;
        }
        r.finish()?;
        Ok(s)
    }
}

/// Refuses a key listed twice.
fn unique<T>(previous: Option<T>) -> Result<(), ProjectionError> {
    match previous {
        None => Ok(()),
        Some(_) => Err(ProjectionError::Undecodable("a key listed twice".into())),
    }
}

fn put_time(out: &mut Vec<u8>, t: Option<i64>) {
    match t {
        None => out.push(0),
        Some(t) => {
            out.push(1);
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
}

fn get_time(r: &mut Reader<'_>) -> Result<Option<i64>, ProjectionError> {
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(r.u64()? as i64)),
        other => Err(ProjectionError::Undecodable(format!(
            "presence flag {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::{same_bytes, TypeCount, TypeCounts};

    proptest! {
        /// Type names compared word by word are equal exactly when their bytes are, at
        /// every length around the words' (a name and one differing from it in one byte).
        #[test]
        fn type_names_compare_as_their_bytes_do(
            name in "[a-z/]{0,20}",
            at in any::<prop::sample::Index>(),
            other in any::<u8>().prop_map(|b| char::from(b'a' + b % 26)),
        ) {
            prop_assert!(same_bytes(&name, &name.clone()));
            if !name.is_empty() {
                let i = at.index(name.len());
                let mut changed = name.clone();
                changed.replace_range(i..=i, other.encode_utf8(&mut [0; 4]));
                prop_assert_eq!(same_bytes(&name, &changed), name == changed);
            }
            let longer = format!("{name}x");
            prop_assert!(!same_bytes(&name, &longer));
        }
    }

    #[test]
    fn type_counts_count_as_a_map_by_name_would() {
        let types = [
            "assistant/chunk",
            "turn/start",
            "assistant/chunk",
            "assistant/chunk",
            "tool/result",
            "a/custom",
            "tool/result",
            "zz/last",
            "assistant/chunk",
            "turn/start",
            // As long as the type before it.
            "step/start",
        ];
        let mut counts = TypeCounts::default();
        let mut model: BTreeMap<String, TypeCount> = BTreeMap::new();
        for (i, ty) in types.iter().cycle().take(200).enumerate() {
            let bytes = (i % 7) as u64 * 10;
            // Kinds that name a type, one another, and the type's: hints are only hints.
            let kind = [0x14, 0x10, 0x00, 0x20, 0x03, (i % 256) as u8][i % 6];
            counts.add(kind, ty, 1, bytes);
            let c = model.entry((*ty).to_owned()).or_default();
            c.events += 1;
            c.bytes += bytes;
            let listed: Vec<(String, TypeCount)> =
                counts.iter().map(|(t, c)| (t.to_owned(), *c)).collect();
            let expected: Vec<(String, TypeCount)> =
                model.iter().map(|(t, c)| (t.clone(), *c)).collect();
            assert_eq!(listed, expected, "after event {i}");
        }
        assert_eq!(counts.len(), 6);
        assert_eq!(counts["tool/result"], model["tool/result"]);
        assert_eq!(counts.get("user/message"), None);
        // Equal counts are equal whichever types were looked up last.
        let mut other = TypeCounts::default();
        for (ty, c) in &model {
            assert_eq!(other.insert(ty.clone(), *c), None);
        }
        assert_eq!(other, counts);
        assert_eq!(
            other.insert("turn/start".into(), TypeCount::default()),
            Some(model["turn/start"]),
            "a type inserted twice is reported"
        );
    }
}
