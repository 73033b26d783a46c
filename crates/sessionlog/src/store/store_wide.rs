//! Store-wide projections: every live session's part, resumed from one checkpoint file in
//! which each part has its own watermark, folded over the records after it, and added up.
//! spec: format-spec/cache.md#store-wide-projections

use std::collections::HashMap;
use std::sync::Arc;

use sessionlog_log::StreamId;
use sessionlog_session::SessionHeader;

use super::projected::{failed, resumed_at, wrong_type, Resumed, Slot};
use super::{CacheCheck, CacheUse, Store};
use crate::cache::{self, CacheHeader, CacheMiss, Section};
use crate::error::{Error, Result};
use crate::projection::bytes::{put_u64, Reader};
use crate::projection::{guarded, AnyState, ProjectionError, Registered};
use crate::projection::{StoreProjected, StoreProjection};

/// One session's part as a store-wide checkpoint keeps it. spec: cache.md#store-wide-projections
#[derive(Debug, Clone)]
struct Entry {
    /// Records of the session folded into the part.
    watermark: u64,
    /// CRC-32 of the payload of record `watermark - 1`.
    last_record_crc: u32,
    /// The part, as the projection encodes it.
    part: Vec<u8>,
}

/// A store-wide projection folded over every live session.
struct StoreFold {
    /// Each live session's name, stream and part, by stream id.
    parts: Vec<(String, StreamId, Slot)>,
    /// How the parts were built, all sessions together.
    cache: CacheUse,
    /// Checkpointed parts of streams that are no longer sessions (deleted).
    dropped: usize,
    /// Checkpointed parts that matched the log, kept for a session whose newest records are
    /// not durable yet (its part then cannot be checkpointed as folded).
    matched: HashMap<u64, Entry>,
}

/// What [`Store::cache_verify_projections`] found for one projection checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectionCheck {
    /// The projection.
    pub projection: String,
    /// The session whose checkpoint it is; `None` for a store-wide projection's.
    pub session: Option<String>,
    /// What was found.
    pub check: CacheCheck,
}

impl Store {
    /// The view of store-wide projection `name` (registered in
    /// [`StoreOptions::with_store_projection`](crate::StoreOptions::with_store_projection),
    /// of type `P`) over every live session: each session's part from the checkpoint plus
    /// the session's events after the part's watermark (sessions the checkpoint lacks folded
    /// whole, deleted sessions left out), then [`StoreProjection::total`]. A new checkpoint
    /// is written when the store is writable and it was missing or unusable, many events
    /// were folded, or sessions were deleted. Never writes the log.
    ///
    /// A fold that fails or panics on a session is [`Error::Projection`] naming it.
    pub fn store_projection<P: StoreProjection>(
        &self,
        name: &str,
    ) -> Result<StoreProjected<P::Total>> {
        let registered = self
            .inner
            .options
            .store_projections
            .get(name)
            .ok_or_else(|| Error::NoSuchProjection(name.to_owned()))?
            .clone();
        let projection = registered
            .as_any()
            .downcast_ref::<P>()
            .ok_or_else(|| wrong_type(name))?;
        let fold = self
            .fold_store_wide(
                std::slice::from_ref(&registered),
                self.inner.options.projection_cache,
            )?
            .pop()
            .ok_or_else(|| Error::NoSuchProjection(name.to_owned()))?;
        self.write_store_wide_if_due(registered.as_ref(), &fold);
        let mut parts = Vec::with_capacity(fold.parts.len());
        let mut events = 0;
        for (session, _, slot) in &fold.parts {
            parts.push((session.as_str(), slot.state_as::<P>(session)?));
            events += slot.events;
        }
        let total = guarded("total", || Ok(projection.total(&parts)))
            .map_err(|source| failed(name, "(the total of all sessions)", source))?;
        Ok(StoreProjected {
            total,
            sessions: parts.len() as u64,
            events,
            cache: fold.cache,
        })
    }

