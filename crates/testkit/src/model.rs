//! [`ReferenceModel`]: what a log must contain, given what it acknowledged.
//!
//! The model records every stream creation and every commit in the order the log wrote them,
//! with what the caller was told: durable (a `Sync` commit, or anything before a successful
//! flush or clean close), acknowledged but not durable (a `Buffered` commit), or failed (the
//! log returned an I/O error or was poisoned, so the operation may or may not have reached the
//! disk). After a crash and reopen, [`ReferenceModel::check_recovered`] compares a
//! [`LogSnapshot`] of the recovered log against these facts:
//!
//! - every operation acknowledged as durable, and everything before it, is present;
//! - what is present is a prefix of the operations in log order (no hole, nothing reordered);
//! - every batch is present whole or absent whole;
//! - each stream is the gap-free sequence 0..n with exactly the acknowledged bytes, kind and
//!   flags, and no stream or record the model does not know appears.
//!
//! Streams are named by their (unique) names, so a stream whose creation failed still has an
//! identity. The model only needs a thin adapter: build a [`LogSnapshot`] by reading the log.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

/// One record's content, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRecord {
    /// Kind tag.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Payload bytes.
    pub payload: Bytes,
}

/// One record of a commit: which stream it goes to and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAppend {
    /// The stream's name.
    pub stream: String,
    /// The record.
    pub record: ModelRecord,
}

/// Everything a log holds, read back through its public API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSnapshot {
    /// Each stream by name: its id and its records with the seqs the log reported, in the
    /// order the log returned them.
    pub streams: BTreeMap<String, SnapshotStream>,
}

/// One stream in a [`LogSnapshot`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotStream {
    /// The log's id for the stream.
    pub id: u64,
    /// `(seq, record)` in the order read.
    pub records: Vec<(u64, ModelRecord)>,
}

/// What the caller was told about an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Acknowledged as durable: must survive any crash.
    Durable,
    /// Acknowledged, but a crash may lose it (whole).
    Acknowledged,
    /// Failed: it may be present (whole) or absent.
    Uncertain,
}

/// What a snapshot shows of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    Present,
    Absent,
    /// Hidden by a stream deletion: could be either.
    Unknown,
}

impl From<bool> for Presence {
    fn from(present: bool) -> Presence {
        if present {
            Presence::Present
        } else {
            Presence::Absent
        }
    }
}

/// How the log was restarted before a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// After a power loss: what survived is now durable.
    PowerLoss,
    /// The process restarted without a power loss (after an error, or a clean close): the
    /// files are as written, nothing more became durable.
    Process,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    CreateStream {
        name: String,
        id: Option<u64>,
    },
    DeleteStream {
        name: String,
    },
    Commit {
        lsn: Option<u64>,
        records: Vec<(String, u64, ModelRecord)>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Op {
    change: Change,
    status: Status,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.change {
            Change::CreateStream { name, id } => {
                write!(f, "create stream {name:?} (id {id:?})")?;
            }
            Change::DeleteStream { name } => write!(f, "delete stream {name:?}")?,
            Change::Commit { lsn, records } => {
                match lsn {
                    Some(lsn) => write!(f, "commit at lsn {lsn:#x} of")?,
                    None => write!(f, "failed commit of")?,
                }
                for (stream, seq, record) in records {
                    write!(f, " {stream}#{seq}({}B)", record.payload.len())?;
                }
            }
        }
        write!(f, " [{:?}]", self.status)
    }
}

