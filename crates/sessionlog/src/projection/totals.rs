//! `totals`: the store-wide counts — sessions, events, record bytes, turns, and the exact
//! provider usage by model. spec: format-spec/cache.md#totals
//!
//! Each session's part counts its own events; [`StoreProjection::total`] adds the parts of
//! the live sessions. Usage is what providers reported (settlements' `usage`, keyed by the
//! message's `source.model`, and compaction summaries' `usage`, keyed by their `model`):
//! exact accounting, never an estimate.

use std::collections::BTreeMap;

use sessionlog_session::codec::kind;
use sessionlog_session::json::{JsonKind, JsonRef};
use sessionlog_session::SessionHeader;

use super::bytes::{put_str, put_u64, Reader};
use super::stats::UsageTotals;
use super::store_wide::StoreProjection;
use super::{Projection, ProjectionError, StoredEvent};

/// The `totals` store-wide projection. Register with
/// [`StoreOptions::with_store_projection`](crate::StoreOptions::with_store_projection)`(Totals)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals;

impl Totals {
    /// The name it is registered under.
    pub const NAME: &'static str = "totals";
    /// The version of its fold and encoding.
    pub const VERSION: u32 = 1;
}

/// The counts of one session (the part) or of the whole store (the total, with
/// [`StoreTotals::sessions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionTotals {
    /// Events folded.
    pub events: u64,
    /// Their record payload bytes.
    pub bytes: u64,
    /// `turn/start` events.
    pub turns: u64,
    /// Exact usage by model (`?` where the event names none).
    pub models: BTreeMap<String, UsageTotals>,
}

impl SessionTotals {
    fn add(&mut self, other: &SessionTotals) {
        self.events += other.events;
        self.bytes += other.bytes;
        self.turns += other.turns;
        for (model, usage) in &other.models {
            self.models.entry(model.clone()).or_default().add(usage);
        }
    }

    fn count_usage(&mut self, model: Option<JsonRef<'_>>, usage: Option<JsonRef<'_>>) {
        if usage.is_none_or(|u| u.kind() == JsonKind::Null) {
            return;
        }
        let model = model
            .and_then(|m| m.as_str())
            .map_or_else(|| "?".to_owned(), |m| m.into_owned());
        self.models.entry(model).or_default().count(usage);
    }
}

/// The whole store's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreTotals {
    /// Live sessions.
    pub sessions: u64,
    /// Their counts, added up.
    pub counts: SessionTotals,
}

impl Projection for Totals {
    type State = SessionTotals;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn version(&self) -> u32 {
        Self::VERSION
    }

    fn init(&self, _header: &SessionHeader) -> SessionTotals {
        SessionTotals::default()
    }

    fn apply(&self, s: &mut SessionTotals, e: &StoredEvent<'_>) -> Result<(), ProjectionError> {
        s.events += 1;
        s.bytes += e.record_bytes;
        // Only the kinds that carry usage are parsed; turns are counted by kind alone.
        let data = e.event.data();
        match e.kind {
            kind::TURN_START => s.turns += 1,
            kind::ASSISTANT_MESSAGE => {
                let model = data
                    .get("message")
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("model"));
                s.count_usage(model, data.get("usage"));
            }
            kind::COMPACTION_SUMMARY => s.count_usage(data.get("model"), data.get("usage")),
            _ => {}
        }
        Ok(())
    }

    fn encode(&self, s: &SessionTotals, out: &mut Vec<u8>) {
        put_u64(out, s.events);
        put_u64(out, s.bytes);
        put_u64(out, s.turns);
        put_u64(out, s.models.len() as u64);
        for (model, m) in &s.models {
            put_str(out, model);
            m.encode(out);
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<SessionTotals, ProjectionError> {
        let mut r = Reader::new(bytes);
        let mut s = SessionTotals {
            events: r.u64()?,
            bytes: r.u64()?,
            turns: r.u64()?,
            models: BTreeMap::new(),
        };
        for _ in 0..r.count(64)? {
            let model = r.str()?;
            let m = UsageTotals::decode(&mut r)?;
            if s.models.insert(model, m).is_some() {
                return Err(ProjectionError::Undecodable("a model listed twice".into()));
            }
        }
        r.finish()?;
        Ok(s)
    }
}

impl StoreProjection for Totals {
    type Total = StoreTotals;

    fn total(&self, parts: &[(&str, &SessionTotals)]) -> StoreTotals {
        let mut total = StoreTotals {
            sessions: parts.len() as u64,
            counts: SessionTotals::default(),
        };
        for (_, part) in parts {
            total.counts.add(part);
        }
        total
    }
}
