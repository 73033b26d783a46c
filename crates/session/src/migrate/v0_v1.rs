//! V0 -> V1: DSH's released V0 logs say the same things in older shapes. This stage
//! renames the retired `compact/*` and `steering/message` events, gives pre-id messages,
//! retries and compactions the ids V1 requires (`legacy-message:SESSION:SEQ`, ...), lifts
//! pre-react-loop turn ends, and refuses what V1 cannot say (legacy header deltas, mode
//! changes, fallback requests, version-2 sub-agent descriptors, unknown event types).

use std::collections::HashMap;

use super::value::{get, has, remove, set, text_of, Obj, Val};
use super::{malformed_in, unsupported, Ev, HeaderFacts, Refusal, Step};
use crate::version::DshFormat;

#[derive(Default)]
struct State {
    message_ids: HashMap<u64, String>,
    retry_ids: HashMap<String, String>,
    compaction_id: Option<String>,
}

/// The stage, one event at a time.
pub(super) struct Stage<'h> {
    sid: &'h str,
    state: State,
}

impl<'h> Stage<'h> {
    pub(super) fn new(header: &'h HeaderFacts) -> Stage<'h> {
        Stage {
            sid: header.id.as_str(),
            state: State::default(),
        }
    }
}

impl<'a> Step<'a> for Stage<'_> {
    fn push(&mut self, mut ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        let (sid, state) = (self.sid, &mut self.state);
        rename_compaction(&mut ev);
        refuse_unsupported_legacy(&mut ev, sid)?;
        turn_start(&mut ev);
        turn_end(&mut ev);
        request_header(&mut ev);
        steering(&mut ev, sid);
        retry(&mut ev, sid, state);
        compaction(&mut ev, sid, state);
        legacy_message(&mut ev, sid, state)?;
        if ev.ty != "assistant/chunk" {
            check_payload(&mut ev)?;
        }
        if let Some(id) = message_id(&ev) {
            state.message_ids.insert(ev.seq, id);
        }
        out.push(ev);
        Ok(())
    }
}

fn legacy_id(sid: &str, seq: u64) -> String {
    format!("legacy-message:{sid}:{seq}")
}

fn rename_compaction(ev: &mut Ev<'_>) {
    let renamed = match ev.ty.as_ref() {
        "compact/start" => "compaction/start",
        "compact/summary" => "compaction/summary",
        "compact/end" => "compaction/end",
        "compact/prune" => "compaction/prune",
        _ => return,
    };
    ev.set_type(renamed);
}

fn refuse_unsupported_legacy(ev: &mut Ev<'_>, sid: &str) -> Result<(), Refusal> {
    let seq = ev.seq;
    if ev.ty == "request/header-delta" || ev.ty == "mode/set" {
        return Err(unsupported(format!(
            "session {sid:?} contains unsupported legacy {} event at seq {seq}",
            ev.ty
        )));
    }
    if ev.ty == "request/header"
        && ev.field("reason").and_then(|r| r.as_str()).as_deref() == Some("fallback")
    {
        return Err(unsupported(format!(
            "session {sid:?} contains unsupported request/header reason \"fallback\" at seq {seq}"
        )));
    }
    Ok(())
}

fn turn_start(ev: &mut Ev<'_>) {
    if ev.ty != "turn/start" || ev.field("trigger").is_none() {
        return;
    }
    let turn = ev.field("turn").cloned().unwrap_or(Val::literal("null"));
    set(&mut ev.env, "data", Val::Obj(vec![("turn".into(), turn)]));
}

fn kind_only<'a>(kind: &str, inner: Option<&str>) -> Val<'a> {
    let mut members: Obj<'a> = vec![("kind".into(), Val::string(kind))];
    if let Some(inner) = inner {
        members.push((
            "reason".into(),
            Val::Obj(vec![("kind".into(), Val::string(inner))]),
        ));
    }
    Val::Obj(members)
}

fn turn_end(ev: &mut Ev<'_>) {
    if ev.ty != "turn/end" {
        return;
    }
    let Some(reason) = ev.field("reason") else {
        return;
    };
    let kind = reason
        .get("kind")
        .and_then(|k| k.as_str())
        .map(|k| k.into_owned());
    let current = match kind.as_deref() {
        Some("aborted") if reason.get("reason").is_none() => kind_only("aborted", Some("legacy")),
        Some("disposed") => kind_only("aborted", Some("disposed")),
        Some("error") if reason.get("error").is_none() => {
            let error = match reason.get("failure") {
                Some(failure) => failure.clone(),
                None => {
                    let message = reason
                        .get("message")
                        .cloned()
                        .unwrap_or(Val::literal("null"));
                    let code = reason
                        .get("code")
                        .filter(|c| c.as_str().is_some())
                        .cloned()
                        .unwrap_or(Val::literal("\"UNKNOWN\""));
                    Val::Obj(vec![("message".into(), message), ("code".into(), code)])
                }
            };
            Val::Obj(vec![
                ("kind".into(), Val::literal("\"error\"")),
                ("error".into(), error),
            ])
        }
        _ => return,
    };
    ev.set_field("reason", current);
}