/// A way the recovered log contradicts what was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// An operation acknowledged as durable (or one before it) is missing.
    LostDurable { op: usize, description: String },
    /// Some records of one batch are present and others are not.
    TornBatch { op: usize, description: String },
    /// An operation is present although an earlier one is absent.
    NotAPrefix {
        absent: usize,
        present: usize,
        description: String,
    },
    /// A stream the model never created, or whose creation is not in the surviving prefix.
    ForeignStream { name: String },
    /// A stream's records are not exactly the expected ones.
    WrongRecords { stream: String, detail: String },
    /// The log reported a seq or lsn other than the one the model derives.
    WrongReceipt { detail: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::LostDurable { op, description } => {
                write!(f, "durable operation #{op} is missing: {description}")
            }
            Violation::TornBatch { op, description } => {
                write!(f, "batch #{op} survived in part: {description}")
            }
            Violation::NotAPrefix {
                absent,
                present,
                description,
            } => write!(
                f,
                "operation #{present} survived but earlier #{absent} did not: {description}"
            ),
            Violation::ForeignStream { name } => {
                write!(f, "stream {name:?} should not exist")
            }
            Violation::WrongRecords { stream, detail } => {
                write!(f, "stream {stream:?}: {detail}")
            }
            Violation::WrongReceipt { detail } => write!(f, "receipt: {detail}"),
        }
    }
}

impl std::error::Error for Violation {}

/// What a successful check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckSummary {
    /// Operations present after recovery.
    pub kept: usize,
    /// Operations (not durable) lost in the crash.
    pub lost: usize,
    /// Of the kept, how many had failed or were only buffered.
    pub kept_beyond_durable: usize,
}

/// The expected contents of a log. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ReferenceModel {
    ops: Vec<Op>,
    /// Records per stream over all operations (certain or not), to derive the next seq.
    next_seq: BTreeMap<String, u64>,
    last_lsn: Option<u64>,
}

impl ReferenceModel {
    /// An empty log.
    pub fn new() -> ReferenceModel {
        ReferenceModel::default()
    }

    /// Operations recorded (present ones only, after a check).
    pub fn op_count(&self) -> usize {
        self.ops.len()
    }

    /// Whether any operation is uncertain (the log failed since the last check).
    pub fn has_uncertain(&self) -> bool {
        self.ops.iter().any(|op| op.status == Status::Uncertain)
    }

    /// Names of the streams whose creation was acknowledged and that were not deleted (nor
    /// had a deletion attempted), in creation order.
    pub fn streams(&self) -> Vec<String> {
        self.ops
            .iter()
            .filter(|op| op.status != Status::Uncertain)
            .filter_map(|op| match &op.change {
                Change::CreateStream { name, .. } if !self.deletion_recorded(name) => {
                    Some(name.clone())
                }
                _ => None,
            })
            .collect()
    }

    fn deletion_recorded(&self, name: &str) -> bool {
        self.ops
            .iter()
            .any(|op| matches!(&op.change, Change::DeleteStream { name: n } if n == name))
    }

    /// Whether a creation of `name` was recorded (acknowledged or not).
    pub fn knows_stream(&self, name: &str) -> bool {
        self.next_seq.contains_key(name)
    }

    /// The seq the next record of `name` gets if everything recorded so far is present.
    pub fn next_seq(&self, name: &str) -> u64 {
        self.next_seq.get(name).copied().unwrap_or(0)
    }

    /// The acknowledged records of `name`, in seq order.
    pub fn records(&self, name: &str) -> Vec<ModelRecord> {
        let mut out = Vec::new();
        for op in self.ops.iter().filter(|op| op.status != Status::Uncertain) {
            if let Change::Commit { records, .. } = &op.change {
                out.extend(
                    records
                        .iter()
                        .filter(|(s, _, _)| s == name)
                        .map(|(_, _, r)| r.clone()),
                );
            }
        }
        out
    }

    /// The log created stream `name` as `id`; `durable` when it was a `Sync` creation.
    pub fn stream_created(&mut self, name: &str, id: u64, durable: bool) {
        self.push_creation(name, Some(id), acknowledged(durable));
    }

    /// Creating stream `name` failed with an I/O error or a poisoned log.
    pub fn stream_creation_failed(&mut self, name: &str) {
        self.push_creation(name, None, Status::Uncertain);
    }

