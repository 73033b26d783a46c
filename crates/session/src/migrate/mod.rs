//! DSH's session-format migration V0 -> V1 -> V2 -> V3 -> V4, as DeepSeek Harness 0.2.1
//! runs it when it resumes an older file: the same output events, byte for byte, and the
//! same refusals with DSH's reasons.
//!
//! Each stage is a pure function from one format's events to the next one's
//! ([`v0_v1`], [`v1_v2`], [`v2_v3`], [`v3_v4`]); [`to_latest`] chains them from the
//! format a session declares. Values stay the stored text until a stage reshapes them
//! ([`value`]), so what no stage touches is copied as it was. A stage refuses with DSH's
//! message: its `SessionFormatUnsupportedMigrationError`s read as they are, its other
//! errors are prefixed with the stage's package name, as DSH's chain does.

mod sha256;
mod v0_v1;
mod v1_v2;
mod v2_v3;
mod v3_v4;
mod value;

use std::borrow::Cow;

use crate::dsh::source_list_text;
use crate::error::Error;
use crate::event::Event;
use crate::header::SessionHeader;
use crate::version::DshFormat;
use value::{get, remove, set, Obj, Val};

/// Why DSH's chain refuses a session, in DSH's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal(pub(crate) String);

/// A refusal DSH raises as an unsupported migration: its message stands alone.
pub(crate) fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal(message.into())
}

/// A malformed-source error inside stage `from` -> `from + 1`, which DSH's chain reports
/// with the stage's name.
pub(crate) fn malformed_in(from: u8, message: impl AsRef<str>) -> Refusal {
    Refusal(format!(
        "@deepseek-ai/dsh-session-format-v{from}-to-v{} refuses this format v{from} Session: {}",
        from + 1,
        message.as_ref()
    ))
}

/// Where each earlier source event landed in a stage's output, for renumbering references
/// (V2 -> V3 and V3 -> V4 share DSH's rule: a reference names an earlier event).
#[derive(Debug)]
pub(crate) struct SeqMap {
    targets: Vec<u64>,
    from: u8,
    not_earlier: &'static str,
    not_array: &'static str,
}

impl SeqMap {
    pub(crate) fn new(
        capacity: usize,
        from: u8,
        not_earlier: &'static str,
        not_array: &'static str,
    ) -> SeqMap {
        SeqMap {
            targets: Vec::with_capacity(capacity),
            from,
            not_earlier,
            not_array,
        }
    }

    /// The next source event landed at `target`.
    pub(crate) fn push(&mut self, target: u64) {
        self.targets.push(target);
    }

    /// Where source seq `value`, cited by the event at source seq `seq`, landed.
    pub(crate) fn one(&self, value: Option<u64>, seq: u64) -> Result<u64, Refusal> {
        value
            .filter(|v| *v < seq)
            .and_then(|v| usize::try_from(v).ok())
            .and_then(|i| self.targets.get(i).copied())
            .ok_or_else(|| malformed_in(self.from, self.not_earlier))
    }

    /// `{...range, [start_key]: start, [end_key]: end}` with both ends renumbered.
    pub(crate) fn range(
        &self,
        range: &mut Val<'_>,
        seq: u64,
        (start_key, end_key): (&'static str, &'static str),
    ) -> Result<(), Refusal> {
        let start = self.one(range.get(start_key).and_then(|v| v.as_u64()), seq)?;
        let end = self.one(range.get(end_key).and_then(|v| v.as_u64()), seq)?;
        if let Some(members) = range.obj() {
            set(members, start_key, Val::int(start));
            set(members, end_key, Val::int(end));
        }
        Ok(())
    }

    /// The references a payload makes to earlier events, renumbered in place: a command's
    /// `sourceEventSeq`, a compaction's `shadowedRange` and `shadowedSeqs`, a title's
    /// `messageSeqs` (the references V2 -> V3 and V3 -> V4 both renumber).
    pub(crate) fn payload(&self, ev: &mut Ev<'_>, seq: u64) -> Result<(), Refusal> {
        let ty = ev.ty.clone();
        match ty.as_ref() {
            "command/done" => {
                if let Some(source) = ev.field("sourceEventSeq").map(|v| v.as_u64()) {
                    let mapped = self.one(source, seq)?;
                    ev.set_field("sourceEventSeq", Val::int(mapped));
                }
            }
            "compaction/summary" | "compaction/prune" => {
                if let Some(range) = ev.field("shadowedRange") {
                    self.range(range, seq, ("start", "end"))?;
                }
                let list = self.list(ev.field("shadowedSeqs"), seq)?;
                ev.set_field("shadowedSeqs", list);
            }
            "session/title" | "session/title-llm-request" => {
                let list = self.list(ev.field("messageSeqs"), seq)?;
                ev.set_field("messageSeqs", list);
            }
            _ => {}
        }
        Ok(())
    }