fn request_header(ev: &mut Ev<'_>) {
    if ev.ty != "request/header" {
        return;
    }
    if let Some(header) = ev.field("header").and_then(Val::obj) {
        remove(header, "messagePrefix");
    }
}

fn steering<'a>(ev: &mut Ev<'a>, sid: &str) {
    if ev.ty != "steering/message" {
        return;
    }
    ev.set_type("user/message");
    if let Some(wrapped) = ev.field("message").cloned() {
        set(&mut ev.env, "data", wrapped);
        return;
    }
    let id = Val::string(&legacy_id(sid, ev.seq));
    if let Some(data) = ev.data() {
        remove(data, "turn");
        set(data, "id", id);
        set(data, "role", Val::literal("\"user\""));
    }
}

fn retry(ev: &mut Ev<'_>, sid: &str, state: &mut State) {
    if ev.ty != "llm/retry" {
        return;
    }
    let chain = ["turn", "step", "provider", "policyKey"]
        .map(|key| text_of(ev.field(key)))
        .join("\0");
    match ev.field("retryId") {
        Some(id) => {
            if let Some(id) = id.as_str().filter(|id| !id.is_empty()) {
                state.retry_ids.insert(chain, id.into_owned());
            }
        }
        None => {
            let id = state
                .retry_ids
                .get(&chain)
                .cloned()
                .unwrap_or_else(|| format!("legacy-retry:{sid}:{}", ev.seq));
            ev.set_field("retryId", Val::string(&id));
            state.retry_ids.insert(chain, id);
        }
    }
}

fn compaction(ev: &mut Ev<'_>, sid: &str, state: &mut State) {
    match ev.ty.as_ref() {
        "session/end-seed" => state.compaction_id = None,
        "compaction/start" => match ev.field("compactionId") {
            Some(id) => {
                if let Some(id) = id.as_str().filter(|id| !id.is_empty()) {
                    state.compaction_id = Some(id.into_owned());
                }
            }
            None => {
                let id = format!("legacy-compaction:{sid}:{}", ev.seq);
                ev.set_field("compactionId", Val::string(&id));
                state.compaction_id = Some(id);
            }
        },
        "compaction/summary" | "compaction/end" => {
            let Some(id) = state.compaction_id.clone() else {
                return;
            };
            if ev.field("compactionId").is_none() {
                ev.set_field("compactionId", Val::string(&id));
            }
            if ev.ty == "compaction/end" {
                state.compaction_id = None;
            }
        }
        "user/message" => {
            let Some(id) = state.compaction_id.clone() else {
                return;
            };
            let Some(source) = ev.field("source").and_then(Val::obj) else {
                return;
            };
            let is = |s: &mut Obj<'_>, k: &str, v: &str| {
                get(s, k).and_then(|x| x.as_str()).as_deref() == Some(v)
            };
            if is(source, "kind", "plugin")
                && is(source, "plugin", "compact")
                && !has(source, "compactionId")
            {
                set(source, "compactionId", Val::string(&id));
            }
        }
        _ => {}
    }
}

