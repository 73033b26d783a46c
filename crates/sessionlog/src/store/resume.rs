//! Resuming a session's state: from its checkpoint in the cache plus the records after the
//! checkpoint's watermark, or from the whole log when no checkpoint can be used; and
//! writing checkpoints, of durable records only, never syncing anything.
//! spec: format-spec/cache.md

use std::path::Path;

use sessionlog_log::{Record, Seq as LogSeq, StreamId};
use sessionlog_session::codec::decode_stored_event;
use sessionlog_session::{
    FormatVersion, PreparedEvent, SessionHeader, SessionState, StoredChunk,
    CHECKPOINT_STATE_VERSION,
};

use super::{pipeline, CacheUse, LogPast, Store};
use crate::cache::{self, CacheHeader, CacheMiss, Section};
use crate::error::{Error, Result};

/// The one section of a session's checkpoint file: the state machine's checkpoint (its
/// compaction locks included). spec: cache.md#session-state
const STATE_SECTION: &str = "state";

/// A stored record made ready to fold.
#[expect(
    clippy::large_enum_variant,
    reason = "items travel in batches of a few hundred; boxing the event would allocate once per record"
)]
enum Loaded {
    /// A chunk, known by its head.
    Chunk(StoredChunk),
    /// Any other event, decoded and prepared.
    Event(PreparedEvent),
}

