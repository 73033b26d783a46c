//! Random operation sequences against the reference model, without crashes: creating
//! streams, committing batches across streams, flushing, reading by seq, iterating ranges and
//! reopening must always agree with what the model says the log holds. Runs on the simulated
//! storage and on the real file system (which reads sealed segments through their mapping).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use sessionlog_log::{
    Append, Durability, Error, Log, LogOptions, RealStorage, Seq, Storage, StreamId,
};
use sessionlog_testkit::adapter::snapshot;
use sessionlog_testkit::{ModelAppend, ModelRecord, ReferenceModel, Restart, SimStorage};

#[derive(Debug, Clone)]
enum Op {
    CreateStream,
    DeleteStream {
        stream: usize,
        sync: bool,
    },
    Commit {
        records: Vec<(usize, u8, u8, Vec<u8>)>,
        sync: bool,
        state_expected_seqs: bool,
    },
    Flush,
    Read {
        stream: usize,
        seq: u64,
    },
    Iter {
        stream: usize,
        from: u64,
        len: u64,
    },
    Reopen,
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => vec(any::<u8>(), 0..64),
        2 => vec(any::<u8>(), 64..1500),
        1 => vec(any::<u8>(), 1500..9000),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let record = (any::<usize>(), 0u8..0xF0, any::<u8>(), payload());
    prop_oneof![
        2 => Just(Op::CreateStream),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(stream, sync)| Op::DeleteStream { stream, sync }),
        8 => (vec(record, 1..5), any::<bool>(), any::<bool>()).prop_map(
            |(records, sync, state_expected_seqs)| Op::Commit { records, sync, state_expected_seqs }
        ),
        1 => Just(Op::Flush),
        4 => (any::<usize>(), 0u64..48).prop_map(|(stream, seq)| Op::Read { stream, seq }),
        3 => (any::<usize>(), 0u64..48, 0u64..64)
            .prop_map(|(stream, from, len)| Op::Iter { stream, from, len }),
        1 => Just(Op::Reopen),
    ]
}

fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_index_interval_bytes(64)
        .with_write_buffer_bytes(4096)
}

/// A log under test with its model.
struct Harness {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    log: Option<Log>,
    model: ReferenceModel,
    streams_created: usize,
}

impl Harness {
    fn new(storage: Arc<dyn Storage>, dir: &Path) -> Harness {
        let log = Log::open_with(storage.clone(), dir, options()).expect("open a new store");
        Harness {
            storage,
            dir: dir.to_owned(),
            log: Some(log),
            model: ReferenceModel::new(),
            streams_created: 0,
        }
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("open")
    }

