//! Reading a session's earlier events back from the log, for the rules that look back and
//! for compaction, so that writers and views keep a session's state without its events.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use sessionlog_log::{Log, Seq as LogSeq, StreamId};
use sessionlog_session::{
    decode_stored_event, upgrade_event, Error as SessionError, Event, LookBack, Seq,
};

/// Events read back most recently, kept for the next look-back: a rule usually looks at a
/// node it or the previous event just read.
const RECENT_EVENTS: usize = 8;

/// Reads event `seq` of one session from its log record `seq + 1` (through the sparse index
/// and the mapped segments), upgraded as loading upgrades it, with a small cache of the
/// events read last; a writer's also keeps the newest surface events it appended
/// ([`LogPast::remember`]).
#[derive(Debug)]
pub(crate) struct LogPast {
    log: Log,
    stream: StreamId,
    session_id: String,
    recent: Mutex<VecDeque<Event>>,
    /// Surface events the session's writer appended, in seq order, the newest kept.
    appended: Mutex<Appended>,
    /// What the store's writers keep together; none for a reader, which keeps nothing.
    kept: Option<Arc<KeptEvents>>,
}

/// The event text a store's writers keep at hand together (see [`LogPast::remember`]):
/// each writer at most [`APPENDED_BYTES`], all of them at most `limit`.
#[derive(Debug)]
pub(crate) struct KeptEvents {
    limit: usize,
    bytes: AtomicUsize,
}

impl KeptEvents {
    pub(crate) fn new(limit: usize) -> Arc<KeptEvents> {
        Arc::new(KeptEvents {
            limit,
            bytes: AtomicUsize::new(0),
        })
    }

    /// The event text kept now, by every writer together.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// The newest surface events a writer appended (in seq order), up to [`APPENDED_BYTES`] of
/// their text: compaction reads the surface since the last compaction, and a rule looks
/// back at a node the writer appended a moment ago; neither then goes to the log.
#[derive(Debug, Default)]
struct Appended {
    events: VecDeque<Event>,
    bytes: usize,
}

impl Appended {
    /// Lets the oldest kept event go; returns the length of its text (0 when none is kept).
    fn pop_oldest(&mut self) -> usize {
        let len = self.events.pop_front().map_or(0, |e| e.raw().len());
        self.bytes -= len;
        len
    }
}

/// How much event text a writer's [`LogPast`] keeps of the surface events it appended.
const APPENDED_BYTES: usize = 256 << 10;

impl LogPast {
    /// A reader's: it keeps only the few events it read last.
    pub(crate) fn new(log: Log, stream: StreamId, session_id: &str) -> LogPast {
        LogPast::with_kept(log, stream, session_id, None)
    }

    /// A writer's: it also keeps the surface events the writer appends, within its share
    /// of what the store's writers keep together.
    pub(crate) fn for_writer(
        log: Log,
        stream: StreamId,
        session_id: &str,
        kept: Arc<KeptEvents>,
    ) -> LogPast {
        LogPast::with_kept(log, stream, session_id, Some(kept))
    }

    fn with_kept(
        log: Log,
        stream: StreamId,
        session_id: &str,
        kept: Option<Arc<KeptEvents>>,
    ) -> LogPast {
        LogPast {
            log,
            stream,
            session_id: session_id.to_owned(),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_EVENTS)),
            appended: Mutex::new(Appended::default()),
            kept,
        }
    }

    /// Keeps `event`, which the session's writer has just appended (its record is in the
    /// log), when it is a surface event, as it was appended: a lookup upgrades what it
    /// finds here as a read of the record would, so it finds exactly what the log holds,
    /// and an append pays for no upgrade. The oldest kept events go once their text passes
    /// [`APPENDED_BYTES`], or while the store's writers keep more than their limit together
    /// (so once every writer is done keeping, they keep at most the limit). A reader keeps
    /// nothing.
    pub(crate) fn remember(&self, event: Event) {
        let Some(kept) = &self.kept else {
            return;
        };
        let len = event.raw().len();
        if event.surface_op().is_none() || len > APPENDED_BYTES.min(kept.limit) {
            return;
        }
        let mut appended = self.appended.lock();
        if appended
            .events
            .back()
            .is_some_and(|last| last.seq() >= event.seq())
        {
            // Not the next one: only events in seq order are kept.
            return;
        }
        appended.bytes += len;
        appended.events.push_back(event);
        // This writer's own cap first (nothing shared), then one change to the store's
        // count, the net of both: one atomic step per append.
        let mut gone = 0;
        while appended.bytes > APPENDED_BYTES {
            gone += appended.pop_oldest();
        }
        let mut total = if len >= gone {
            kept.bytes.fetch_add(len - gone, Ordering::Relaxed) + (len - gone)
        } else {
            kept.bytes.fetch_sub(gone - len, Ordering::Relaxed) - (gone - len)
        };
        while total > kept.limit && !appended.events.is_empty() {
            let len = appended.pop_oldest();
            total -= len;
            kept.bytes.fetch_sub(len, Ordering::Relaxed);
        }
    }

    fn read(&self, seq: Seq) -> Result<Option<Event>, SessionError> {
        let log_seq = seq.get().saturating_add(1);
        let next = self
            .log
            .stream_info(self.stream)
            .map_or(0, |i| i.next_seq.0);
        if log_seq >= next {
            return Ok(None);
        }
        let record =
            self.log
                .read(self.stream, LogSeq(log_seq))
                .map_err(|e| SessionError::LookBack {
                    seq,
                    detail: e.to_string(),
                    class: e.class(),
                })?;
        let mut event = decode_stored_event(&record.payload)?;
        if event.seq() != seq {
            return Err(SessionError::LookBack {
                seq,
                detail: format!(
                    "its record holds event {}; run `sessionlog verify` on the store",
                    event.seq().get()
                ),
                class: sessionlog_session::ErrorClass::Damaged,
            });
        }
        upgrade_event(&mut event, self, &self.session_id)?;
        Ok(Some(event))
    }
}