fn sections() -> [(&'static str, u32); 1] {
    [(STATE_SECTION, CHECKPOINT_STATE_VERSION)]
}

impl Store {
    /// Folds session `name` into the state a writer or a view needs: from its checkpoint
    /// when one can be used, plus the records after its watermark; otherwise from the whole
    /// log (and says why). Records are streamed from the log; no event is kept.
    pub(super) fn resume(&self, name: &str, stream: StreamId) -> Result<(SessionState, CacheUse)> {
        let header = self.read_header(name, stream)?;
        let log = &self.inner.log;
        let next = self.next_record(stream);
        // A session declaring DSH V1 or later is read with its own format's rules.
        let version = FormatVersion::for_header(&self.inner.options.version, &header);
        let (mut state, start, mut cache) = if self.inner.options.projection_cache {
            match self.load_checkpoint(stream, next, &version) {
                Ok((state, watermark)) => (state, watermark, CacheUse::Hit { folded: 0 }),
                Err(miss) => (
                    self.empty_fold(header.clone(), version),
                    1,
                    CacheUse::Rebuilt(miss),
                ),
            }
        } else {
            (
                self.empty_fold(header.clone(), version),
                1,
                CacheUse::Disabled,
            )
        };
        let past = LogPast::new(log.clone(), stream, header.id());
        let mut preparer = state.load_preparer();
        let records = log
            .iter(stream, LogSeq(start), LogSeq(next))
            .map(|r| r.map_err(Error::from));
        // A chunk (most records of a streamed session) is folded from its record's head;
        // every other record is decoded and prepared.
        let prepare = move |record: Record| {
            if let Some(chunk) = preparer.stored_chunk(record.kind, &record.payload) {
                return Ok(Loaded::Chunk(chunk));
            }
            let event = decode_stored_event(&record.payload).map_err(|e| Error::BadRecord {
                session: name.to_owned(),
                seq: record.seq.0,
                detail: e.to_string(),
            })?;
            Ok(Loaded::Event(preparer.prepare(event)))
        };
        let count = pipeline::fold_events(next.saturating_sub(start), records, prepare, |item| {
            match item {
                Loaded::Chunk(chunk) => state.load_stored_chunk(chunk)?,
                Loaded::Event(event) => state.load_prepared(event, &past)?,
            }
            Ok(())
        })?;
        if let CacheUse::Hit { folded } = &mut cache {
            *folded = count;
        }
        Ok((state, cache))
    }

    /// The state of an empty session, measuring tokens with the store's counter.
    fn empty_fold(&self, header: SessionHeader, version: FormatVersion) -> SessionState {
        SessionState::with_tokens(header, version, self.inner.options.token_counter.clone())
    }

    /// The checkpoint of `stream` and its watermark, if the file proves it matches this log
    /// (store, stream, watermark within the log, CRC of the last folded record) and decodes
    /// under `version` (the session's rules) and this store's token counter.
    pub(super) fn load_checkpoint(
        &self,
        stream: StreamId,
        next: u64,
        version: &FormatVersion,
    ) -> std::result::Result<(SessionState, u64), CacheMiss> {
        let path = cache::cache_path(self.inner.log.dir(), stream);
        let bytes = self.read_cache_file(&path)?;
        let (h, parts) = self.check_cache_file(&path, &bytes, &sections(), stream, next)?;
        let [state] = parts.as_slice() else {
            return Err(CacheMiss::Incompatible("sections missing".into()));
        };
        let state = SessionState::decode_checkpoint(
            state,
            version.clone(),
            Some(self.inner.options.token_counter.clone()),
        )
        .map_err(|e| CacheMiss::Incompatible(format!("state: {e}")))?;
        if state.next_seq().get() + 1 != h.watermark {
            return Err(CacheMiss::Stale(format!(
                "the state folded {} events, the watermark says {}",
                state.next_seq().get(),
                h.watermark - 1
            )));
        }
        Ok((state, h.watermark))
    }

    /// Writes the checkpoint of `state` (every record of `stream` folded) when caching is
    /// on, the store is writable and every record of the stream is durable: a crash can
    /// then never take back what the checkpoint claims. Never syncs the log and never fails
    /// the caller: a checkpoint that cannot be written costs speed, not correctness.
    /// `known` is the header of a checkpoint of `stream` found already, used when it covers
    /// what `state` does.
    pub(super) fn write_checkpoint(
        &self,
        stream: StreamId,
        state: &SessionState,
        known: Option<CacheHeader>,
    ) {
        let watermark = state.next_seq().get() + 1;
        let Some(header) = self.cache_header(stream, watermark, known) else {
            return;
        };
        let mut bytes = Vec::new();
        state.encode_checkpoint(&mut bytes);
        let [(name, version)] = sections();
        let bytes = cache::encode(
            &header,
            &[Section {
                name,
                version,
                bytes: &bytes,
            }],
        );
        self.write_cache_file(&cache::cache_path(self.inner.log.dir(), stream), &bytes);
    }

    /// The bytes of a cache file; missing or unreadable is a miss.
    pub(super) fn read_cache_file(
        &self,
        path: &Path,
    ) -> std::result::Result<bytes::Bytes, CacheMiss> {
        match cache::read(&self.inner.log.storage(), path) {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err(CacheMiss::Missing),
            Err(e) => Err(CacheMiss::Corrupt(e.to_string())),
        }
    }

    /// Decodes a cache file of `stream` with the `expected` sections and checks that it
    /// matches this log: its store, its stream, a watermark within the `next` records of
    /// the stream, and the CRC of the last record it folded. spec: cache.md#when-a-file-is-used
    pub(super) fn check_cache_file<'a>(
        &self,
        path: &Path,
        bytes: &'a [u8],
        expected: &[(&str, u32)],
        stream: StreamId,
        next: u64,
    ) -> std::result::Result<(CacheHeader, Vec<&'a [u8]>), CacheMiss> {
        let log = &self.inner.log;
        let (h, parts) = self.decode_cache_file(path, bytes, expected)?;
        if h.store_id != log.store_id() {
            return Err(CacheMiss::Stale("written for another store".into()));
        }
        if h.stream_id != stream.0 {
            return Err(CacheMiss::Stale(format!(
                "written for stream {}, the session is stream {}",
                h.stream_id, stream.0
            )));
        }
        self.check_watermark(stream, h.watermark, h.last_record_crc, next)?;
        Ok((h, parts))
    }

    /// Checks that a checkpoint folded through record `watermark - 1` of `stream`, whose
    /// payload had CRC `last_record_crc`, matches the log, where the stream has `next`
    /// records. spec: cache.md#when-a-file-is-used
    pub(super) fn check_watermark(
        &self,
        stream: StreamId,
        watermark: u64,
        last_record_crc: u32,
        next: u64,
    ) -> std::result::Result<(), CacheMiss> {
        if watermark == 0 || watermark > next {
            return Err(CacheMiss::Stale(format!(
                "watermark {watermark} but the session has {next} records"
            )));
        }
        let last = self
            .inner
            .log
            .read(stream, LogSeq(watermark - 1))
            .map_err(|e| CacheMiss::Stale(e.to_string()))?;
        if cache::record_crc(&last.payload) != last_record_crc {
            return Err(CacheMiss::Stale(format!(
                "record {} differs from the one folded",
                watermark - 1
            )));
        }
        Ok(())
    }

    /// The header of a cache file of `stream` folded through record `watermark - 1`, when
    /// one may be written now: caching is on, the store is writable, every record of the
    /// stream is durable and `watermark` is the stream's record count.
    pub(super) fn durable_cache_header(
        &self,
        stream: StreamId,
        watermark: u64,
    ) -> Option<CacheHeader> {
        let log = &self.inner.log;
        if !self.inner.options.projection_cache
            || log.is_read_only()
            || !log.is_stream_durable(stream)
            || self.next_record(stream) != watermark
        {
            return None;
        }
        let last = log.read(stream, LogSeq(watermark - 1)).ok()?;
        Some(CacheHeader {
            store_id: log.store_id(),
            stream_id: stream.0,
            watermark,
            last_record_crc: cache::record_crc(&last.payload),
        })
    }

    /// [`Store::durable_cache_header`] for `watermark`, or `known` when it is that header
    /// already (found for another checkpoint of the same commit).
    pub(super) fn cache_header(
        &self,
        stream: StreamId,
        watermark: u64,
        known: Option<CacheHeader>,
    ) -> Option<CacheHeader> {
        match known {
            Some(h) if h.watermark == watermark => Some(h),
            _ => self.durable_cache_header(stream, watermark),
        }
    }

    /// [`cache::decode`] of the file at `path`, which is forgotten as one to append to when
    /// it is damaged: the next checkpoint replaces it.
    pub(super) fn decode_cache_file<'a>(
        &self,
        path: &Path,
        bytes: &'a [u8],
        expected: &[(&str, u32)],
    ) -> std::result::Result<(CacheHeader, Vec<&'a [u8]>), CacheMiss> {
        let decoded = cache::decode(bytes, expected);
        if let Err(CacheMiss::Corrupt(_)) = decoded {
            self.inner.cache_files.forget(path);
        }
        decoded
    }

    /// Writes a checkpoint to a cache file; a file that cannot be written costs speed, not
    /// correctness.
    pub(super) fn write_cache_file(&self, path: &Path, bytes: &[u8]) {
        let _ = self.write_cache_pieces(path, &[bytes]);
    }

    /// [`Store::write_cache_file`] of a checkpoint whose bytes are `pieces` in order.
    pub(super) fn write_cache_pieces(&self, path: &Path, pieces: &[&[u8]]) -> std::io::Result<()> {
        cache::write_pieces(
            &self.inner.log.storage(),
            &self.inner.cache_files,
            path,
            pieces,
        )
    }

    /// Removes a cache file if there is one, and forgets it as one to append to.
    pub(super) fn remove_cache_file(&self, path: &Path) -> std::io::Result<()> {
        cache::remove(&self.inner.log.storage(), &self.inner.cache_files, path)
    }
}
