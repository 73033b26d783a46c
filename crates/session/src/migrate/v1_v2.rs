//! V1 -> V2: `assistant/chunk` events go. The chunks of one model call become the compact
//! timed `stream` of the `assistant/message` that cites them (its `sourceEventSeqs` go),
//! or of a new `assistant/attempt` when no message settles them; every later seq and every
//! reference to one is renumbered. A seeded session's inherited prefix gets its
//! `session/end-seed {inherited: true}` marker; a turn a queued message interrupted gets
//! the `turn/end` it lacked; a goal-change message is split in two.

use std::borrow::Cow;

use super::value::{get, seq_array, set, text_of, Obj, Val};
use super::{interrupted_turn_end, queues_next_turn, unsupported, Ev, HeaderFacts, Refusal, Step};
use crate::version::DshFormat;

/// One record of a compact stream.
#[derive(Debug, Clone)]
enum Rec<'a> {
    Chunk {
        time: i64,
        chunk: Val<'a>,
    },
    Text {
        reasoning: bool,
        time0: i64,
        index: String,
        dt: Vec<i64>,
        texts: Vec<Val<'a>>,
        last: i64,
    },
    Tool {
        time0: i64,
        index: String,
        dt: Vec<i64>,
        id: Val<'a>,
        name: Option<Val<'a>>,
        args: Vec<Val<'a>>,
        last: i64,
    },
}

impl<'a> Rec<'a> {
    fn to_val(&self) -> Val<'a> {
        let ints =
            |values: &[i64]| Val::Arr(values.iter().map(|v| Val::Text(v.to_string())).collect());
        match self {
            Rec::Chunk { time, chunk } => Val::Obj(vec![
                ("type".into(), Val::literal("\"chunk\"")),
                ("time".into(), Val::Text(time.to_string())),
                ("chunk".into(), chunk.clone()),
            ]),
            Rec::Text {
                reasoning,
                time0,
                index,
                dt,
                texts,
                ..
            } => Val::Obj(vec![
                (
                    "type".into(),
                    Val::literal(if *reasoning {
                        "\"reasoning-chunks\""
                    } else {
                        "\"text-chunks\""
                    }),
                ),
                ("time0".into(), Val::Text(time0.to_string())),
                ("index".into(), Val::Text(index.clone())),
                ("dt".into(), ints(dt)),
                ("texts".into(), Val::Arr(texts.clone())),
            ]),
            Rec::Tool {
                time0,
                index,
                dt,
                id,
                name,
                args,
                ..
            } => {
                let mut members: Obj<'a> = vec![
                    ("type".into(), Val::literal("\"tool-call-chunks\"")),
                    ("time0".into(), Val::Text(time0.to_string())),
                    ("index".into(), Val::Text(index.clone())),
                    ("dt".into(), ints(dt)),
                    ("id".into(), id.clone()),
                ];
                if let Some(name) = name {
                    members.push(("name".into(), name.clone()));
                }
                members.push(("args".into(), Val::Arr(args.clone())));
                Val::Obj(members)
            }
        }
    }
}

/// The chunks of one model call (DSH's attempt group).
#[derive(Debug)]
struct Group<'a> {
    turn: String,
    step: String,
    spans: Vec<(u64, u64)>,
    stream: Vec<Rec<'a>>,
    chunk_count: u64,
    terminal: bool,
    last_chunk_seq: u64,
    last_chunk_time: i64,
}