    /// The references an event's envelope makes to earlier events, renumbered in place:
    /// its `sourceEventSeqs`, and a `surfaceOp` other than `append` as a range with ends
    /// `op_keys` (V2 -> V3 and V3 -> V4 both renumber them after the payload's).
    pub(crate) fn envelope(
        &self,
        ev: &mut Ev<'_>,
        seq: u64,
        op_keys: (&'static str, &'static str),
    ) -> Result<(), Refusal> {
        if ev.has("sourceEventSeqs") {
            let list = self.list(ev.get("sourceEventSeqs"), seq)?;
            set(&mut ev.env, "sourceEventSeqs", list);
        }
        if let Some(op) = ev.get("surfaceOp") {
            if op.as_str().as_deref() != Some("append") {
                self.range(op, seq, op_keys)?;
            }
        }
        Ok(())
    }

    /// A list of cited seqs renumbered.
    pub(crate) fn list<'a>(
        &self,
        value: Option<&mut Val<'a>>,
        seq: u64,
    ) -> Result<Val<'a>, Refusal> {
        let seqs = value
            .and_then(Val::seq_list)
            .ok_or_else(|| malformed_in(self.from, self.not_array))?;
        let mapped = seqs
            .into_iter()
            .map(|s| self.one(Some(s), seq))
            .collect::<Result<Vec<u64>, Refusal>>()?;
        Ok(value::seq_array(&mapped))
    }
}

/// Whether `ev` queues messages for the next turn (a non-empty `agent/inbox/spliced` with
/// target `next-turn`): a `turn/start` right after it, with the previous turn still open
/// and no step open, means that turn was interrupted.
pub(crate) fn queues_next_turn(ev: &mut Ev<'_>) -> bool {
    if ev.ty != "agent/inbox/spliced" {
        return false;
    }
    let target = ev
        .field("target")
        .and_then(|t| t.as_str())
        .map(|t| t.into_owned());
    let inserted = ev
        .field("inserted")
        .and_then(Val::arr)
        .map_or(0, |a| a.len());
    target.as_deref() == Some("next-turn") && inserted > 0
}

/// The `turn/end` DSH adds for turn `turn` when it was interrupted (see
/// [`queues_next_turn`]): `{turn, reason: {kind: "interrupted"}}` at `seq` and `time`.
pub(crate) fn interrupted_turn_end<'a>(seq: u64, time: Val<'a>, turn: Val<'a>) -> Ev<'a> {
    let data = Val::Obj(vec![
        ("turn".into(), turn),
        (
            "reason".into(),
            Val::Obj(vec![("kind".into(), Val::literal("\"interrupted\""))]),
        ),
    ]);
    Ev::new("turn/end", seq, time, data)
}

/// The facts of the header the stages read.
#[derive(Debug, Clone)]
pub(crate) struct HeaderFacts {
    pub(crate) id: String,
    pub(crate) is_seeded: bool,
    /// Events inherited from the parent (V0/V1 `seedLength`).
    pub(crate) seed_length: u64,
    pub(crate) created_at: u64,
}

/// One event on its way through the stages: its envelope members in order, its type and
/// seq read out.
#[derive(Debug, Clone)]
pub(crate) struct Ev<'a> {
    pub(crate) ty: Cow<'a, str>,
    pub(crate) seq: u64,
    pub(crate) env: Obj<'a>,
}

impl<'a> Ev<'a> {
    fn from_event(event: &'a Event) -> Ev<'a> {
        let mut whole = Val::Raw(event.raw());
        let env = whole.obj().map(std::mem::take).unwrap_or_default();
        let mut ev = Ev {
            ty: Cow::Borrowed(event.stored_type()),
            seq: event.seq().get(),
            env,
        };
        // Readers of every format take `[start, end]` pairs; the stages work on plain lists.
        if let Some(seqs) = event.source_event_seqs() {
            set(&mut ev.env, "sourceEventSeqs", value::seq_array(seqs));
        }
        ev
    }

    /// A new event `{type, seq, time, data}`.
    pub(crate) fn new(ty: &'static str, seq: u64, time: Val<'a>, data: Val<'a>) -> Ev<'a> {
        Ev {
            ty: Cow::Borrowed(ty),
            seq,
            env: vec![
                (Cow::Borrowed("type"), Val::string(ty)),
                (Cow::Borrowed("seq"), Val::int(seq)),
                (Cow::Borrowed("time"), time),
                (Cow::Borrowed("data"), data),
            ],
        }
    }

    pub(crate) fn get(&mut self, key: &str) -> Option<&mut Val<'a>> {
        get(&mut self.env, key)
    }

    /// An envelope member, read only.
    pub(crate) fn val(&self, key: &str) -> Option<&Val<'a>> {
        self.env.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        value::has(&self.env, key)
    }