    /// Every live session's part of each of `projections`: from the checkpoint when
    /// `use_cache`, plus the records after each part's watermark, every projection of a
    /// session folded in one pass over its records.
    fn fold_store_wide(
        &self,
        projections: &[Arc<dyn Registered>],
        use_cache: bool,
    ) -> Result<Vec<StoreFold>> {
        let mut folds = Vec::with_capacity(projections.len());
        let mut entries = Vec::with_capacity(projections.len());
        for projection in projections {
            let loaded = if use_cache {
                self.load_store_wide(projection.as_ref())
            } else {
                Err(CacheMiss::Missing)
            };
            let (found, cache) = match loaded {
                Ok(found) => (found, CacheUse::Hit { folded: 0 }),
                Err(miss) if use_cache => (HashMap::new(), CacheUse::Rebuilt(miss)),
                Err(_) => (HashMap::new(), CacheUse::Disabled),
            };
            entries.push(found);
            folds.push(StoreFold {
                parts: Vec::new(),
                cache,
                dropped: 0,
                matched: HashMap::new(),
            });
        }
        let mut folded = vec![0u64; projections.len()];
        for info in self.live_sessions() {
            let (stream, next) = (info.id, info.next_seq.0);
            // Parts that are current need neither the session's header nor a fold; the
            // others are folded together.
            let mut parts: Vec<Option<Resumed>> = Vec::with_capacity(projections.len());
            let mut stale = Vec::new();
            for (i, projection) in projections.iter().enumerate() {
                let entry = entries.get_mut(i).and_then(|e| e.remove(&stream.0));
                let loaded = match &entry {
                    Some(e) => self.check_entry(projection.as_ref(), stream, e, next),
                    None => Err(CacheMiss::Missing),
                };
                if let (true, Some(e), Some(fold)) = (loaded.is_ok(), entry, folds.get_mut(i)) {
                    fold.matched.insert(stream.0, e);
                }
                match loaded {
                    Ok((state, watermark)) if watermark == next => {
                        parts.push(Some(resumed_at(projection.clone(), state, watermark, next)));
                    }
                    loaded => {
                        parts.push(None);
                        stale.push((i, loaded));
                    }
                }
            }
            if !stale.is_empty() {
                let header = self.read_header(&info.name, stream)?;
                let mut resumed: Vec<Resumed> = stale
                    .iter_mut()
                    .filter_map(|(i, loaded)| {
                        let loaded = std::mem::replace(loaded, Err(CacheMiss::Missing));
                        let projection = projections.get(*i)?.clone();
                        Some(self.resumed_from(projection, loaded, &header, next))
                    })
                    .collect();
                self.fold_slots(&mut resumed, &info.name, stream, &header, next)?;
                for ((i, _), r) in stale.iter().zip(resumed) {
                    if let Some(part) = parts.get_mut(*i) {
                        *part = Some(r);
                    }
                }
            }
            for (i, part) in parts.into_iter().enumerate() {
                if let (Some(r), Some(fold), Some(n)) = (part, folds.get_mut(i), folded.get_mut(i))
                {
                    *n += next.saturating_sub(r.start);
                    fold.parts.push((info.name.clone(), stream, r.slot));
                }
            }
        }
        for ((fold, left), n) in folds.iter_mut().zip(entries).zip(folded) {
            fold.dropped = left.len();
            if let CacheUse::Hit { folded: f } = &mut fold.cache {
                *f = n;
            }
        }
        Ok(folds)
    }

    /// A checkpointed part decoded, if its watermark and last record match the log.
    fn check_entry(
        &self,
        projection: &dyn Registered,
        stream: StreamId,
        entry: &Entry,
        next: u64,
    ) -> std::result::Result<(AnyState, u64), CacheMiss> {
        self.check_watermark(stream, entry.watermark, entry.last_record_crc, next)?;
        let state = projection
            .decode(&entry.part)
            .map_err(|e| CacheMiss::Incompatible(format!("{}: {e}", projection.name())))?;
        Ok((state, entry.watermark))
    }

    /// The parts in the checkpoint file of `projection`, by stream id, if the file verifies,
    /// belongs to this store and is of the projection's running version.
    fn load_store_wide(
        &self,
        projection: &dyn Registered,
    ) -> std::result::Result<HashMap<u64, Entry>, CacheMiss> {
        let name = projection.name();
        let path = cache::store_projection_path(self.inner.log.dir(), name);
        let bytes = self.read_cache_file(&path)?;
        let (h, sections) =
            self.decode_cache_file(&path, &bytes, &[(name, projection.version())])?;
        if h.store_id != self.inner.log.store_id() {
            return Err(CacheMiss::Stale("written for another store".into()));
        }
        if h.stream_id != 0 {
            return Err(CacheMiss::Stale(format!(
                "written for stream {}, not for the whole store",
                h.stream_id
            )));
        }
        let section = sections
            .first()
            .ok_or_else(|| CacheMiss::Incompatible("section missing".into()))?;
        decode_entries(section).map_err(|e| CacheMiss::Incompatible(format!("{name}: {e}")))
    }

