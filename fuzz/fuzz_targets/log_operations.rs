//! Random operations on a log over simulated storage, checked against a model of what was
//! acknowledged: create and delete streams, commit (buffered or synced), flush, read, reclaim
//! (removing dead segments and rewriting mostly dead ones), arm an I/O failure countdown, lose
//! power, reopen. A reclaim that succeeds must leave every live stream reading exactly what was
//! committed. After every restart the recovered log must hold
//! every durable record, each stream a prefix of what was committed with exactly the committed
//! bytes, no deleted-for-sure stream and no stream nobody created. Once an operation fails
//! with an I/O error the log must refuse everything with `Error::Poisoned` until reopened,
//! but for a read or a reclaim that fails with one: those change nothing the log depends on.

#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sessionlog_log::{Append, Compression, Durability, Error, Log, LogOptions, Seq, StreamId};
use sessionlog_testkit::adapter::snapshot;
use sessionlog_testkit::{CrashPolicy, Fault, FaultError, OpKind, SimStorage};

#[derive(Debug, Arbitrary)]
enum Op {
    Create,
    Commit {
        records: Vec<(u8, u8)>,
        sync: bool,
    },
    Flush,
    Read {
        stream: u8,
        seq: u8,
    },
    Delete {
        stream: u8,
    },
    Reclaim,
    ArmFault {
        kind: u8,
        after: u8,
        no_space: bool,
        sticky: bool,
        short_write: bool,
    },
    PowerLoss {
        seed: u64,
        policy: u8,
    },
    Reopen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Durable,
    Acknowledged,
    Uncertain,
}

#[derive(Debug, Default)]
struct ModelStream {
    created: Option<Status>,
    deleted: Option<Status>,
    records: Vec<(Vec<u8>, Status)>,
}

#[derive(Debug, Default)]
struct Model {
    streams: BTreeMap<String, ModelStream>,
    names_used: usize,
}

impl Model {
    /// Everything acknowledged is durable now (a sync, a flush).
    fn everything_durable(&mut self) {
        for s in self.streams.values_mut() {
            for status in s
                .records
                .iter_mut()
                .map(|(_, st)| st)
                .chain(s.created.iter_mut())
                .chain(s.deleted.iter_mut())
            {
                if *status == Status::Acknowledged {
                    *status = Status::Durable;
                }
            }
        }
    }

    /// Live streams the model may append to (created, not deleted).
    fn live(&self) -> Vec<String> {
        self.streams
            .iter()
            .filter(|(_, s)| s.created.is_some() && s.deleted.is_none())
            .map(|(n, _)| n.clone())
            .collect()
    }
}

const OPTIONS_SEGMENT_BYTES: u64 = 64 << 10;

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(OPTIONS_SEGMENT_BYTES)
        .with_index_interval_bytes(256)
        .with_write_buffer_bytes(8 << 10)
        .with_max_record_bytes(16 << 10)
        .with_preallocate(false)
        // Rewrite often, so the fuzzer reaches rewrites with few deletes.
        .with_rewrite_below_live_percent(80)
}

fn payload(stream: &str, seq: usize, len: u8, salt: usize) -> Vec<u8> {
    let seed = format!("{stream}/{seq}/{salt}|");
    seed.bytes().cycle().take(usize::from(len) * 24).collect()
}

struct Run {
    sim: SimStorage,
    log: Option<Log>,
    model: Model,
    /// The first failure, when the log must now be poisoned.
    failed: bool,
    ops: usize,
    /// Opens after the first.
    restarts: usize,
}