    fn push_creation(&mut self, name: &str, id: Option<u64>, status: Status) {
        assert!(
            !self.knows_stream(name),
            "the model expects unique stream names; {name:?} was used twice"
        );
        self.next_seq.insert(name.to_owned(), 0);
        self.mark_durable_before(status);
        self.ops.push(Op {
            change: Change::CreateStream {
                name: name.to_owned(),
                id,
            },
            status,
        });
    }

    /// The log deleted stream `name`; `durable` when the tombstone was written with `Sync`.
    pub fn stream_deleted(&mut self, name: &str, durable: bool) {
        self.push_deletion(name, acknowledged(durable));
    }

    /// Deleting stream `name` failed with an I/O error or a poisoned log.
    pub fn stream_deletion_failed(&mut self, name: &str) {
        self.push_deletion(name, Status::Uncertain);
    }

    fn push_deletion(&mut self, name: &str, status: Status) {
        assert!(
            self.knows_stream(name) && !self.deletion_recorded(name),
            "deletion of {name:?}, which is not a live stream of the model"
        );
        self.mark_durable_before(status);
        self.ops.push(Op {
            change: Change::DeleteStream {
                name: name.to_owned(),
            },
            status,
        });
    }

    /// The seqs the records of `appends` get if the commit succeeds.
    pub fn seqs_for(&self, appends: &[ModelAppend]) -> Vec<u64> {
        let mut next = self.next_seq.clone();
        appends
            .iter()
            .map(|a| {
                let n = next.entry(a.stream.clone()).or_insert(0);
                *n += 1;
                *n - 1
            })
            .collect()
    }

    /// The log acknowledged a commit with receipt `lsn` and `seqs`; `durable` for `Sync`.
    /// Fails when the receipt disagrees with the model (seqs, or lsn not increasing).
    pub fn committed(
        &mut self,
        appends: &[ModelAppend],
        durable: bool,
        lsn: u64,
        seqs: &[u64],
    ) -> Result<(), Violation> {
        let expected = self.seqs_for(appends);
        if seqs != expected {
            return Err(Violation::WrongReceipt {
                detail: format!("seqs {seqs:?}, expected {expected:?}"),
            });
        }
        if let Some(last) = self.last_lsn.filter(|last| lsn <= *last) {
            return Err(Violation::WrongReceipt {
                detail: format!("lsn {lsn} does not follow the previous commit's lsn {last}"),
            });
        }
        self.last_lsn = Some(lsn);
        self.push_commit(appends, Some(lsn), acknowledged(durable));
        Ok(())
    }

    /// A commit failed with an I/O error or a poisoned log.
    pub fn commit_failed(&mut self, appends: &[ModelAppend]) {
        self.push_commit(appends, None, Status::Uncertain);
    }

    fn push_commit(&mut self, appends: &[ModelAppend], lsn: Option<u64>, status: Status) {
        let seqs = self.seqs_for(appends);
        for append in appends {
            assert!(
                self.knows_stream(&append.stream),
                "commit to stream {:?} that the model never saw created",
                append.stream
            );
            *self.next_seq.get_mut(&append.stream).expect("known") += 1;
        }
        let records = appends
            .iter()
            .zip(seqs)
            .map(|(a, seq)| (a.stream.clone(), seq, a.record.clone()))
            .collect();
        self.mark_durable_before(status);
        self.ops.push(Op {
            change: Change::Commit { lsn, records },
            status,
        });
    }

    /// A durable operation makes everything before it durable.
    fn mark_durable_before(&mut self, status: Status) {
        if status == Status::Durable {
            self.flushed();
        }
    }

    /// A flush (or a clean close) succeeded: every acknowledged operation is durable.
    pub fn flushed(&mut self) {
        for op in &mut self.ops {
            if op.status == Status::Acknowledged {
                op.status = Status::Durable;
            }
        }
    }