    /// The payload's members, when the payload is an object.
    pub(crate) fn data(&mut self) -> Option<&mut Obj<'a>> {
        self.get("data").and_then(Val::obj)
    }

    /// `data = {...data, key: value}` (nothing for a payload that is not an object).
    pub(crate) fn set_field(&mut self, key: &'static str, value: Val<'a>) {
        if let Some(data) = self.data() {
            set(data, key, value);
        }
    }

    /// A payload member.
    pub(crate) fn field(&mut self, key: &str) -> Option<&mut Val<'a>> {
        get(self.data()?, key)
    }

    pub(crate) fn time(&mut self) -> Val<'a> {
        self.get("time").cloned().unwrap_or(Val::literal("0"))
    }

    pub(crate) fn set_type(&mut self, ty: &'static str) {
        self.ty = Cow::Borrowed(ty);
        set(&mut self.env, "type", Val::string(ty));
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
        set(&mut self.env, "seq", Val::int(seq));
    }

    pub(crate) fn sources(&mut self) -> Option<Vec<u64>> {
        self.get("sourceEventSeqs").and_then(Val::seq_list)
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<Val<'a>> {
        remove(&mut self.env, key)
    }

    /// The event as the V4 writer writes it: sourceEventSeqs as V2's ranges.
    fn write_latest(&mut self) -> String {
        if let Some(seqs) = self.sources() {
            set(
                &mut self.env,
                "sourceEventSeqs",
                Val::Text(source_list_text(&seqs, true)),
            );
        }
        let mut out = String::new();
        value::write_obj(&self.env, &mut out);
        out
    }
}

/// One stage: a format's events to the next format's.
type Stage = for<'a> fn(&HeaderFacts, Vec<Ev<'a>>) -> Result<Vec<Ev<'a>>, Refusal>;

/// DSH's migration of a session declaring an older format to the latest: the header and
/// the events DSH writes into `session.v4.jsonl` (before the `session/end-seed` a resume
/// appends), or DSH's reason for refusing it.
pub fn to_latest(
    header: &SessionHeader,
    events: &[Event],
) -> Result<(SessionHeader, Vec<String>), Error> {
    let from = header.format();
    let refused = |reason: String| Error::Export {
        format: DshFormat::LATEST,
        reason: format!(
            "DSH's own migration from format {from} refuses this session: {reason} (DSH refuses \
             the format {from} file too; export it at format {from})"
        ),
    };
    let facts = HeaderFacts {
        id: header.id().to_owned(),
        is_seeded: header.is_seeded(),
        seed_length: header.seed_length().unwrap_or(0),
        created_at: header.created_at().unwrap_or(0),
    };
    let latest = header.as_written_by_latest()?;
    let mut stream: Vec<Ev<'_>> = events.iter().map(Ev::from_event).collect();
    let stages: [Stage; 4] = [
        v0_v1::migrate,
        v1_v2::migrate,
        v2_v3::migrate,
        v3_v4::migrate,
    ];
    for stage in stages.iter().skip(usize::from(from.number())) {
        stream = stage(&facts, stream).map_err(|r| refused(r.0))?;
    }
    v3_v4::check_lifecycle(from, &mut stream).map_err(|r| refused(r.0))?;
    let out: Vec<String> = stream.iter_mut().map(Ev::write_latest).collect();
    Ok((latest, out))
}

/// The file DSH's migration writes for a session declaring an older format: the latest
/// format's header and events, plain or in DSH's zstd layout (header frame, event frame).
pub fn export_latest(
    header: &SessionHeader,
    events: &[Event],
    zstd: bool,
) -> Result<Vec<u8>, Error> {
    let (latest, migrated) = to_latest(header, events)?;
    let mut out = String::with_capacity(
        latest.raw().len() + 1 + migrated.iter().map(|line| line.len() + 1).sum::<usize>(),
    );
    out.push_str(latest.raw());
    out.push('\n');
    for line in &migrated {
        out.push_str(line);
        out.push('\n');
    }
    if zstd {
        crate::zstd_file::encode(out.as_bytes())
    } else {
        Ok(out.into_bytes())
    }
}