impl Run {
    fn dir() -> &'static Path {
        Path::new("/store")
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("open")
    }

    /// An operation failed: if the log was already failed it must say `Poisoned`.
    fn note_failure(&mut self, what: &str, e: &Error) {
        if self.failed {
            assert!(
                matches!(e, Error::Poisoned { .. }),
                "{what} after a failure returned {e:?}, not Poisoned"
            );
        }
        match e {
            Error::Io { .. } | Error::Poisoned { .. } => self.failed = true,
            other => panic!("{what} failed with an unexpected error: {other:?}"),
        }
    }

    fn apply(&mut self, op: Op) {
        self.ops += 1;
        match op {
            Op::Create => self.create(),
            Op::Commit { records, sync } => self.commit(&records, sync),
            Op::Flush => match self.log().flush() {
                Ok(()) => {
                    assert!(!self.failed, "flush succeeded on a failed log");
                    self.model.everything_durable();
                }
                Err(e) => self.note_failure("flush", &e),
            },
            Op::Read { stream, seq } => self.read(stream, seq),
            Op::Delete { stream } => self.delete(stream),
            Op::Reclaim => self.reclaim(),
            Op::ArmFault {
                kind,
                after,
                no_space,
                sticky,
                short_write,
            } => {
                let kind = [
                    OpKind::Write,
                    OpKind::SyncData,
                    OpKind::SyncAll,
                    OpKind::SyncDir,
                    OpKind::Resize,
                    OpKind::Namespace,
                    OpKind::Read,
                    OpKind::Any,
                ][usize::from(kind % 8)];
                let mut fault = Fault::on(kind).after(u64::from(after % 16));
                if no_space {
                    fault = fault.with_error(FaultError::NoSpace);
                }
                if sticky {
                    fault = fault.sticky();
                }
                if short_write {
                    fault = fault.short_write();
                }
                self.sim.inject(fault);
            }
            Op::PowerLoss { seed, policy } => {
                let policy = match policy % 3 {
                    0 => CrashPolicy::default(),
                    1 => CrashPolicy::lose_everything_unsynced(),
                    _ => CrashPolicy::keep_everything_written(),
                };
                self.sim
                    .crash_with(&mut StdRng::seed_from_u64(seed), &policy);
                self.restart(true);
            }
            Op::Reopen => self.restart(false),
        }
    }

    fn create(&mut self) {
        let name = format!("s{}", self.model.names_used);
        self.model.names_used += 1;
        let status = match self.log().create_stream(&name) {
            Ok(_) => {
                assert!(!self.failed, "create succeeded on a failed log");
                Status::Acknowledged
            }
            Err(e) => {
                self.note_failure("create_stream", &e);
                Status::Uncertain
            }
        };
        self.model.streams.insert(
            name,
            ModelStream {
                created: Some(status),
                ..ModelStream::default()
            },
        );
    }

    fn commit(&mut self, records: &[(u8, u8)], sync: bool) {
        let live = self.model.live();
        if live.is_empty() || records.is_empty() {
            return;
        }
        let mut planned: Vec<(String, StreamId, Vec<u8>, u64)> = Vec::new();
        let mut next: BTreeMap<String, usize> = BTreeMap::new();
        for (i, &(stream, len)) in records.iter().take(6).enumerate() {
            let name = &live[usize::from(stream) % live.len()];
            let Some(id) = self.log().stream_id(name) else {
                // Its creation failed; the log does not know it.
                return;
            };
            let n = next
                .entry(name.clone())
                .or_insert_with(|| self.model.streams[name].records.len());
            planned.push((
                name.clone(),
                id,
                payload(name, *n, len, self.ops * 8 + i),
                *n as u64,
            ));
            *n += 1;
        }
        let appends: Vec<Append<'_>> = planned
            .iter()
            .map(|(_, id, p, _)| Append::new(*id, 1, p))
            .collect();
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        let status = match self.log().commit(&appends, durability) {
            Ok(receipt) => {
                assert!(!self.failed, "commit succeeded on a failed log");
                let expected: Vec<u64> = planned.iter().map(|p| p.3).collect();
                let got: Vec<u64> = receipt.seqs.iter().map(|s| s.0).collect();
                assert_eq!(got, expected, "a commit's receipt has the wrong seqs");
                Status::Acknowledged
            }
            Err(e) => {
                self.note_failure("commit", &e);
                Status::Uncertain
            }
        };
        for (name, _, p, _) in planned {
            let s = self.model.streams.get_mut(&name).expect("known");
            s.records.push((p, status));
        }
        if sync && status == Status::Acknowledged {
            self.model.everything_durable();
        }
    }

    fn read(&mut self, stream: u8, seq: u8) {
        let live = self.model.live();
        if live.is_empty() {
            return;
        }
        let name = &live[usize::from(stream) % live.len()];
        let Some(id) = self.log().stream_id(name) else {
            return;
        };
        let records = &self.model.streams[name].records;
        let seq = usize::from(seq) % (records.len() + 1);
        match self.log().read(id, Seq(seq as u64)) {
            Ok(r) => {
                assert!(
                    seq < records.len(),
                    "read past the end of {name} returned data"
                );
                assert_eq!(
                    &r.payload[..],
                    &records[seq].0[..],
                    "{name}#{seq} read wrong bytes"
                );
            }
            Err(Error::NoSuchRecord { .. }) => {
                assert!(
                    seq >= records.len() || records[seq].1 == Status::Uncertain,
                    "{name}#{seq} is missing"
                );
            }
            // A failed read changes nothing on disk, so it does not poison the log.
            Err(Error::Io { .. }) if !self.failed => {}
            Err(e) => self.note_failure("read", &e),
        }
    }

    fn delete(&mut self, stream: u8) {
        let live = self.model.live();
        if live.is_empty() {
            return;
        }
        let name = live[usize::from(stream) % live.len()].clone();
        let Some(id) = self.log().stream_id(&name) else {
            return;
        };
        let status = match self.log().delete_stream(id, Durability::Sync) {
            Ok(()) => {
                assert!(!self.failed, "delete succeeded on a failed log");
                Status::Durable
            }
            Err(e) => {
                self.note_failure("delete_stream", &e);
                Status::Uncertain
            }
        };
        if status == Status::Durable {
            self.model.everything_durable();
        }
        self.model.streams.get_mut(&name).expect("known").deleted = Some(status);
    }

    /// Reclaims; on success everything is durable (reclaim syncs first) and every live stream
    /// still reads exactly its committed records.
    fn reclaim(&mut self) {
        match self.log().reclaim() {
            Ok(_) => {
                assert!(!self.failed, "reclaim succeeded on a failed log");
                self.model.everything_durable();
            }
            // A reclaim that fails to remove a segment file, or to write, sync or rename a
            // rewrite, changes nothing the log depends on (recovery.md#poisoning), so it does
            // not poison the log: what follows must go on as if it had not run.
            Err(Error::Io { .. }) if !self.failed => return,
            Err(e) => return self.note_failure("reclaim", &e),
        }
        for name in self.model.live() {
            let Some(id) = self.log().stream_id(&name) else {
                continue;
            };
            let got: Vec<Vec<u8>> = match self
                .log()
                .iter(id, Seq(0), Seq(u64::MAX))
                .map(|r| r.map(|r| r.payload.to_vec()))
                .collect::<Result<_, _>>()
            {
                Ok(got) => got,
                // An armed fault may fail a read; it changes nothing on disk.
                Err(Error::Io { .. }) => continue,
                Err(e) => panic!("{name:?} reads back after reclaim: {e}"),
            };
            let want: Vec<&[u8]> = self.model.streams[&name]
                .records
                .iter()
                .map(|(p, _)| &p[..])
                .collect();
            assert_eq!(got, want, "{name:?} after reclaim");
        }
    }

    /// Drops the log (after a power loss, or a plain process restart), opens the store again
    /// with no faults armed, and checks what it recovered.
    fn restart(&mut self, _power_loss: bool) {
        self.log = None;
        self.sim.clear_faults();
        // Every other open compresses sealed segments on reclaim, so schedules mix plain and
        // compressed segments, and rewrite compressed ones with compression off.
        self.restarts += 1;
        let compression = if self.restarts % 2 == 1 {
            Compression::ZSTD
        } else {
            Compression::None
        };
        let log = Log::open_with(
            self.sim.as_storage(),
            Self::dir(),
            options().with_compression(compression),
        )
        .unwrap_or_else(|e| panic!("reopening after {} failed: {e:?}", self.ops));
        let snap = snapshot(&log).unwrap_or_else(|e| panic!("recovered log reads back: {e}"));
        for name in snap.streams.keys() {
            assert!(
                self.model.streams.contains_key(name),
                "stream {name:?} appeared from nowhere"
            );
        }
        for (name, s) in &mut self.model.streams {
            match snap.streams.get(name) {
                None => {
                    let created_for_sure = s.created == Some(Status::Durable);
                    let maybe_deleted = s.deleted.is_some();
                    assert!(
                        !created_for_sure || maybe_deleted,
                        "durably created stream {name:?} is missing"
                    );
                    assert!(
                        maybe_deleted || !s.records.iter().any(|(_, st)| *st == Status::Durable),
                        "stream {name:?} with durable records is missing"
                    );
                    // Gone: forget it (its name is never used again).
                    s.created = None;
                    s.deleted = None;
                    s.records.clear();
                }
                Some(found) => {
                    assert_ne!(
                        s.deleted,
                        Some(Status::Durable),
                        "durably deleted stream {name:?} came back"
                    );
                    assert!(
                        found.records.len() <= s.records.len(),
                        "{name:?} has {} records, only {} were committed",
                        found.records.len(),
                        s.records.len()
                    );
                    let durable = s
                        .records
                        .iter()
                        .rposition(|(_, st)| *st == Status::Durable)
                        .map_or(0, |i| i + 1);
                    assert!(
                        found.records.len() >= durable,
                        "{name:?} lost durable records: {} of {durable} left",
                        found.records.len()
                    );
                    for (i, (seq, record)) in found.records.iter().enumerate() {
                        assert_eq!(*seq, i as u64);
                        assert_eq!(
                            &record.payload[..],
                            &s.records[i].0[..],
                            "{name:?}#{i} recovered with other bytes"
                        );
                    }
                    s.records.truncate(found.records.len());
                    s.created = Some(Status::Durable);
                    s.deleted = None;
                }
            }
            // Open syncs what it recovered, so all of it is durable now.
            for (_, st) in &mut s.records {
                *st = Status::Durable;
            }
        }
        self.model.streams.retain(|_, s| s.created.is_some());
        self.failed = false;
        self.log = Some(log);
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let sim = SimStorage::new(7);
    let log = Log::open_with(sim.as_storage(), Run::dir(), options()).expect("a new store opens");
    let mut run = Run {
        sim,
        log: Some(log),
        model: Model::default(),
        failed: false,
        ops: 0,
        restarts: 0,
    };
    for op in ops.into_iter().take(256) {
        run.apply(op);
    }
    run.restart(false);
});