fn legacy_message<'a>(ev: &mut Ev<'a>, sid: &str, state: &State) -> Result<(), Refusal> {
    let seq = ev.seq;
    let ty = ev.ty.clone();
    // Only older shapes are reshaped; tell them apart without opening the payload up.
    let Some(payload) = ev.val("data") else {
        return Ok(());
    };
    let older = match ty.as_ref() {
        "user/message" => {
            !["id", "role", "message"]
                .iter()
                .any(|k| payload.peek_has(k))
                && payload.peek_has("content")
                && payload.peek_has("source")
        }
        "assistant/message" => {
            !payload.peek_has("message")
                && payload.peek_has("content")
                && payload.peek_has("provenance")
        }
        "tool/result" => {
            !payload.peek_has("message")
                && ["callId", "content", "isError"]
                    .iter()
                    .all(|k| payload.peek_has(k))
        }
        _ => false,
    };
    if !older {
        return Ok(());
    }
    let replaced_start = replacement_start(ev);
    let Some(data) = ev.data() else {
        return Ok(());
    };
    match ty.as_ref() {
        "user/message" => {
            if has(data, "id")
                || has(data, "role")
                || has(data, "message")
                || !has(data, "content")
                || !has(data, "source")
            {
                return Ok(());
            }
            set(data, "id", Val::string(&legacy_id(sid, seq)));
            set(data, "role", Val::literal("\"user\""));
        }
        "assistant/message" => {
            if has(data, "message") || !has(data, "content") || !has(data, "provenance") {
                return Ok(());
            }
            let content = remove(data, "content").unwrap_or(Val::literal("null"));
            let mut source = remove(data, "provenance").unwrap_or(Val::Obj(Vec::new()));
            if let Some(members) = source.obj() {
                set(members, "kind", Val::literal("\"model\""));
            }
            let message = vec![
                ("id".into(), Val::string(&legacy_id(sid, seq))),
                ("role".into(), Val::literal("\"assistant\"")),
                ("content".into(), content),
                ("source".into(), source),
            ];
            set(data, "message", Val::Obj(message));
        }
        "tool/result" => {
            if has(data, "message")
                || !has(data, "callId")
                || !has(data, "content")
                || !has(data, "isError")
            {
                return Ok(());
            }
            let call_id = get(data, "callId")
                .and_then(|c| c.as_str())
                .map(|c| c.into_owned());
            let is_error = get(data, "isError").and_then(|e| e.as_bool());
            let (Some(call_id), Some(_)) = (call_id, is_error) else {
                return Ok(());
            };
            let id = match replaced_start {
                None => legacy_id(sid, seq),
                Some(start) => state.message_ids.get(&start).cloned().ok_or_else(|| {
                    malformed_in(
                        0,
                        format!("tool/result {seq} replacement cites a message without identity"),
                    )
                })?,
            };
            let call = remove(data, "callId").unwrap_or(Val::literal("null"));
            let content = remove(data, "content").unwrap_or(Val::literal("null"));
            let is_error = remove(data, "isError").unwrap_or(Val::literal("false"));
            let block = vec![
                ("type".into(), Val::literal("\"tool-result\"")),
                ("toolCallId".into(), call.clone()),
                ("content".into(), content),
                ("isError".into(), is_error),
            ];
            let message = vec![
                ("id".into(), Val::string(&id)),
                ("role".into(), Val::literal("\"user\"")),
                ("content".into(), Val::Arr(vec![Val::Obj(block)])),
                (
                    "source".into(),
                    Val::Obj(vec![
                        ("kind".into(), Val::literal("\"tool\"")),
                        ("callId".into(), Val::string(&call_id)),
                    ]),
                ),
            ];
            set(data, "message", Val::Obj(message));
        }
        _ => {}
    }
    Ok(())
}

fn replacement_start(ev: &mut Ev<'_>) -> Option<u64> {
    let op = ev.get("surfaceOp")?;
    if !op.is_object() || op.get("op")?.as_str().as_deref() != Some("replace") {
        return None;
    }
    op.get("start")?.as_u64()
}

/// The message id an event carries (V0's `eventMessageId`).
fn message_id(ev: &Ev<'_>) -> Option<String> {
    let data = ev.val("data")?;
    let id = if ev.ty == "user/message" {
        data.peek_str("id")
    } else {
        data.peek("message")?.peek("id")?.as_str()
    };
    Some(id?.into_owned())
}

/// The payload rules of DSH's V0 reader that refuse logs sessionlog's lenient V0 import
/// keeps: unknown types, version-2 sub-agent descriptors, request tools that are not schemas.
fn check_payload(ev: &mut Ev<'_>) -> Result<(), Refusal> {
    let seq = ev.seq;
    if !DshFormat::V0.knows(&ev.ty) {
        return Err(unsupported(format!(
            "format v0 contains unknown historical event type {:?} at seq {seq}; migration refuses unknown historical events even when ignorable",
            ev.ty
        )));
    }
    match ev.ty.as_ref() {
        "subagent/descriptor" => {
            let version = ev.field("version");
            let is_three = version.as_ref().is_some_and(|v| v.as_u64() == Some(3));
            if !is_three {
                return match version.and_then(|v| v.as_u64()) {
                    Some(v) => Err(unsupported(format!(
                        "subagent/descriptor {seq} uses unsupported descriptor version {v}"
                    ))),
                    None => Err(malformed_in(
                        0,
                        format!(
                            "subagent/descriptor {seq} version must be a non-negative safe integer"
                        ),
                    )),
                };
            }
        }
        "request/header" => {
            let Some(tools) = ev.field("header").and_then(|h| h.get("tools")) else {
                return Ok(());
            };
            let Some(tools) = tools.arr() else {
                return Err(malformed_in(
                    0,
                    format!("request/header {seq} header tools must be an array"),
                ));
            };
            if let Some(index) = tools.iter().position(|tool| !tool.is_object()) {
                return Err(malformed_in(
                    0,
                    format!("request/header {seq} header tools[{index}] must be a JSON object"),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}