    /// Checks a log that ran without a restart: it must hold exactly the acknowledged
    /// operations (nothing has failed since the last check).
    pub fn check_live(&self, snapshot: &LogSnapshot) -> Result<(), Violation> {
        assert!(
            !self.has_uncertain(),
            "a live check after a failure; restart and use check_recovered"
        );
        let mut all_required = self.clone();
        all_required.flushed();
        all_required.check_recovered(snapshot, Restart::Process)?;
        Ok(())
    }

    /// Checks a reopened log against the model, then forgets the operations that did not
    /// survive, so the model describes the recovered log and checking can go on.
    pub fn check_recovered(
        &mut self,
        snapshot: &LogSnapshot,
        restart: Restart,
    ) -> Result<CheckSummary, Violation> {
        let presence = self.presence(snapshot)?;
        // The surviving prefix ends somewhere between the last op seen present and the first
        // op seen absent; ops in between (deleted streams hide theirs) could go either way.
        let first_absent = presence
            .iter()
            .position(|p| *p == Presence::Absent)
            .unwrap_or(presence.len());
        if let Some(later) = presence[first_absent..]
            .iter()
            .position(|p| *p == Presence::Present)
        {
            let present_at = first_absent + later;
            return Err(Violation::NotAPrefix {
                absent: first_absent,
                present: present_at,
                description: format!(
                    "absent: {}; present: {}",
                    self.ops[first_absent], self.ops[present_at]
                ),
            });
        }
        let mut shortest = presence[..first_absent]
            .iter()
            .rposition(|p| *p == Presence::Present)
            .map_or(0, |i| i + 1);
        if let Some(required) = self.ops.iter().rposition(|op| op.status == Status::Durable) {
            if required >= first_absent {
                return Err(Violation::LostDurable {
                    op: first_absent,
                    description: format!(
                        "{} (durable up to #{required}: {})",
                        self.ops[first_absent], self.ops[required]
                    ),
                });
            }
            shortest = shortest.max(required + 1);
        }
        let mut kept = first_absent;
        let mut mismatch = None;
        for candidate in shortest..=first_absent {
            match self.check_contents(snapshot, candidate) {
                Ok(()) => {
                    kept = candidate;
                    mismatch = None;
                    break;
                }
                // Report the mismatch against the longest possible prefix.
                Err(v) => mismatch = Some(v),
            }
        }
        if let Some(violation) = mismatch {
            return Err(violation);
        }

        let summary = CheckSummary {
            kept,
            lost: self.ops.len() - kept,
            kept_beyond_durable: self.ops[..kept]
                .iter()
                .filter(|op| op.status != Status::Durable)
                .count(),
        };
        self.ops.truncate(kept);
        // A reopened log continues after what it recovered; lost positions may be reused.
        self.last_lsn = self
            .ops
            .iter()
            .filter_map(|op| match op.change {
                Change::Commit { lsn, .. } => lsn,
                Change::CreateStream { .. } | Change::DeleteStream { .. } => None,
            })
            .max();
        for op in &mut self.ops {
            op.status = match (restart, op.status) {
                (Restart::PowerLoss, _) => Status::Durable,
                (Restart::Process, Status::Uncertain) => Status::Acknowledged,
                (Restart::Process, status) => status,
            };
        }
        self.recount();
        Ok(summary)
    }