impl<'a> Group<'a> {
    fn new(turn: String, step: String) -> Group<'a> {
        Group {
            turn,
            step,
            spans: Vec::new(),
            stream: Vec::new(),
            chunk_count: 0,
            terminal: false,
            last_chunk_seq: 0,
            last_chunk_time: 0,
        }
    }

    fn record_span(&mut self, seq: u64, time: i64) {
        match self.spans.last_mut() {
            Some((first, count)) if first.saturating_add(*count) == seq => *count += 1,
            _ => self.spans.push((seq, 1)),
        }
        self.chunk_count += 1;
        self.last_chunk_seq = seq;
        self.last_chunk_time = time;
    }

    fn matches(&self, sources: &[u64]) -> bool {
        sources.len() as u64 == self.chunk_count
            && self
                .spans
                .iter()
                .flat_map(|(first, count)| *first..first.saturating_add(*count))
                .zip(sources)
                .all(|(a, b)| a == *b)
    }

    /// Adds one chunk as DSH's stream accumulator does: deltas continuing the previous
    /// record of their kind and block join it, everything else is a record of its own.
    /// Returns whether the chunk is a `finish` chunk (the attempt's last).
    fn push(&mut self, time: i64, chunk: Val<'a>) -> bool {
        // One pass over the chunk's members finds every one a record may take.
        let [type_val, index_val, text_val, id_val, name_val, args_val] =
            chunk.members(["type", "index", "text", "id", "name", "argumentsDelta"]);
        let chunk_type = type_val.as_ref().and_then(Val::as_str);
        let finish = chunk_type.as_deref() == Some("finish");
        let kind = match chunk_type.as_deref() {
            Some("text-delta") => Some("text-delta"),
            Some("reasoning-delta") => Some("reasoning-delta"),
            Some("tool-call-delta") => Some("tool-call-delta"),
            _ => None,
        };
        let index = index_val.as_ref().map_or(Cow::Borrowed(""), Val::text_cow);
        match kind {
            Some(k @ ("text-delta" | "reasoning-delta")) => {
                let reasoning = k == "reasoning-delta";
                let text = text_val.unwrap_or(Val::literal("\"\""));
                if let Some(Rec::Text {
                    reasoning: r,
                    index: i,
                    dt,
                    texts,
                    last,
                    ..
                }) = self.stream.last_mut()
                {
                    if *r == reasoning && *i == *index {
                        dt.push(time.saturating_sub(*last));
                        texts.push(text);
                        *last = time;
                        return finish;
                    }
                }
                self.stream.push(Rec::Text {
                    reasoning,
                    time0: time,
                    index: index.into_owned(),
                    dt: Vec::new(),
                    texts: vec![text],
                    last: time,
                });
            }
            Some("tool-call-delta") => {
                let id = id_val.unwrap_or(Val::literal("\"\""));
                let name = name_val;
                let empty_id = id.as_str().is_none_or(|s| s.is_empty());
                let empty_name = name
                    .as_ref()
                    .is_some_and(|n| n.as_str().as_deref() == Some(""));
                if empty_id || empty_name {
                    self.stream.push(Rec::Chunk { time, chunk });
                    return finish;
                }
                let args = args_val.unwrap_or(Val::literal("\"\""));
                if let Some(Rec::Tool {
                    index: i,
                    dt,
                    id: pid,
                    name: pname,
                    args: pargs,
                    last,
                    ..
                }) = self.stream.last_mut()
                {
                    let same_name =
                        pname.as_ref().map(Val::to_text) == name.as_ref().map(Val::to_text);
                    if *i == *index && pid.to_text() == id.to_text() && same_name {
                        dt.push(time.saturating_sub(*last));
                        pargs.push(args);
                        *last = time;
                        return finish;
                    }
                }
                self.stream.push(Rec::Tool {
                    time0: time,
                    index: index.into_owned(),
                    dt: Vec::new(),
                    id,
                    name,
                    args: vec![args],
                    last: time,
                });
            }
            _ => self.stream.push(Rec::Chunk { time, chunk }),
        }
        finish
    }

    fn stream_val(&self) -> Val<'a> {
        Val::Arr(self.stream.iter().map(Rec::to_val).collect())
    }
}

fn time_of(ev: &mut Ev<'_>) -> i64 {
    ev.get("time").and_then(|t| t.as_i64()).unwrap_or(0)
}

struct Pending<'a> {
    group: Group<'a>,
    after_last_chunk: Vec<Ev<'a>>,
}

