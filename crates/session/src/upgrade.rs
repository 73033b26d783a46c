//! In-memory upgrade of legacy in-file shapes at load (spec §9).
//!
//! The stored bytes never change: the upgraded payload (and type, for
//! `steering/message`) is kept beside the raw envelope, so export still reproduces the
//! file while validation, the surface and `derive_messages` see the current shape.
//! Key orders follow JavaScript object spread: kept keys stay in place, added keys go last.

use crate::error::Error;
use crate::event::{Event, SurfaceOp, Upgrade};
use crate::json::{JsonRef, ObjectWriter};
use crate::state::LookBack;

fn legacy_id(session_id: &str, seq: u64) -> String {
    format!("legacy-message:{session_id}:{seq}")
}

fn safe_at_least(value: Option<JsonRef<'_>>, min: i64) -> bool {
    value
        .and_then(|v| v.as_safe_integer())
        .is_some_and(|v| v >= min)
}

/// Copies every member of `object` except `skip`, replacing members named in `replace`.
fn spread(
    mut out: ObjectWriter,
    object: JsonRef<'_>,
    skip: &[&str],
    replace: &[(&str, &str)],
) -> ObjectWriter {
    for (key, value) in object.members() {
        if skip.contains(&key.as_ref()) {
            continue;
        }
        let raw = replace
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(value.raw(), |(_, v)| *v);
        out = out.raw(&key, raw);
    }
    out
}

/// The message id a current-shape event carries.
fn message_id(event: &Event) -> Option<String> {
    let data = event.data();
    let message = if event.event_type() == "user/message" {
        Some(data)
    } else {
        data.get("message")
    };
    message?.get("id")?.as_str().map(|s| s.into_owned())
}

/// Whether loading would upgrade `event` from an older in-file shape (spec §9), or refuse it as
/// a malformed one. Projections that fold single events without the rest of the session use
/// this to fall back to a full fold for sessions written in older shapes.
pub fn needs_upgrade(event: &Event) -> bool {
    let data = event.stored_data();
    match event.stored_type() {
        "steering/message" => true,
        t @ ("user/message" | "assistant/message" | "tool/result") => {
            legacy_message_shape(t, data, event.stored_data_fields(LEGACY_SHAPE_KEYS))
        }
        // Rare and small: ask the upgrade itself.
        "turn/start" | "turn/end" => {
            let mut one = event.clone();
            upgrade_event(&mut one, &NOTHING_BEFORE, "").map_or(true, |()| one.is_upgraded())
        }
        _ => false,
    }
}

/// Whether the payload of a message event has a shape from before message ids (spec §9).
/// Every payload key [`legacy_message_shape`] looks at, read in one pass.
const LEGACY_SHAPE_KEYS: [&str; 8] = [
    "message",
    "content",
    "id",
    "role",
    "source",
    "provenance",
    "callId",
    "isError",
];

