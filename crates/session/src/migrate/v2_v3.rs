//! V2 -> V3: the system prompt leaves `request/header` and becomes the session's system
//! head, a `system/message` DSH adds at the first step and replaces wherever the prompt
//! changes. Its id is a content hash: SHA-256 of
//! `JSON.stringify(["session-format-v2-to-v3", sessionId, anchorSeq, anchorType])`.
//! Replacements are spelled `{op, startSeq, endSeq}`, empty request tool lists and adapter
//! defaults are dropped, and the code-mode vocabulary is renamed PTC.

use super::sha256::hex_digest;
use super::value::{get, remove, set, Obj, Val};
use super::{malformed_in, unsupported, Ev, HeaderFacts, Refusal, SeqMap, Step};
use crate::json::write_js_string;

const SYSTEM_PROMPT_PLUGIN: &str = "@deepseek-ai/dsh-system-prompt";

pub(super) struct Stage<'h, 'a> {
    header: &'h HeaderFacts,
    mapping: SeqMap,
    target_seq: u64,
    step: Option<(Val<'a>, Val<'a>)>,
    head: Option<u64>,
    prompt: String,
    out: Vec<Ev<'a>>,
}

impl<'h, 'a> Stage<'h, 'a> {
    /// The stage for a session of `events` events.
    pub(super) fn new(header: &'h HeaderFacts, events: usize) -> Stage<'h, 'a> {
        Stage {
            header,
            mapping: SeqMap::new(
                events,
                2,
                "reference must name an earlier source event",
                "sequence references must be an array",
            ),
            target_seq: 0,
            step: None,
            head: None,
            prompt: String::new(),
            out: Vec::new(),
        }
    }
}

impl<'a> Step<'a> for Stage<'_, 'a> {
    fn push(&mut self, ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        let done = self.event(ev);
        out.append(&mut self.out);
        done
    }
}

fn is_surface(ty: &str) -> bool {
    matches!(
        ty,
        "system/message" | "user/message" | "assistant/message" | "tool/result"
    )
}

impl<'a> Stage<'_, 'a> {
    fn event(&mut self, mut ev: Ev<'a>) -> Result<(), Refusal> {
        if ev.ty == "request/header" {
            let system = ev
                .field("header")
                .and_then(Val::obj)
                .and_then(|h| remove(h, "system"));
            let prompt = system
                .and_then(|s| s.as_str().map(|p| p.into_owned()))
                .unwrap_or_default();
            if prompt != self.prompt {
                self.emit_system(prompt, &mut ev)?;
            }
        }
        if is_surface(&ev.ty) && self.head.is_none() {
            return Err(unsupported(
                "format v2 surface before first step cannot acquire a system head without changing chronology",
            ));
        }
        let anchor_is_step = ev.ty == "step/start";
        let closes_step = ev.ty == "step/end" || ev.ty == "turn/end";
        let step = if anchor_is_step {
            Some((
                ev.field("turn").cloned().unwrap_or(Val::literal("null")),
                ev.field("step").cloned().unwrap_or(Val::literal("null")),
            ))
        } else {
            None
        };
        let mut anchor = if anchor_is_step {
            Some(ev.clone())
        } else {
            None
        };
        self.remap(&mut ev)?;
        self.mapping.push(self.target_seq);
        self.target_seq += 1;
        rename_ptc(&mut ev);
        canonicalize(&mut ev)?;
        self.out.push(ev);
        if let Some(step) = step {
            self.step = Some(step);
            if self.head.is_none() {
                if let Some(anchor) = anchor.as_mut() {
                    self.emit_system(String::new(), anchor)?;
                }
            }
        } else if closes_step {
            self.step = None;
        }
        Ok(())
    }

    fn emit_system(&mut self, prompt: String, anchor: &mut Ev<'a>) -> Result<(), Refusal> {
        let Some((turn, step)) = self.step.clone() else {
            return Err(unsupported(
                "format v2 changed request prompt outside an open step cannot retain source chronology",
            ));
        };
        let mut identity = String::from("[\"session-format-v2-to-v3\",");
        write_js_string(&mut identity, &self.header.id);
        identity.push_str(&format!(",{},", anchor.seq));
        write_js_string(&mut identity, &anchor.ty);
        identity.push(']');
        let id = format!("v2-to-v3-system-{}", hex_digest(identity.as_bytes()));
        let content = if prompt.is_empty() {
            Val::Arr(Vec::new())
        } else {
            Val::Arr(vec![Val::Obj(vec![
                ("type".into(), Val::literal("\"text\"")),
                ("text".into(), Val::string(&prompt)),
            ])])
        };
        let message = Val::Obj(vec![
            ("id".into(), Val::string(&id)),
            ("role".into(), Val::literal("\"system\"")),
            (
                "source".into(),
                Val::Obj(vec![
                    ("kind".into(), Val::literal("\"plugin\"")),
                    ("plugin".into(), Val::string(SYSTEM_PROMPT_PLUGIN)),
                ]),
            ),
            ("content".into(), content),
        ]);
        let data = Val::Obj(vec![
            ("turn".into(), turn),
            ("step".into(), step),
            ("message".into(), message),
        ]);
        let seq = self.target_seq;
        self.target_seq += 1;
        let mut system = Ev::new("system/message", seq, anchor.time(), data);
        match self.head {
            None => set(&mut system.env, "surfaceOp", Val::literal("\"append\"")),
            Some(head) => {
                set(&mut system.env, "surfaceOp", replace_op(head, head));
                set(
                    &mut system.env,
                    "sourceEventSeqs",
                    super::value::seq_array(&[head]),
                );
            }
        }
        self.out.push(system);
        self.head = Some(seq);
        self.prompt = prompt;
        Ok(())
    }

    /// DSH's `remapEvent`: the event at its new seq with its references renumbered, every
    /// member kept in place.
    fn remap(&self, ev: &mut Ev<'a>) -> Result<(), Refusal> {
        let seq = ev.seq;
        if seq != self.target_seq {
            ev.set_seq(self.target_seq);
        }
        self.mapping.payload(ev, seq)?;
        self.mapping.envelope(ev, seq, ("start", "end"))
    }
}