    /// Whether each operation is visibly present in the snapshot. A deleted stream is absent
    /// from a healthy log, so its creation, its records and its deletion cannot be seen.
    fn presence(&self, snapshot: &LogSnapshot) -> Result<Vec<Presence>, Violation> {
        let stream_len = |name: &str| snapshot.streams.get(name).map(|s| s.records.len() as u64);
        let hidden = |name: &str| stream_len(name).is_none() && self.deletion_recorded(name);
        let mut presence = Vec::with_capacity(self.ops.len());
        for (i, op) in self.ops.iter().enumerate() {
            let p = match &op.change {
                Change::CreateStream { name, .. } if hidden(name) => Presence::Unknown,
                Change::CreateStream { name, .. } => Presence::from(stream_len(name).is_some()),
                Change::DeleteStream { name } if hidden(name) => Presence::Unknown,
                Change::DeleteStream { .. } => Presence::Absent,
                Change::Commit { records, .. } => {
                    let parts: Vec<Presence> = records
                        .iter()
                        .map(|(stream, seq, _)| match stream_len(stream) {
                            _ if hidden(stream) => Presence::Unknown,
                            Some(n) => Presence::from(n > *seq),
                            None => Presence::Absent,
                        })
                        .collect();
                    let any = |want| parts.contains(&want);
                    match (any(Presence::Present), any(Presence::Absent)) {
                        (true, true) => {
                            return Err(Violation::TornBatch {
                                op: i,
                                description: format!("{op}; record presence {parts:?}"),
                            })
                        }
                        (true, false) => Presence::Present,
                        (false, true) => Presence::Absent,
                        (false, false) => Presence::Unknown,
                    }
                }
            };
            presence.push(p);
        }
        Ok(presence)
    }

    /// Compares every stream of the snapshot with the first `kept` operations.
    fn check_contents(&self, snapshot: &LogSnapshot, kept: usize) -> Result<(), Violation> {
        let mut expected: BTreeMap<&str, (Option<u64>, Vec<&ModelRecord>)> = BTreeMap::new();
        for op in &self.ops[..kept] {
            match &op.change {
                Change::CreateStream { name, id } => {
                    expected.insert(name, (*id, Vec::new()));
                }
                Change::DeleteStream { name } => {
                    expected.remove(name.as_str());
                }
                Change::Commit { records, .. } => {
                    for (stream, _, record) in records {
                        expected
                            .get_mut(stream.as_str())
                            .expect("a commit follows its stream's creation")
                            .1
                            .push(record);
                    }
                }
            }
        }
        if let Some(missing) = expected
            .keys()
            .find(|name| !snapshot.streams.contains_key(**name))
        {
            return Err(Violation::WrongRecords {
                stream: (*missing).to_owned(),
                detail: "the stream is missing".into(),
            });
        }
        for (name, stream) in &snapshot.streams {
            let Some((id, records)) = expected.get(name.as_str()) else {
                return Err(Violation::ForeignStream { name: name.clone() });
            };
            let wrong = |detail: String| Violation::WrongRecords {
                stream: name.clone(),
                detail,
            };
            if let Some(id) = id.filter(|id| *id != stream.id) {
                return Err(wrong(format!(
                    "id {} where {id} was acknowledged",
                    stream.id
                )));
            }
            if stream.records.len() != records.len() {
                return Err(wrong(format!(
                    "{} records where {} are expected",
                    stream.records.len(),
                    records.len()
                )));
            }
            for (i, ((seq, got), want)) in stream.records.iter().zip(records).enumerate() {
                if *seq != i as u64 {
                    return Err(wrong(format!("position {i} holds seq {seq}: not gap-free")));
                }
                if got != *want {
                    return Err(wrong(format!(
                        "seq {seq} is {} where {} was committed",
                        describe(got),
                        describe(want)
                    )));
                }
            }
        }
        Ok(())
    }

    fn recount(&mut self) {
        self.next_seq.clear();
        for op in &self.ops {
            match &op.change {
                Change::CreateStream { name, .. } => {
                    self.next_seq.insert(name.clone(), 0);
                }
                Change::DeleteStream { .. } => {}
                Change::Commit { records, .. } => {
                    for (stream, _, _) in records {
                        *self.next_seq.entry(stream.clone()).or_insert(0) += 1;
                    }
                }
            }
        }
    }
}

fn acknowledged(durable: bool) -> Status {
    if durable {
        Status::Durable
    } else {
        Status::Acknowledged
    }
}

fn describe(record: &ModelRecord) -> String {
    let head: Vec<u8> = record.payload.iter().take(16).copied().collect();
    format!(
        "kind {:#x} flags {:#x} {} bytes starting {head:02x?}",
        record.kind,
        record.flags,
        record.payload.len()
    )
}