/// Whether `data`, whose [`LEGACY_SHAPE_KEYS`] hold `fields`, is a message shape from
/// before message ids.
fn legacy_message_shape(
    event_type: &str,
    data: JsonRef<'_>,
    fields: [Option<JsonRef<'_>>; 8],
) -> bool {
    if !data.is_object() {
        return false;
    }
    let [message, content, id, role, source, provenance, call_id, is_error] = fields;
    message.is_none()
        && content.is_some()
        && match event_type {
            "user/message" => id.is_none() && role.is_none() && source.is_some(),
            "assistant/message" => provenance.is_some(),
            "tool/result" => call_id.is_some() && is_error.is_some(),
            _ => false,
        }
}

/// The stored types that may carry a legacy shape; every other event loads as stored.
const UPGRADABLE_TYPES: [&str; 6] = [
    "turn/start",
    "turn/end",
    "steering/message",
    "user/message",
    "assistant/message",
    "tool/result",
];

/// A session with no events before the one being upgraded.
const NOTHING_BEFORE: &[Event] = &[];

/// Upgrades a stored `event` of session `session_id` in place from an older in-file shape
/// (spec §9), given the already-upgraded events before it, read through `past`; an event
/// in the current shape is left as it is. Only a legacy tool-result replacement looks back (at the node it replaces, whose
/// message id it takes); every other shape is upgraded from the event alone.
pub fn upgrade_event(
    event: &mut Event,
    past: &dyn LookBack,
    session_id: &str,
) -> Result<(), Error> {
    if !UPGRADABLE_TYPES.contains(&event.stored_type()) {
        return Ok(());
    }
    let seq = event.seq().get();
    let stored_type = event.stored_type();
    let malformed = |detail: &str| Error::Legacy {
        seq: crate::event::Seq(seq),
        event_type: stored_type.to_owned(),
        detail: detail.to_owned(),
    };
    let data = event.stored_data();
    let mut event_type: Option<Box<str>> = None;
    let mut new_data: Option<String> = None;

    match stored_type {
        "turn/start" if data.get("trigger").is_some() => {
            let trigger_ok = data
                .get("trigger")
                .filter(|t| t.is_object())
                .and_then(|t| t.get("kind"))
                .and_then(|k| k.as_str())
                .is_some_and(|k| !k.is_empty());
            if !safe_at_least(data.get("turn"), 1)
                || !data.has_exact_keys(&["turn", "trigger"])
                || !trigger_ok
            {
                return Err(malformed("expected {turn, trigger{kind}}"));
            }
            new_data = Some(spread(ObjectWriter::new(), data, &["trigger"], &[]).finish());
        }
        "turn/end" if data.is_object() => new_data = upgrade_turn_end(data).map_err(&malformed)?,
        "steering/message" => {
            event_type = Some("user/message".into());
            let turn_ok = safe_at_least(data.get("turn"), i64::MIN);
            match data.get("message").filter(|m| m.is_object()) {
                Some(message) if turn_ok && data.has_exact_keys(&["turn", "message"]) => {
                    new_data = Some(message.raw().to_owned());
                }
                _ if turn_ok && data.has_exact_keys(&["turn", "content", "source"]) => {
                    let out = spread(ObjectWriter::new(), data, &["turn"], &[]);
                    new_data = Some(
                        out.string("id", &legacy_id(session_id, seq))
                            .string("role", "user")
                            .finish(),
                    );
                }
                _ => {
                    return Err(malformed(
                        "expected {turn, message} or {turn, content, source}",
                    ))
                }
            }
        }
        _ => {}
    }

    // Message shapes from before message ids (applies after a steering upgrade too).
    let current_type = event_type.as_deref().unwrap_or(stored_type);
    let upgraded_data;
    let data = match &new_data {
        Some(text) => {
            upgraded_data = text.clone();
            JsonRef::new(&upgraded_data)
        }
        None => data,
    };
    let legacy = |t: &str| {
        let fields = match &new_data {
            Some(_) => data.fields(LEGACY_SHAPE_KEYS),
            None => event.stored_data_fields(LEGACY_SHAPE_KEYS),
        };
        legacy_message_shape(t, data, fields)
    };
    match current_type {
        "user/message" if legacy("user/message") => {
            let out = spread(ObjectWriter::new(), data, &[], &[]);
            new_data = Some(
                out.string("id", &legacy_id(session_id, seq))
                    .string("role", "user")
                    .finish(),
            );
        }
        "assistant/message" if legacy("assistant/message") => {
            let provenance = data.get("provenance").filter(|p| p.is_object());
            let mut source = ObjectWriter::new();
            let mut has_kind = false;
            for (key, value) in provenance.iter().flat_map(|p| p.members()) {
                if key == "kind" {
                    has_kind = true;
                    source = source.string("kind", "model");
                } else {
                    source = source.raw(&key, value.raw());
                }
            }
            if !has_kind {
                source = source.string("kind", "model");
            }
            let message = ObjectWriter::new()
                .string("id", &legacy_id(session_id, seq))
                .string("role", "assistant")
                .raw("content", data.get("content").map_or("null", |c| c.raw()))
                .raw("source", &source.finish())
                .finish();
            let out = spread(ObjectWriter::new(), data, &["content", "provenance"], &[]);
            new_data = Some(out.raw("message", &message).finish());
        }
        "tool/result" if legacy("tool/result") => {
            let call_id = data.get("callId").map_or("null", |c| c.raw());
            let id = match event.surface_op() {
                Some(SurfaceOp::Replace { start, .. }) if start.get() < seq => {
                    past.event_at(start)?.and_then(|e| message_id(&e))
                }
                Some(SurfaceOp::Replace { .. }) => None,
                _ => Some(legacy_id(session_id, seq)),
            };
            let block = ObjectWriter::new()
                .string("type", "tool-result")
                .raw("toolCallId", call_id)
                .raw("content", data.get("content").map_or("null", |c| c.raw()))
                .raw("isError", data.get("isError").map_or("null", |c| c.raw()))
                .finish();
            let source = ObjectWriter::new()
                .string("kind", "tool")
                .raw("callId", call_id)
                .finish();
            let mut message = ObjectWriter::new();
            if let Some(id) = id {
                message = message.string("id", &id);
            }
            let message = message
                .string("role", "user")
                .raw("content", &format!("[{block}]"))
                .raw("source", &source)
                .finish();
            let out = spread(
                ObjectWriter::new(),
                data,
                &["callId", "content", "isError"],
                &[],
            );
            new_data = Some(out.raw("message", &message).finish());
        }
        _ => {}
    }

    if let Some(data) = new_data {
        event.upgrade = Some(Box::new(Upgrade {
            event_type,
            data: data.into(),
        }));
    }
    Ok(())
}

/// Old `turn/end` reasons become the current ones; `Ok(None)` when already current.
fn upgrade_turn_end(data: JsonRef<'_>) -> Result<Option<String>, &'static str> {
    let reason = data.get("reason").filter(|r| r.is_object());
    let kind = reason.and_then(|r| r.get("kind")).and_then(|k| k.as_str());
    let (Some(reason), Some(kind)) = (reason, kind) else {
        return Err("expected {turn, reason{kind}}");
    };
    // The turn is whatever its `turn/start` said (restart repair copies it), so any value
    // is accepted here; only the shape of the reason decides.
    if data.get("turn").is_none() || !data.has_exact_keys(&["turn", "reason"]) {
        return Err("expected {turn, reason{kind}}");
    }
    let only_kind = reason.has_exact_keys(&["kind"]);
    let replaced = match kind.as_ref() {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            return if only_kind {
                Ok(None)
            } else {
                Err("this reason kind takes no other keys")
            };
        }
        "aborted" if reason.get("reason").is_some() => return Ok(None),
        "aborted" | "disposed" if only_kind => {
            let inner = if kind == "aborted" {
                "legacy"
            } else {
                "disposed"
            };
            let inner = ObjectWriter::new().string("kind", inner).finish();
            ObjectWriter::new()
                .string("kind", "aborted")
                .raw("reason", &inner)
                .finish()
        }
        "aborted" | "disposed" => return Err("a legacy abort reason takes no other keys"),
        "error" if reason.get("error").is_some() => return Ok(None),
        "error" => upgrade_error_reason(reason)?,
        _ => return Ok(None),
    };
    Ok(Some(
        spread(ObjectWriter::new(), data, &[], &[("reason", &replaced)]).finish(),
    ))
}

fn upgrade_error_reason(reason: JsonRef<'_>) -> Result<String, &'static str> {
    if !safe_at_least(reason.get("step"), 0) {
        return Err("a legacy error reason needs a step");
    }
    let is_str = |v: Option<JsonRef<'_>>| v.is_some_and(|v| v.as_str().is_some());
    if let Some(failure) = reason.get("failure").filter(|f| f.is_object()) {
        let keys_ok = failure.members().all(|(k, _)| {
            matches!(
                k.as_ref(),
                "message" | "code" | "status" | "providerRetryAfterMs" | "requestId"
            )
        });
        if reason.has_exact_keys(&["kind", "step", "failure"])
            && keys_ok
            && is_str(failure.get("message"))
            && is_str(failure.get("code"))
        {
            return Ok(ObjectWriter::new()
                .string("kind", "error")
                .raw("error", failure.raw())
                .finish());
        }
    }
    let has_code = reason.get("code").is_some();
    let keys: &[&str] = if has_code {
        &["kind", "step", "message", "code"]
    } else {
        &["kind", "step", "message"]
    };
    if !reason.has_exact_keys(keys)
        || !is_str(reason.get("message"))
        || (has_code && !is_str(reason.get("code")))
    {
        return Err(
            "a legacy error reason is {kind, step, message, code?} or {kind, step, failure}",
        );
    }
    let code = reason.get("code").map_or("\"UNKNOWN\"", |c| c.raw());
    let error = ObjectWriter::new()
        .raw("message", reason.get("message").map_or("\"\"", |m| m.raw()))
        .raw("code", code)
        .finish();
    Ok(ObjectWriter::new()
        .string("kind", "error")
        .raw("error", &error)
        .finish())
}