impl Drop for LogPast {
    /// A writer done with its session gives back what it kept.
    fn drop(&mut self) {
        if let Some(kept) = &self.kept {
            kept.bytes
                .fetch_sub(self.appended.get_mut().bytes, Ordering::Relaxed);
        }
    }
}

impl LookBack for LogPast {
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, SessionError> {
        let kept = {
            let appended = self.appended.lock();
            appended
                .events
                .binary_search_by_key(&seq, Event::seq)
                .ok()
                .and_then(|at| appended.events.get(at).cloned())
        };
        if let Some(mut event) = kept {
            // Upgraded as a read of its record is (outside the lock: an upgrade may look
            // back). An event in the current shape is left as it is.
            upgrade_event(&mut event, self, &self.session_id)?;
            return Ok(Some(Cow::Owned(event)));
        }
        if let Some(hit) = self.recent.lock().iter().find(|e| e.seq() == seq) {
            return Ok(Some(Cow::Owned(hit.clone())));
        }
        let Some(event) = self.read(seq)? else {
            return Ok(None);
        };
        let mut recent = self.recent.lock();
        if recent.len() == RECENT_EVENTS {
            recent.pop_front();
        }
        recent.push_back(event.clone());
        Ok(Some(Cow::Owned(event)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Workload, WorkloadConfig};
    use crate::{Store, StoreOptions};
    use sessionlog_session::SessionHeader;

    #[test]
    fn a_writer_keeps_at_hand_exactly_what_its_log_holds_within_the_budget() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path(), StoreOptions::default()).expect("store");
        let mut h = store
            .create_session("s", SessionHeader::new("s", 0, None))
            .expect("session");
        let mut w = Workload::new(5, WorkloadConfig::default());
        for e in w.session_start(0) {
            h.append(e).expect("append");
        }
        let mut first_node = None;
        let mut turns = 0;
        // Until the oldest node kept at hand has been let go of for the budget.
        while turns < 2_000 {
            for e in w.turn(h.next_seq().get(), 0, None) {
                let event = h.append(e).expect("append");
                if first_node.is_none() && event.surface_op().is_some() {
                    first_node = Some(event.seq());
                }
            }
            h.commit().expect("commit");
            turns += 1;
            let appended = h.past.appended.lock();
            if appended.events.front().map(Event::seq) > first_node {
                break;
            }
        }
        let first_node = first_node.expect("the workload appends surface events");
        let kept: Vec<Event> = h.past.appended.lock().events.iter().cloned().collect();
        assert!(
            kept.len() > 20,
            "{} events kept after {turns} turns",
            kept.len()
        );
        assert!(kept[0].seq() > first_node, "the oldest went for the budget");
        let bytes: usize = kept.iter().map(|e| e.raw().len()).sum();
        assert!(bytes <= APPENDED_BYTES, "{bytes} bytes kept");
        assert_eq!(bytes, h.past.appended.lock().bytes);
        for pair in kept.windows(2) {
            assert!(pair[0].seq() < pair[1].seq(), "kept in seq order");
        }
        for event in &kept {
            assert!(event.surface_op().is_some(), "only surface events are kept");
            let logged = h.past.read(event.seq()).expect("read").expect("in the log");
            assert_eq!(event, &logged, "kept as the log holds it");
            let found = h
                .past
                .event_at(event.seq())
                .expect("lookup")
                .expect("found");
            assert_eq!(found.as_ref(), event);
        }
        // A node let go of is read from the log again.
        let gone = h.past.event_at(first_node).expect("lookup").expect("found");
        assert_eq!(gone.seq(), first_node);
    }

