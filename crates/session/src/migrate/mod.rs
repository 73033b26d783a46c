//! DSH's session-format migration V0 -> V1 -> V2 -> V3 -> V4, as DeepSeek Harness 0.2.1
//! runs it when it resumes an older file: the same output events, byte for byte, and the
//! same refusals with DSH's reasons.
//!
//! Each stage is a pure function from one format's events to the next one's
//! (`v0_v1`, `v1_v2`, `v2_v3`, `v3_v4`); [`export_latest`] chains them from the
//! format a session declares. Values stay the stored text until a stage reshapes them
//! (`value`), so what no stage touches is copied as it was. A stage refuses with DSH's
//! message: its `SessionFormatUnsupportedMigrationError`s read as they are, its other
//! errors are prefixed with the stage's package name, as DSH's chain does.

mod children;
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
pub use children::ChildFact;
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
    /// The session's direct children, for the catalog the V3 -> V4 stage completes.
    pub(crate) children: Vec<ChildFact>,
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
            let seqs: Vec<u64> = seqs.iter().map(|s| s.get()).collect();
            set(&mut ev.env, "sourceEventSeqs", value::seq_array(&seqs));
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

    /// Appends the event as the V4 writer writes it (sourceEventSeqs as V2's ranges) and
    /// its line feed.
    fn write_latest(&mut self, out: &mut String) {
        if let Some(seqs) = self.sources() {
            set(
                &mut self.env,
                "sourceEventSeqs",
                Val::Text(source_list_text(&seqs, true)),
            );
        }
        value::write_obj(&self.env, out);
        out.push('\n');
    }
}

/// One stage as the chain drives it: the events in order, each handed to [`Step::push`],
/// which appends what the stage emits to `out`; then [`Step::finish`].
pub(crate) trait Step<'a> {
    fn push(&mut self, ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal>;

    /// After the last event: what the stage still holds or adds at the end.
    fn finish(&mut self, _out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        Ok(())
    }
}

type BoxedStep<'s, 'a> = Box<dyn Step<'a> + Send + 's>;

/// Stages run one after the other, one event at a time, so no stage's whole output is held.
/// DSH runs each stage over the whole session before the next one, so a session two stages
/// refuse is refused by the earlier stage: here a stage that refuses gets no more events,
/// nor does any stage after it, while the stages before it go on to the end, and the
/// refusal that counts is the earliest stage's (each stage sees the same events, in the same
/// order, up to its own first refusal, as it does in DSH's order).
struct Chain<'s, 'a> {
    /// The stages, each with its place in the whole migration (stages, then the checks).
    stages: Vec<(usize, BoxedStep<'s, 'a>)>,
    refused: Option<(usize, Refusal)>,
    batch: Vec<Ev<'a>>,
    next: Vec<Ev<'a>>,
}

impl<'s, 'a> Chain<'s, 'a> {
    fn new(stages: Vec<(usize, BoxedStep<'s, 'a>)>) -> Chain<'s, 'a> {
        Chain {
            stages,
            refused: None,
            batch: Vec::new(),
            next: Vec::new(),
        }
    }

    /// How many stages still take events: those before the one that refused.
    fn live(&self) -> usize {
        match &self.refused {
            None => self.stages.len(),
            Some((refusing, _)) => self
                .stages
                .iter()
                .take_while(|(place, _)| place < refusing)
                .count(),
        }
    }

    /// Whether no stage takes events any more: one refused, and none before it remains. A
    /// chain without stages (a session already at the format they lead to) hands every
    /// event on, so it never stops.
    fn stopped(&self) -> bool {
        self.refused.is_some() && self.live() == 0
    }

    /// Runs `self.batch` through the stages from `first` on and appends what the last one
    /// emits to `out`.
    fn run(&mut self, first: usize, out: &mut Vec<Ev<'a>>) {
        for local in first..self.stages.len() {
            if local >= self.live() {
                self.batch.clear();
                return;
            }
            let Some((place, stage)) = self.stages.get_mut(local) else {
                break;
            };
            for ev in self.batch.drain(..) {
                if let Err(refusal) = stage.push(ev, &mut self.next) {
                    // Every later stage is already starved, so this one is the earliest.
                    self.refused = Some((*place, refusal));
                    break;
                }
            }
            std::mem::swap(&mut self.batch, &mut self.next);
            self.next.clear();
        }
        out.append(&mut self.batch);
    }

    fn push(&mut self, ev: Ev<'a>, out: &mut Vec<Ev<'a>>) {
        self.batch.push(ev);
        self.run(0, out);
    }