pub(super) struct Stage<'a> {
    seeded: bool,
    source_cut: u64,
    target_cut: Option<u64>,
    target_seq: u64,
    mapping: Vec<Option<u64>>,
    open_turn: Option<String>,
    open_step: Option<String>,
    /// The previous event was an `agent/inbox/spliced` queueing messages for the next turn.
    previous_spliced: bool,
    pending: Option<Pending<'a>>,
    last_time: i64,
    out: Vec<Ev<'a>>,
}

impl<'a> Stage<'a> {
    /// The stage for a session of `events` events.
    pub(super) fn new(header: &HeaderFacts, events: usize) -> Stage<'a> {
        Stage {
            seeded: header.is_seeded,
            source_cut: header.seed_length,
            target_cut: if header.is_seeded { None } else { Some(0) },
            target_seq: 0,
            mapping: vec![None; events],
            open_turn: None,
            open_step: None,
            previous_spliced: false,
            pending: None,
            last_time: i64::try_from(header.created_at).unwrap_or(0),
            out: Vec::new(),
        }
    }
}

impl<'a> Step<'a> for Stage<'a> {
    fn push(&mut self, ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        let done = self.event(ev);
        out.append(&mut self.out);
        done
    }

    fn finish(&mut self, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        let done = self.finish_attempt();
        if done.is_ok() && self.seeded && self.target_cut.is_none() {
            self.target_cut = Some(self.target_seq);
            let marker = end_seed(self.target_seq, self.last_time);
            self.out.push(marker);
            self.target_seq += 1;
        }
        out.append(&mut self.out);
        done
    }
}

fn end_seed<'a>(seq: u64, time: i64) -> Ev<'a> {
    Ev::new(
        "session/end-seed",
        seq,
        Val::Text(time.to_string()),
        inherited(),
    )
}

fn inherited<'a>() -> Val<'a> {
    Val::Obj(vec![("inherited".into(), Val::literal("true"))])
}

fn closes_attempt(ty: &str) -> bool {
    matches!(
        ty,
        "turn/end" | "step/end" | "llm/retry" | "llm/retry-started"
    )
}

impl<'a> Stage<'a> {
    fn event(&mut self, mut ev: Ev<'a>) -> Result<(), Refusal> {
        if !DshFormat::V1.knows(&ev.ty) {
            return Err(unsupported(format!(
                "format v1 contains unknown event type {:?} at seq {}",
                ev.ty, ev.seq
            )));
        }
        let interrupted = self.interrupted_turn(&mut ev);
        if ev.ty == "turn/start" && self.open_turn.is_some() && interrupted.is_none() {
            return Err(unsupported(format!(
                "turn/start {} does not close the prior turn",
                text_of(ev.field("turn"))
            )));
        }
        self.observe_turn(&mut ev);
        let time = time_of(&mut ev);
        self.last_time = time;
        if let Some(end) = interrupted {
            self.finish_attempt()?;
            self.emit_generated(ev.seq, end)?;
        }
        if let Some((change, message)) = split_goal_change(&mut ev) {
            self.emit_generated(ev.seq, change)?;
            return self.emit_source(message);
        }
        match ev.ty.as_ref() {
            "assistant/chunk" => self.chunk(ev, time),
            "assistant/message" => self.message(ev),
            ty if closes_attempt(ty) => {
                self.finish_attempt()?;
                self.emit_source(ev)
            }
            _ => match &mut self.pending {
                Some(pending) => {
                    pending.after_last_chunk.push(ev);
                    Ok(())
                }
                None => self.emit_source(ev),
            },
        }
    }