    /// The `index`-th acknowledged stream (modulo their number) and its id.
    fn pick_stream(&self, index: usize) -> Option<(String, StreamId)> {
        let streams = self.model.streams();
        let name = streams.get(index % streams.len().max(1))?.clone();
        let id = self
            .log()
            .stream_id(&name)
            .expect("acknowledged stream has an id");
        Some((name, id))
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::CreateStream => self.create_stream(),
            Op::DeleteStream { stream, sync } => self.delete_stream(stream, sync),
            Op::Commit {
                records,
                sync,
                state_expected_seqs,
            } => self.commit(records, sync, state_expected_seqs),
            Op::Flush => {
                self.log().flush().map_err(fail)?;
                self.model.flushed();
                Ok(())
            }
            Op::Read { stream, seq } => self.read(stream, seq),
            Op::Iter { stream, from, len } => self.iter(stream, from, len),
            Op::Reopen => self.reopen(),
        }
    }

    fn create_stream(&mut self) -> Result<(), TestCaseError> {
        let name = format!("session-{}", self.streams_created);
        self.streams_created += 1;
        let id = self.log().create_stream(&name).map_err(fail)?;
        self.model.stream_created(&name, id.0, false);
        let again = self.log().create_stream(&name);
        prop_assert!(matches!(again, Err(Error::StreamExists(_))), "{again:?}");
        Ok(())
    }

    fn delete_stream(&mut self, stream: usize, sync: bool) -> Result<(), TestCaseError> {
        let Some((name, id)) = self.pick_stream(stream) else {
            return Ok(());
        };
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        self.log().delete_stream(id, durability).map_err(fail)?;
        self.model.stream_deleted(&name, sync);
        prop_assert_eq!(self.log().stream_id(&name), None);
        let read = self.log().read(id, Seq(0));
        prop_assert!(matches!(read, Err(Error::UnknownStream(_))), "{read:?}");
        let commit = self
            .log()
            .commit(&[Append::new(id, 1, b"late")], durability);
        prop_assert!(matches!(commit, Err(Error::UnknownStream(_))), "{commit:?}");
        Ok(())
    }

    fn commit(
        &mut self,
        records: Vec<(usize, u8, u8, Vec<u8>)>,
        sync: bool,
        state_expected_seqs: bool,
    ) -> Result<(), TestCaseError> {
        if self.model.streams().is_empty() {
            return self.create_stream();
        }
        let mut appends = Vec::new();
        let mut ids = Vec::new();
        for (stream, kind, flags, payload) in records {
            let (name, id) = self.pick_stream(stream).expect("a stream exists");
            ids.push(id);
            appends.push(ModelAppend {
                stream: name,
                record: ModelRecord {
                    kind,
                    flags,
                    payload: Bytes::from(payload),
                },
            });
        }
        let seqs = self.model.seqs_for(&appends);
        let batch: Vec<Append<'_>> = appends
            .iter()
            .zip(&ids)
            .zip(&seqs)
            .map(|((a, id), seq)| Append {
                stream: *id,
                kind: a.record.kind,
                flags: a.record.flags,
                payload: &a.record.payload,
                expected_seq: state_expected_seqs.then_some(Seq(*seq)),
            })
            .collect();
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        let receipt = self.log().commit(&batch, durability).map_err(fail)?;
        let got: Vec<u64> = receipt.seqs.iter().map(|s| s.0).collect();
        self.model
            .committed(&appends, sync, receipt.lsn.0, &got)
            .map_err(fail)?;
        if sync {
            prop_assert!(self.log().durable_lsn() > receipt.lsn);
        }
        Ok(())
    }

    fn read(&mut self, stream: usize, seq: u64) -> Result<(), TestCaseError> {
        let Some((name, id)) = self.pick_stream(stream) else {
            let unknown = self.log().read(StreamId(u64::MAX), Seq(0));
            prop_assert!(
                matches!(unknown, Err(Error::UnknownStream(_))),
                "{unknown:?}"
            );
            return Ok(());
        };
        let expected = self.model.records(&name);
        match (self.log().read(id, Seq(seq)), expected.get(seq as usize)) {
            (Ok(record), Some(want)) => {
                prop_assert_eq!(record.stream, id);
                prop_assert_eq!(record.seq, Seq(seq));
                prop_assert_eq!(record.kind, want.kind);
                prop_assert_eq!(record.flags, want.flags);
                prop_assert_eq!(&record.payload, &want.payload);
            }
            (Err(Error::NoSuchRecord { .. }), None) => {}
            (got, want) => prop_assert!(false, "read {name} seq {seq}: {got:?}, expected {want:?}"),
        }
        Ok(())
    }

    fn iter(&mut self, stream: usize, from: u64, len: u64) -> Result<(), TestCaseError> {
        let Some((name, id)) = self.pick_stream(stream) else {
            return Ok(());
        };
        let expected = self.model.records(&name);
        let to = from + len;
        let got: Vec<_> = self
            .log()
            .iter(id, Seq(from), Seq(to))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let want_range = (from as usize).min(expected.len())..(to as usize).min(expected.len());
        prop_assert_eq!(
            got.len(),
            want_range.len(),
            "iter {} {}..{}",
            name,
            from,
            to
        );
        for (record, (seq, want)) in got
            .iter()
            .zip(want_range.clone().zip(&expected[want_range]))
        {
            prop_assert_eq!(record.seq, Seq(seq as u64));
            prop_assert_eq!(record.kind, want.kind);
            prop_assert_eq!(record.flags, want.flags);
            prop_assert_eq!(&record.payload, &want.payload);
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), TestCaseError> {
        self.log.take().expect("open").close().map_err(fail)?;
        self.model.flushed();
        let log = Log::open_with(self.storage.clone(), &self.dir, options()).map_err(fail)?;
        let snap = snapshot(&log).map_err(fail)?;
        self.log = Some(log);
        self.model
            .check_recovered(&snap, Restart::Process)
            .map_err(fail)?;
        Ok(())
    }

    fn check_everything(&self) -> Result<(), TestCaseError> {
        let snap = snapshot(self.log()).map_err(fail)?;
        self.model.check_live(&snap).map_err(fail)
    }
}

fn fail(error: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}

fn run(storage: Arc<dyn Storage>, dir: &Path, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut harness = Harness::new(storage, dir);
    for op in ops {
        harness.apply(op)?;
    }
    harness.check_everything()?;
    harness.reopen()?;
    harness.check_everything()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn log_on_simulated_storage_matches_the_model(seed in any::<u64>(), ops in vec(op(), 1..80)) {
        let storage = SimStorage::new(seed).as_storage();
        run(storage, Path::new("/store"), ops)?;
    }

    #[test]
    fn log_on_the_real_file_system_matches_the_model(ops in vec(op(), 1..60)) {
        let dir = tempfile::tempdir().expect("temp dir");
        run(Arc::new(RealStorage), dir.path(), ops)?;
    }
}