    /// Ends each stage in order, what it emits at the end going through the stages after it.
    fn finish(&mut self, out: &mut Vec<Ev<'a>>) {
        for local in 0..self.stages.len() {
            if local >= self.live() {
                break;
            }
            let Some((place, stage)) = self.stages.get_mut(local) else {
                break;
            };
            if let Err(refusal) = stage.finish(&mut self.batch) {
                self.refused = Some((*place, refusal));
            }
            self.run(local + 1, out);
        }
    }
}

/// Events handed from the first stages to the last ones at a time.
const BATCH_EVENTS: usize = 1024;

/// The stages from format `from` on, with their places: V0 -> V1 is place 0, V3 -> V4 place
/// 3, and DSH's V4 reader checks ([`v3_v4::Lifecycle`]) place 4.
fn stages<'s, 'a: 's>(
    facts: &'s HeaderFacts,
    from: DshFormat,
    events: usize,
) -> Vec<(usize, BoxedStep<'s, 'a>)> {
    let mut stages: Vec<(usize, BoxedStep<'s, 'a>)> = vec![
        (0, Box::new(v0_v1::Stage::new(facts))),
        (1, Box::new(v1_v2::Stage::new(facts, events))),
        (2, Box::new(v2_v3::Stage::new(facts, events))),
        (3, Box::new(v3_v4::Stage::new(facts, events))),
    ];
    stages.drain(..usize::from(from.number()).min(stages.len()));
    stages.push((4, Box::new(v3_v4::Lifecycle::new(from))));
    stages
}

/// Runs the events of a session declaring format V0, V1 or V2 through the stages up to V3,
/// as DSH's historical reader restores a child session, handing each V3 event to `visit`;
/// DSH's refusal when a stage refuses. Events of a V3 or later session go to `visit` as
/// they are.
pub(crate) fn visit_as_v3(
    header: &SessionHeader,
    events: &[Event],
    visit: &mut dyn FnMut(&mut Ev<'_>),
) -> Result<(), Refusal> {
    let from = header.format();
    if from >= DshFormat::V3 {
        for event in events {
            visit(&mut Ev::from_event(event));
        }
        return Ok(());
    }
    let facts = HeaderFacts {
        id: header.id().to_owned(),
        is_seeded: header.is_seeded(),
        seed_length: header.seed_length().unwrap_or(0),
        created_at: header.created_at().unwrap_or(0),
        children: Vec::new(),
    };
    let mut to_v3 = stages(&facts, from, events.len());
    to_v3.retain(|(place, _)| *place < 3);
    let mut chain = Chain::new(to_v3);
    let mut out = Vec::new();
    for event in events {
        chain.push(Ev::from_event(event), &mut out);
        out.iter_mut().for_each(&mut *visit);
        out.clear();
        if chain.stopped() {
            break;
        }
    }
    chain.finish(&mut out);
    out.iter_mut().for_each(&mut *visit);
    match chain.refused {
        Some((_, refusal)) => Err(refusal),
        None => Ok(()),
    }
}

/// Why a migration stopped: DSH's chain refused the session, or its text could not be
/// handed on to the file it goes to.
enum Stop {
    Refused(Refusal),
    Output(std::io::Error),
}

/// Text gathered before it is handed to the file an export streams to.
const SPILL_BYTES: usize = 1 << 20;

/// Migrates `events` of a session declaring `from` and appends the latest format's lines to
/// `out`, or returns DSH's reason for refusing. Two threads share the work: one reads the
/// events and runs the stages up to V2, the other the later stages and the writing, a batch
/// of events at a time. With `spill`, the text is written to it whenever a megabyte has
/// gathered, so writing the file overlaps the migration; `out` then holds only the rest.
fn migrate_into(
    facts: &HeaderFacts,
    from: DshFormat,
    events: &[Event],
    out: &mut String,
    mut spill: Option<&mut (dyn std::io::Write + Send)>,
) -> Result<(), Stop> {
    let (front, back): (Vec<_>, Vec<_>) = stages(facts, from, events.len())
        .into_iter()
        .partition(|(place, _)| *place < 2);
    std::thread::scope(|scope| {
        let (hand, take) = std::sync::mpsc::sync_channel::<Vec<Ev<'_>>>(4);
        let front = scope.spawn(move || {
            let mut chain = Chain::new(front);
            let mut batch = Vec::with_capacity(BATCH_EVENTS);
            let mut handing = true;
            for event in events {
                chain.push(Ev::from_event(event), &mut batch);
                if chain.stopped() {
                    break;
                }
                if batch.len() >= BATCH_EVENTS {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_EVENTS));
                    // The back half stops taking once it refuses; the front goes on, since
                    // a refusal of its own would come first.
                    handing = handing && hand.send(full).is_ok();
                }
            }
            chain.finish(&mut batch);
            if handing {
                let _ = hand.send(batch);
            }
            chain.refused
        });
        let mut chain = Chain::new(back);
        let mut written = Vec::new();
        let mut failed = None;
        for batch in take.iter() {
            for ev in batch {
                chain.push(ev, &mut written);
            }
            if chain.stopped() {
                break;
            }
            for ev in written.iter_mut() {
                ev.write_latest(out);
            }
            written.clear();
            if let Some(file) = spill.as_mut().filter(|_| out.len() >= SPILL_BYTES) {
                if let Err(e) = file.write_all(out.as_bytes()) {
                    failed = Some(e);
                    break;
                }
                out.clear();
            }
        }
        drop(take);
        if !chain.stopped() && failed.is_none() {
            chain.finish(&mut written);
            for ev in written.iter_mut() {
                ev.write_latest(out);
            }
        }
        let front = front
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match (front.or(chain.refused), failed) {
            (Some((_, refusal)), _) => Err(Stop::Refused(refusal)),
            (None, Some(e)) => Err(Stop::Output(e)),
            (None, None) => Ok(()),
        }
    })
}