    fn interrupted_turn(&mut self, ev: &mut Ev<'a>) -> Option<Ev<'a>> {
        if ev.ty != "turn/start" || self.open_step.is_some() || !self.previous_spliced {
            return None;
        }
        let open = self.open_turn.as_ref()?;
        let open_number: u64 = open.parse().ok()?;
        if ev.field("turn").and_then(|t| t.as_u64()) != Some(open_number + 1) {
            return None;
        }
        Some(interrupted_turn_end(
            ev.seq,
            ev.time(),
            Val::Text(open.clone()),
        ))
    }

    fn observe_turn(&mut self, ev: &mut Ev<'a>) {
        match ev.ty.as_ref() {
            "turn/start" => {
                self.open_turn = Some(text_of(ev.field("turn")));
                self.open_step = None;
            }
            "turn/end" => {
                self.open_turn = None;
                self.open_step = None;
            }
            "step/start" => self.open_step = Some(text_of(ev.field("step"))),
            "step/end" => self.open_step = None,
            _ => {}
        }
        self.previous_spliced = queues_next_turn(ev);
    }

    fn chunk(&mut self, ev: Ev<'a>, time: i64) -> Result<(), Refusal> {
        // The payload is read where it is stored, not opened up: a chunk is not written
        // again as itself, only into its attempt's stream.
        let [turn_val, step_val, chunk_val] = ev
            .val("data")
            .map_or([None, None, None], |d| d.members(["turn", "step", "chunk"]));
        let turn = turn_val.as_ref().map_or(Cow::Borrowed(""), Val::text_cow);
        let step = step_val.as_ref().map_or(Cow::Borrowed(""), Val::text_cow);
        let chunk = chunk_val.unwrap_or(Val::literal("null"));
        let differs = self
            .pending
            .as_ref()
            .is_some_and(|p| p.group.terminal || p.group.turn != *turn || p.group.step != *step);
        if differs {
            self.finish_attempt()?;
        } else if self.pending.is_some() {
            self.flush_buffered()?;
        }
        let pending = self.pending.get_or_insert_with(|| Pending {
            group: Group::new(turn.into_owned(), step.into_owned()),
            after_last_chunk: Vec::new(),
        });
        let first = pending.group.spans.first().map_or(ev.seq, |s| s.0);
        if (first < self.source_cut) != (ev.seq < self.source_cut) {
            return Err(unsupported(format!(
                "inherited Session cut {} splits one Assistant attempt",
                self.source_cut
            )));
        }
        let finish = pending.group.push(time, chunk);
        pending.group.record_span(ev.seq, time);
        if finish {
            pending.group.terminal = true;
        }
        Ok(())
    }

    fn message(&mut self, mut ev: Ev<'a>) -> Result<(), Refusal> {
        let turn = text_of(ev.field("turn"));
        let step = text_of(ev.field("step"));
        let sources = ev.sources();
        let other_step = self
            .pending
            .as_ref()
            .is_some_and(|p| p.group.turn != turn || p.group.step != step);
        if other_step {
            self.finish_attempt()?;
            let empty = Group::new(turn, step);
            return self.emit_source(with_stream(ev, &empty));
        }
        let Some(sources) = sources else {
            if self.pending.is_some() {
                return Err(unsupported(format!(
                    "assistant/message {} does not cite its complete v1 chunk attempt",
                    ev.seq
                )));
            }
            let empty = Group::new(turn, step);
            return self.emit_source(with_stream(ev, &empty));
        };
        if sources.is_empty() {
            self.finish_attempt()?;
            let empty = Group::new(turn, step);
            return self.emit_source(with_stream(ev, &empty));
        }
        let Some(mut pending) = self.pending.take() else {
            return Err(unsupported(format!(
                "assistant/message {} chunk references are not one complete ordered attempt",
                ev.seq
            )));
        };
        if !pending.group.matches(&sources) {
            return Err(unsupported(format!(
                "assistant/message {} chunk references are not one complete ordered attempt",
                ev.seq
            )));
        }
        let first = pending.group.spans.first().map_or(ev.seq, |s| s.0);
        if (first < self.source_cut) != (ev.seq < self.source_cut) {
            return Err(unsupported(format!(
                "inherited Session cut {} splits one Assistant attempt",
                self.source_cut
            )));
        }
        for buffered in std::mem::take(&mut pending.after_last_chunk) {
            self.emit_source(buffered)?;
        }
        self.emit_source(with_stream(ev, &pending.group))
    }

    fn finish_attempt(&mut self) -> Result<(), Refusal> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let group = &pending.group;
        let data = Val::Obj(vec![
            ("turn".into(), Val::Text(group.turn.clone())),
            ("step".into(), Val::Text(group.step.clone())),
            ("stream".into(), group.stream_val()),
        ]);
        let attempt = Ev::new(
            "assistant/attempt",
            group.last_chunk_seq,
            Val::Text(group.last_chunk_time.to_string()),
            data,
        );
        self.emit_generated(group.last_chunk_seq, attempt)?;
        for buffered in pending.after_last_chunk {
            self.emit_source(buffered)?;
        }
        Ok(())
    }