    /// A new session `name`, in its first turn's first step (where messages may go).
    fn in_a_step(store: &Store, name: &str) -> crate::SessionHandle {
        let mut h = store
            .create_session(name, SessionHeader::new(name, 0, None))
            .expect("session");
        for (event_type, data) in [
            ("turn/start", r#"{"turn":1}"#),
            ("step/start", r#"{"turn":1,"step":1}"#),
        ] {
            h.append(sessionlog_session::EventInput::new(event_type, 1, data))
                .expect(event_type);
        }
        h
    }

    /// A `user/message` of about 1 KiB of text.
    fn message(n: u64) -> sessionlog_session::EventInput {
        let text = "words of a message ".repeat(54);
        sessionlog_session::EventInput::new(
            "user/message",
            1,
            format!(
                r#"{{"content":[{{"type":"text","text":"{text}{n}"}}],"source":{{"kind":"user"}},"role":"user","id":"u-{n}"}}"#
            ),
        )
        .with_surface_op(sessionlog_session::SurfaceOp::Append)
    }

    #[test]
    fn the_store_s_writers_keep_at_most_its_limit_together_and_give_it_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let limit = 24 << 10;
        let store = Store::open(
            dir.path(),
            StoreOptions::default().with_kept_events_bytes(limit),
        )
        .expect("store");
        let mut handles: Vec<_> = (0..4)
            .map(|i| in_a_step(&store, &format!("s{i}")))
            .collect();
        let kept_by = |hs: &[crate::SessionHandle]| -> Vec<usize> {
            hs.iter().map(|h| h.past.appended.lock().bytes).collect()
        };
        for round in 0..40u64 {
            for h in &mut handles {
                h.append(message(round)).expect("append");
                let total = store.inner.kept.bytes();
                assert!(total <= limit, "{total} bytes kept after round {round}");
            }
            assert_eq!(
                kept_by(&handles).iter().sum::<usize>(),
                store.inner.kept.bytes(),
                "the store counts what its writers keep"
            );
        }
        for (i, h) in handles.iter().enumerate() {
            let kept = h.past.appended.lock().events.len();
            assert!(kept >= 2, "writer {i} keeps {kept} events");
        }
        // What a writer let go of is read from the log; what it keeps is what the log holds.
        let h = &handles[0];
        for seq in 2..h.next_seq().get() {
            let seq = Seq(seq);
            let logged = h.past.read(seq).expect("read").expect("in the log");
            let found = h.past.event_at(seq).expect("lookup").expect("found");
            assert_eq!(found.as_ref(), &logged, "event {}", seq.get());
        }
        let last_two = kept_by(&handles[2..]).iter().sum::<usize>();
        handles.truncate(2);
        assert_eq!(
            store.inner.kept.bytes(),
            kept_by(&handles).iter().sum::<usize>()
        );
        drop(handles);
        assert_eq!(
            store.inner.kept.bytes(),
            0,
            "every writer gave back what it kept"
        );
        assert!(last_two > 0);

        // With no room at all, nothing is kept and every look-back reads the log.
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(
            dir.path(),
            StoreOptions::default().with_kept_events_bytes(0),
        )
        .expect("store");
        let mut h = in_a_step(&store, "s");
        for n in 0..5 {
            h.append(message(n)).expect("append");
        }
        assert_eq!(h.past.appended.lock().events.len(), 0);
        assert_eq!(store.inner.kept.bytes(), 0);
        let found = h.past.event_at(Seq(3)).expect("lookup").expect("found");
        assert_eq!(found.seq(), Seq(3));
    }

    #[test]
    fn a_kept_event_of_an_older_shape_is_found_upgraded_as_its_record_reads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path(), StoreOptions::default()).expect("store");
        // A DSH V0 session: a message from before message ids, then a tool result and a
        // replacement of it (whose upgrade looks back at the result it replaces).
        let file = [
            r#"{"type":"session","version":0,"id":"old","createdAt":1}"#,
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"user/message","seq":2,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
            r#"{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
            r#"{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"a long output"}],"isError":false},"surfaceOp":"append"}"#,
            r#"{"type":"tool/result","seq":5,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"short"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":{"op":"replace","start":4,"end":4}}"#,
        ]
        .join("\n")
            + "\n";
        store.import_dsh(file.as_bytes(), None).expect("import");
        let stream = store.stream("old").expect("stream");
        let log = store.inner.log.clone();
        let past = LogPast::for_writer(log.clone(), stream, "old", KeptEvents::new(1 << 20));
        for seq in 2..=5u64 {
            // The event as its record holds it, before any upgrade: what a writer keeps.
            let record = log.read(stream, LogSeq(seq + 1)).expect("record");
            let stored = decode_stored_event(&record.payload).expect("decode");
            assert!(!stored.is_upgraded());
            past.remember(stored);
        }
        for seq in 2..=5u64 {
            let logged = past.read(Seq(seq)).expect("read").expect("in the log");
            assert!(logged.is_upgraded(), "event {seq} is of an older shape");
            let found = past.event_at(Seq(seq)).expect("lookup").expect("found");
            assert_eq!(found.as_ref(), &logged, "event {seq}");
        }
        assert_eq!(past.appended.lock().events.len(), 4, "all four kept");
    }
}