/// The refusal of DSH's migration from format `from`, as an export reports it.
fn refused(from: DshFormat, reason: String) -> Error {
    Error::Export {
        format: DshFormat::LATEST,
        reason: format!(
            "DSH's own migration from format {from} refuses this session: {reason} (DSH refuses \
             the format {from} file too; export it at format {from})"
        ),
    }
}

fn output_error(e: &std::io::Error) -> Error {
    Error::Output {
        detail: e.to_string(),
    }
}

/// Appends the latest format's header line and the migrated event lines to `out`, each
/// with its line feed (with `spill`, most of them go to it instead; see [`migrate_into`]);
/// returns that header.
fn migrate_text(
    header: &SessionHeader,
    events: &[Event],
    children: &[ChildFact],
    out: &mut String,
    spill: Option<&mut (dyn std::io::Write + Send)>,
) -> Result<SessionHeader, Error> {
    let from = header.format();
    let facts = HeaderFacts {
        id: header.id().to_owned(),
        is_seeded: header.is_seeded(),
        seed_length: header.seed_length().unwrap_or(0),
        created_at: header.created_at().unwrap_or(0),
        children: children.to_vec(),
    };
    let latest = header.as_written_by_latest()?;
    out.push_str(latest.raw());
    out.push('\n');
    migrate_into(&facts, from, events, out, spill).map_err(|stop| match stop {
        Stop::Refused(r) => refused(from, r.0),
        Stop::Output(e) => output_error(&e),
    })?;
    Ok(latest)
}

/// The file DSH's migration writes for a session declaring an older format: the latest
/// format's header and events, plain or in DSH's zstd layout (header frame, event frame).
/// `children` are the facts of the session's direct child sessions (DSH completes the
/// parent's catalog from them; none for a session migrated without its children).
pub fn export_latest(
    header: &SessionHeader,
    events: &[Event],
    children: &[ChildFact],
    zstd: bool,
) -> Result<Vec<u8>, Error> {
    // Room for the events as stored and a little growth each, so the text is rarely moved.
    let mut out = String::with_capacity(
        header.raw().len() + 64 + events.iter().map(|e| e.raw().len() + 64).sum::<usize>(),
    );
    migrate_text(header, events, children, &mut out, None)?;
    if zstd {
        crate::zstd_file::encode(out.as_bytes())
    } else {
        Ok(out.into_bytes())
    }
}

/// [`export_latest`] written to `file`: plain text is handed on as it is migrated, so
/// writing overlaps the migration. On an error, what was written is not a whole file.
pub fn write_latest(
    header: &SessionHeader,
    events: &[Event],
    children: &[ChildFact],
    zstd: bool,
    file: &mut (dyn std::io::Write + Send),
) -> Result<(), Error> {
    if zstd {
        let bytes = export_latest(header, events, children, zstd)?;
        return file.write_all(&bytes).map_err(|e| output_error(&e));
    }
    let mut out = String::with_capacity(2 * SPILL_BYTES);
    migrate_text(header, events, children, &mut out, Some(&mut *file))?;
    file.write_all(out.as_bytes()).map_err(|e| output_error(&e))
}