    fn flush_buffered(&mut self) -> Result<(), Refusal> {
        let buffered = self
            .pending
            .as_mut()
            .map(|p| std::mem::take(&mut p.after_last_chunk))
            .unwrap_or_default();
        for ev in buffered {
            self.emit_source(ev)?;
        }
        Ok(())
    }

    fn emit_source(&mut self, mut ev: Ev<'a>) -> Result<(), Refusal> {
        if self.seeded && ev.seq == self.source_cut && ev.ty == "session/end-seed" {
            set(&mut ev.env, "data", inherited());
        }
        let time = time_of(&mut ev);
        self.ensure_target_cut(ev.seq, time, &ev.ty.clone());
        if let Some(slot) = usize::try_from(ev.seq)
            .ok()
            .and_then(|i| self.mapping.get_mut(i))
        {
            *slot = Some(self.target_seq);
        }
        let remapped = self.remap(ev)?;
        self.out.push(remapped);
        self.target_seq += 1;
        Ok(())
    }

    fn emit_generated(&mut self, origin: u64, mut ev: Ev<'a>) -> Result<(), Refusal> {
        let time = time_of(&mut ev);
        self.ensure_target_cut(origin, time, &ev.ty.clone());
        ev.set_seq(self.target_seq);
        self.out.push(ev);
        self.target_seq += 1;
        Ok(())
    }

    fn ensure_target_cut(&mut self, origin: u64, time: i64, ty: &str) {
        if !self.seeded || self.target_cut.is_some() || origin < self.source_cut {
            return;
        }
        self.target_cut = Some(self.target_seq);
        if origin == self.source_cut && ty == "session/end-seed" {
            return;
        }
        self.out.push(end_seed(self.target_seq, time));
        self.target_seq += 1;
    }

    fn map_one(&self, value: Option<u64>, label: impl Fn() -> String) -> Result<u64, Refusal> {
        let value = value.unwrap_or(u64::MAX);
        usize::try_from(value)
            .ok()
            .and_then(|i| self.mapping.get(i).copied().flatten())
            .ok_or_else(|| {
                unsupported(format!(
                    "{} targets consumed assistant/chunk {value}",
                    label()
                ))
            })
    }