    /// Writes the checkpoint of a store-wide fold when it was missing or unusable, folded
    /// many events, or held deleted sessions, and the store is writable. Each session's part
    /// is kept as folded when its records are all durable, else as it was checkpointed
    /// (when that matched the log), else left out. Never fails the caller.
    fn write_store_wide_if_due(&self, projection: &dyn Registered, fold: &StoreFold) {
        let due = match &fold.cache {
            CacheUse::Hit { folded } => {
                *folded >= self.inner.options.cache_refresh_events || fold.dropped > 0
            }
            CacheUse::Rebuilt(_) => true,
            CacheUse::Disabled => false,
        };
        let log = &self.inner.log;
        if !due || log.is_read_only() {
            return;
        }
        // The count of parts kept goes first; it is filled in once the parts are written.
        let mut body = vec![0u8; 8];
        let mut kept = 0u64;
        for (_, stream, slot) in &fold.parts {
            let matched = fold.matched.get(&stream.0);
            // A part that folded nothing past its checkpoint is written back as it was read:
            // its watermark record was already read and checked against the log.
            if let Some(e) = matched.filter(|e| e.watermark == slot.events + 1) {
                put_entry(&mut body, stream.0, e);
                kept += 1;
                continue;
            }
            let folded = slot.state.as_ref().ok().and_then(|state| {
                let h = self.durable_cache_header(*stream, slot.events + 1)?;
                let part = projection.encode(state).ok()?;
                Some(Entry {
                    watermark: h.watermark,
                    last_record_crc: h.last_record_crc,
                    part,
                })
            });
            if let Some(e) = folded.as_ref().or(matched) {
                put_entry(&mut body, stream.0, e);
                kept += 1;
            }
        }
        body[..8].copy_from_slice(&kept.to_le_bytes());
        let header = CacheHeader {
            store_id: log.store_id(),
            stream_id: 0,
            watermark: 0,
            last_record_crc: 0,
        };
        let bytes = cache::encode(
            &header,
            &[Section {
                name: projection.name(),
                version: projection.version(),
                bytes: &body,
            }],
        );
        self.write_cache_file(
            &cache::store_projection_path(log.dir(), projection.name()),
            &bytes,
        );
    }

    /// Checks every projection checkpoint against a fold of the whole log: for each session,
    /// each registered projection's checkpoint, and each store-wide projection's. A
    /// checkpoint is [`CacheCheck::Ok`] when it matches the log and it plus the records
    /// after it fold to what a fold of every record gives. A store-wide checkpoint's parts
    /// of deleted sessions are not damage (the next read drops them); a session it lacks is
    /// folded whole by reads and is not damage either.
    pub fn cache_verify_projections(&self) -> Result<Vec<ProjectionCheck>> {
        let mut out = Vec::new();
        for info in self.live_sessions() {
            let (stream, next) = (info.id, info.next_seq.0);
            let header = self.read_header(&info.name, stream)?;
            for p in &self.inner.options.projections.0 {
                let loaded = self.load_projection(p.as_ref(), stream, next);
                let check = self.check_loaded(p, loaded, &info.name, stream, &header, next)?;
                out.push(ProjectionCheck {
                    projection: p.name().to_owned(),
                    session: Some(info.name.clone()),
                    check,
                });
            }
        }
        for p in &self.inner.options.store_projections.0 {
            out.push(ProjectionCheck {
                projection: p.name().to_owned(),
                session: None,
                check: self.verify_store_wide(p)?,
            });
        }
        Ok(out)
    }