fn replace_op<'a>(start: u64, end: u64) -> Val<'a> {
    Val::Obj(vec![
        ("op".into(), Val::literal("\"replace\"")),
        ("startSeq".into(), Val::int(start)),
        ("endSeq".into(), Val::int(end)),
    ])
}

/// DSH's `canonicalizeTransformedEvent`: a replacement as `{op, startSeq, endSeq}`, and a
/// request header without empty tool lists or adapter defaults.
fn canonicalize(ev: &mut Ev<'_>) -> Result<(), Refusal> {
    let (ty, seq) = (ev.ty.clone(), ev.seq);
    if let Some(op) = ev.get("surfaceOp") {
        if op.as_str().as_deref() != Some("append") {
            let exact = op.obj().is_some_and(|m| {
                m.len() == 3
                    && m.iter()
                        .all(|(k, _)| matches!(k.as_ref(), "op" | "start" | "end"))
            });
            let is_replace = op.get("op").and_then(|o| o.as_str()).as_deref() == Some("replace");
            let (start, end) = (
                op.get("start").and_then(|v| v.as_u64()),
                op.get("end").and_then(|v| v.as_u64()),
            );
            let (Some(start), Some(end), true, true) = (start, end, exact, is_replace) else {
                return Err(malformed_in(
                    2,
                    format!(
                        "format v2 {ty} at seq {seq} requires exact replace fields op/start/end"
                    ),
                ));
            };
            set(&mut ev.env, "surfaceOp", replace_op(start, end));
        }
    }
    if ty == "request/header" {
        if let Some(header) = ev.field("header").and_then(Val::obj) {
            header.retain_mut(|(key, value)| match key.as_ref() {
                "tools" => !value.arr().is_some_and(|a| a.is_empty()),
                "adapterDefaults" => !value.obj().is_some_and(|o| o.is_empty()),
                _ => true,
            });
        }
    }
    Ok(())
}

fn rename_message_source(message: &mut Val<'_>) {
    let plugin = message
        .peek("source")
        .and_then(|s| s.peek("plugin"))
        .and_then(|p| p.as_str());
    if plugin.as_deref() != Some("tools-code-mode") {
        return;
    }
    let Some(source) = message.get("source").and_then(Val::obj) else {
        return;
    };
    let is = |s: &mut Obj<'_>, k: &str, v: &str| {
        get(s, k).and_then(|x| x.as_str()).as_deref() == Some(v)
    };
    if is(source, "kind", "plugin") && is(source, "plugin", "tools-code-mode") {
        set(source, "plugin", Val::literal("\"tools-ptc\""));
    }
}

/// DSH's `renamePtcEvent`: the code-mode names of V2 become V3's PTC names.
fn rename_ptc(ev: &mut Ev<'_>) {
    let ty = ev.ty.clone();
    match ty.as_ref() {
        "agent-preset/selected"
            if ev.field("agentPreset").and_then(|p| p.as_str()).as_deref() == Some("code") =>
        {
            ev.set_field("agentPreset", Val::literal("\"ptc\""));
        }
        "tool/code-dispatch-start" => ev.set_type("tool/ptc-dispatch-start"),
        "tool/code-dispatch" => ev.set_type("tool/ptc-dispatch"),
        "user/message" => {
            if let Some(data) = ev.get("data") {
                rename_message_source(data);
            }
        }
        "agent/inbox/spliced" | "session/title-llm-request" => {
            let key = if ty == "agent/inbox/spliced" {
                "inserted"
            } else {
                "messages"
            };
            if let Some(messages) = ev.field(key).and_then(Val::arr) {
                messages.iter_mut().for_each(rename_message_source);
            }
        }
        _ => {}
    }
}