    fn map_list(
        &self,
        values: Option<Vec<u64>>,
        label: impl Fn() -> String,
    ) -> Result<Val<'a>, Refusal> {
        let mapped = values
            .unwrap_or_default()
            .into_iter()
            .map(|v| self.map_one(Some(v), &label))
            .collect::<Result<Vec<u64>, Refusal>>()?;
        Ok(seq_array(&mapped))
    }

    /// DSH's `remapReferences`: the event at its new seq, its cited seqs renumbered, with
    /// `sourceEventSeqs` and `surfaceOp` moved to the end of the envelope.
    fn remap(&self, mut ev: Ev<'a>) -> Result<Ev<'a>, Refusal> {
        let (ty, seq) = (ev.ty.clone(), ev.seq);
        let sources = ev.remove("sourceEventSeqs").map(|mut s| s.seq_list());
        let op = ev.remove("surfaceOp");
        ev.set_seq(self.target_seq);
        self.remap_payload(&mut ev, &ty, seq)?;
        if let Some(list) = sources {
            let mapped = self.map_list(list, || format!("{ty} {seq} sources"))?;
            set(&mut ev.env, "sourceEventSeqs", mapped);
        }
        if let Some(mut op) = op {
            if op.as_str().as_deref() != Some("append") {
                let start = op.get("start").and_then(|v| v.as_u64());
                let end = op.get("end").and_then(|v| v.as_u64());
                let start = self.map_one(start, || format!("{ty} {seq} surface start"))?;
                let end = self.map_one(end, || format!("{ty} {seq} surface end"))?;
                op = Val::Obj(vec![
                    ("op".into(), Val::literal("\"replace\"")),
                    ("start".into(), Val::int(start)),
                    ("end".into(), Val::int(end)),
                ]);
            }
            set(&mut ev.env, "surfaceOp", op);
        }
        Ok(ev)
    }

    fn remap_payload(&self, ev: &mut Ev<'a>, ty: &str, seq: u64) -> Result<(), Refusal> {
        match ty {
            "command/done" => {
                if let Some(source) = ev.field("sourceEventSeq").map(|v| v.as_u64()) {
                    let mapped =
                        self.map_one(source, || format!("command/done {seq} sourceEventSeq"))?;
                    ev.set_field("sourceEventSeq", Val::int(mapped));
                }
            }
            "compaction/prune" | "compaction/summary" => {
                let Some(data) = ev.data() else { return Ok(()) };
                let range = get(data, "shadowedRange");
                let (start, end) = match range {
                    Some(r) => (
                        r.get("start").and_then(|v| v.as_u64()),
                        r.get("end").and_then(|v| v.as_u64()),
                    ),
                    None => (None, None),
                };
                let start = self.map_one(start, || format!("{ty} {seq} shadowedRange start"))?;
                let end = self.map_one(end, || format!("{ty} {seq} shadowedRange end"))?;
                set(
                    data,
                    "shadowedRange",
                    Val::Obj(vec![
                        ("start".into(), Val::int(start)),
                        ("end".into(), Val::int(end)),
                    ]),
                );
                let seqs = get(data, "shadowedSeqs").and_then(|v| v.seq_list());
                let mapped = self.map_list(seqs, || format!("{ty} {seq} shadowedSeqs"))?;
                set(data, "shadowedSeqs", mapped);
            }
            "session/title" | "session/title-llm-request" => {
                let seqs = ev.field("messageSeqs").and_then(|v| v.seq_list());
                let mapped = self.map_list(seqs, || format!("{ty} {seq} messageSeqs"))?;
                ev.set_field("messageSeqs", mapped);
            }
            _ => {}
        }
        Ok(())
    }
}

/// `{...event without sourceEventSeqs, data: {...data, stream}}`.
fn with_stream<'a>(mut ev: Ev<'a>, group: &Group<'a>) -> Ev<'a> {
    ev.remove("sourceEventSeqs");
    ev.set_field("stream", group.stream_val());
    ev
}

/// A V0/V1 user message from the goal plugin that carries the goal change itself: the
/// change becomes its own `goal/change` event before the message.
fn split_goal_change<'a>(ev: &mut Ev<'a>) -> Option<(Ev<'a>, Ev<'a>)> {
    if ev.ty != "user/message" {
        return None;
    }
    let kind = ev.val("data")?.peek("source")?.peek("kind")?.as_str();
    if kind.as_deref() != Some("goal") {
        return None;
    }
    let source = ev.field("source")?;
    if source.get("kind")?.as_str().as_deref() != Some("goal") {
        return None;
    }
    let change = source.get("change")?.clone();
    let goal = Ev::new("goal/change", ev.seq, ev.time(), change);
    let mut message = ev.clone();
    message.set_field(
        "source",
        Val::Obj(vec![
            ("kind".into(), Val::literal("\"plugin\"")),
            ("plugin".into(), Val::literal("\"goal\"")),
        ]),
    );
    Some((goal, message))
}