    /// [`Store::cache_verify_projections`] of one store-wide projection.
    fn verify_store_wide(&self, p: &Arc<dyn Registered>) -> Result<CacheCheck> {
        let mut entries = match self.load_store_wide(p.as_ref()) {
            Ok(entries) => entries,
            Err(CacheMiss::Missing) => return Ok(CacheCheck::Missing),
            Err(miss) => return Ok(CacheCheck::Unusable(miss.to_string())),
        };
        for info in self.live_sessions() {
            let (stream, next) = (info.id, info.next_seq.0);
            let Some(entry) = entries.remove(&stream.0) else {
                continue;
            };
            let header = self.read_header(&info.name, stream)?;
            let loaded = self.check_entry(p.as_ref(), stream, &entry, next);
            match self.check_loaded(p, loaded, &info.name, stream, &header, next)? {
                CacheCheck::Ok | CacheCheck::Missing => {}
                CacheCheck::Unusable(why) => {
                    return Ok(CacheCheck::Unusable(format!(
                        "the part of session {:?}: {why}",
                        info.name
                    )))
                }
            }
        }
        Ok(CacheCheck::Ok)
    }

    /// Whether a checkpoint `loaded` of `p` for one session, folded over the records after
    /// it, equals a fold of all of the session's records (compared by their encodings).
    fn check_loaded(
        &self,
        p: &Arc<dyn Registered>,
        loaded: std::result::Result<(AnyState, u64), CacheMiss>,
        session: &str,
        stream: StreamId,
        header: &SessionHeader,
        next: u64,
    ) -> Result<CacheCheck> {
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(CacheMiss::Missing) => return Ok(CacheCheck::Missing),
            Err(miss) => return Ok(CacheCheck::Unusable(miss.to_string())),
        };
        let mut both = [
            self.resumed_from(p.clone(), Ok(loaded), header, next),
            self.resumed_from(p.clone(), Err(CacheMiss::Missing), header, next),
        ];
        self.fold_slots(&mut both, session, stream, header, next)?;
        let [cached, fresh] = both;
        let encoded = |s: &Slot| -> std::result::Result<Vec<u8>, ProjectionError> {
            s.state
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|state| p.encode(state))
        };
        Ok(if encoded(&cached.slot) == encoded(&fresh.slot) {
            CacheCheck::Ok
        } else {
            CacheCheck::Unusable(
                "the checkpoint plus the records after it differ from a fold of the log".into(),
            )
        })
    }

    /// Removes every store-wide projection's checkpoint and folds and writes it again.
    pub(super) fn rebuild_store_wide(&self) -> Result<()> {
        let log = &self.inner.log;
        let projections = &self.inner.options.store_projections.0;
        for p in projections {
            let path = cache::store_projection_path(log.dir(), p.name());
            self.remove_cache_file(&path)
                .map_err(|e| sessionlog_log::Error::Io {
                    op: "removing the cache of",
                    path: path.clone(),
                    source: e,
                })?;
        }
        // Every session is read once for all of them.
        let folds = self.fold_store_wide(projections, self.inner.options.projection_cache)?;
        for (p, fold) in projections.iter().zip(&folds) {
            self.write_store_wide_if_due(p.as_ref(), fold);
        }
        Ok(())
    }
}

/// Appends one session's part as [`decode_entries`] reads it.
fn put_entry(out: &mut Vec<u8>, stream: u64, e: &Entry) {
    put_u64(out, stream);
    put_u64(out, e.watermark);
    put_u64(out, u64::from(e.last_record_crc));
    put_u64(out, e.part.len() as u64);
    out.extend_from_slice(&e.part);
}

/// The parts of a store-wide checkpoint's section. spec: cache.md#store-wide-projections
fn decode_entries(bytes: &[u8]) -> std::result::Result<HashMap<u64, Entry>, ProjectionError> {
    let mut r = Reader::new(bytes);
    let count = r.count(32)?;
    let mut entries = HashMap::with_capacity(count);
    for _ in 0..count {
        let stream = r.u64()?;
        let watermark = r.u64()?;
        let last_record_crc = u32::try_from(r.u64()?)
            .map_err(|_| ProjectionError::Undecodable("a CRC above 32 bits".into()))?;
        let len = r.count(1)?;
        let part = r.take(len)?.to_vec();
        let entry = Entry {
            watermark,
            last_record_crc,
            part,
        };
        if entries.insert(stream, entry).is_some() {
            return Err(ProjectionError::Undecodable(format!(
                "stream {stream} listed twice"
            )));
        }
    }
    r.finish()?;
    Ok(entries)
}
