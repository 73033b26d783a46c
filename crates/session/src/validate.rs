//! Per-event payload rules that do not depend on session state: message shapes of
//! surface events, `request/header` config rules, retired shapes, and the payloads of the
//! newer native types; and the structural rules of native appends ([`check_structure`]),
//! which are functions of the turn tracker's state and the event. The surface rules (seq,
//! replacements) live in the session.

use crate::error::{Error, Rule};
use crate::event::{is_number, Event, SurfaceOp};
use crate::json::{JsonKind, JsonRef};
use crate::repair::TurnTracker;
use crate::version::{FormatVersion, MessageLocation, MessageRule};

fn non_empty_string(value: Option<JsonRef<'_>>) -> bool {
    value
        .and_then(|v| v.as_str())
        .is_some_and(|s| !s.is_empty())
}

/// The message carried by a surface event of `version`, if the type is a surface type.
pub(crate) fn message_of<'a>(version: &FormatVersion, event: &'a Event) -> Option<JsonRef<'a>> {
    let surface = version.surface_type(event.event_type())?;
    message_at(surface.message, event)
}

/// The message of an event whose message lives at `location`.
pub(crate) fn message_at(location: MessageLocation, event: &Event) -> Option<JsonRef<'_>> {
    match location {
        MessageLocation::Data => Some(event.data()),
        MessageLocation::DataMessage => {
            let [message] = event.data_fields(["message"]);
            message
        }
    }
}

/// The values of `keys` in the message of an event whose message lives at `location`,
/// read from the payload index the event's parse made.
pub(crate) fn message_fields<'a, const N: usize>(
    location: MessageLocation,
    event: &'a Event,
    keys: [&str; N],
) -> [Option<JsonRef<'a>>; N] {
    match location {
        MessageLocation::Data => event.data_fields(keys),
        MessageLocation::DataMessage => event.message_fields(keys),
    }
}

/// Checks the message shape of a surface event (spec §3 step 3).
pub(crate) fn check_message(version: &FormatVersion, event: &Event) -> Result<(), Error> {
    let Some(surface) = version.surface_type(event.event_type()) else {
        return Ok(());
    };
    let fail = |detail: &str| {
        Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            Rule::MessageShape,
            detail,
        ))
    };
    if !message_at(surface.message, event).is_some_and(|m| m.is_object()) {
        return fail("the message must be an object");
    }
    let [id, role, content, source, tool_call_id] = message_fields(
        surface.message,
        event,
        ["id", "role", "content", "source", "toolCallId"],
    );
    if !non_empty_string(id) {
        return fail("message.id must be a non-empty string");
    }
    let role = role.and_then(|r| r.as_str());
    let expected_role = match surface.rule {
        MessageRule::Assistant => "assistant",
        MessageRule::System => "system",
        MessageRule::User | MessageRule::ToolResult => "user",
        MessageRule::ToolMessage => "tool",
    };
    if role.as_deref() != Some(expected_role) {
        return fail(&format!("message.role must be {expected_role:?}"));
    }
    if !content.is_some_and(|c| c.is_array()) {
        return fail("message.content must be an array");
    }
    let [kind, provider, model, call_id] = source
        .map(|s| s.fields(["kind", "provider", "model", "callId"]))
        .unwrap_or_default();
    let source_ok = source.is_some_and(|s| s.is_object() && non_empty_string(kind));
    match surface.rule {
        MessageRule::System if source.is_none() => return Ok(()),
        _ if !source_ok => return fail("message.source must be an object with a non-empty kind"),
        _ => {}
    }
    let kind = kind.and_then(|k| k.as_str());
    match surface.rule {
        MessageRule::Assistant => {
            if kind.as_deref() != Some("model")
                || !non_empty_string(provider)
                || !non_empty_string(model)
            {
                return fail("an assistant message needs source {kind:\"model\", provider, model}");
            }
        }
        MessageRule::ToolResult | MessageRule::ToolMessage => {
            let call_id = call_id.and_then(|c| c.as_str());
            if kind.as_deref() != Some("tool") || call_id.as_deref().is_none_or(str::is_empty) {
                return fail("a tool result needs source {kind:\"tool\", callId}");
            }
            if surface.rule == MessageRule::ToolMessage {
                if tool_call_id.and_then(|t| t.as_str()) != call_id {
                    return fail("a V4 tool message needs toolCallId equal to source.callId");
                }
                return Ok(());
            }
            // The blocks as the payload index holds them: a walk would step over the
            // result's whole text twice, once to count the blocks and once for the fields.
            let mut blocks = content.into_iter().flat_map(|c| {
                event.content_blocks(surface.message, c, ["type", "content", "toolCallId"])
            });
            let (Some((_, [block_type, block_content, block_call])), None) =
                (blocks.next(), blocks.next())
            else {
                return fail("a tool result message holds exactly one content block");
            };
            if block_type.and_then(|t| t.as_str()).as_deref() != Some("tool-result")
                || !block_content.is_some_and(|c| c.is_array())
                || block_call.and_then(|t| t.as_str()) != call_id
            {
                return fail("the block must be {type:\"tool-result\", toolCallId: source.callId, content: []}");
            }
        }
        MessageRule::User | MessageRule::System => {}
    }
    Ok(())
}

/// The payload rules of an event's type, which depend on the event and the session's rules
/// alone, in the order a fold checks them: retired shapes, message shape, `request/header`
/// config, the newer native payloads.
pub(crate) fn check_payload(version: &FormatVersion, event: &Event) -> Result<(), Error> {
    check_retired(event)?;
    check_message(version, event)?;
    check_request_header(event)?;
    check_native(version, event)
}

/// Refuses the shapes DSH retired (`request/header-delta`, `mode/set`, fallback headers).
pub(crate) fn check_retired(event: &Event) -> Result<(), Error> {
    let t = event.event_type();
    let retired = t == "request/header-delta"
        || t == "mode/set"
        || (t == "request/header"
            && event
                .data()
                .get("reason")
                .and_then(|r| r.as_str())
                .as_deref()
                == Some("fallback"));
    if retired {
        return Err(Error::invalid(
            event.seq().get(),
            t,
            Rule::RetiredShape,
            "this legacy shape is no longer supported by DSH V0",
        ));
    }
    Ok(())
}

/// The `request/header` config rules (spec §3 step 6).
pub(crate) fn check_request_header(event: &Event) -> Result<(), Error> {
    if event.event_type() != "request/header" {
        return Ok(());
    }
    let fail = |detail: &str| {
        Err(Error::invalid(
            event.seq().get(),
            "request/header",
            Rule::RequestHeader,
            detail,
        ))
    };
    let config = event.data().get("header").and_then(|h| h.get("config"));
    let Some(config) = config.filter(|c| c.is_object()) else {
        return fail("header.config must be an object");
    };
    if !non_empty_string(config.get("provider")) || !non_empty_string(config.get("model")) {
        return fail("request/header lacks provider/model: header.config needs a non-empty provider and model");
    }
    if let Some(effort) = config.get("reasoningEffort") {
        if !non_empty_string(Some(effort)) {
            return fail("header.config.reasoningEffort must be a non-empty string");
        }
    }
    if let Some(defaults) = event
        .data()
        .get("header")
        .and_then(|h| h.get("adapterDefaults"))
    {
        if !defaults.is_object() {
            return fail("header.adapterDefaults must be an object");
        }
        for (key, value) in defaults.members() {
            if key != "reasoningEffort" && key != "maxTokens" {
                return fail(&format!("header.adapterDefaults has unknown key {key:?}"));
            }
            if value.as_bool() != Some(true) {
                return fail("header.adapterDefaults values must be true");
            }
            if config.get(&key).is_none() {
                return fail(&format!(
                    "header.adapterDefaults.{key} names a field absent from config"
                ));
            }
        }
    }
    Ok(())
}

/// A compact timed stream record: `{time0, dt:[…], chunks:[{type,…},…]}` with one `dt`
/// per chunk after the first, like DSH's packed chunk rows.
fn check_stream_record(record: JsonRef<'_>) -> Result<(), &'static str> {
    if !record.has_exact_keys(&["time0", "dt", "chunks"]) {
        return Err("stream must have exactly the keys time0, dt, chunks");
    }
    if record
        .get("time0")
        .and_then(|t| t.as_safe_integer())
        .is_none()
    {
        return Err("stream.time0 must be a safe integer");
    }
    let chunks = record
        .get("chunks")
        .filter(|c| c.is_array())
        .ok_or("stream.chunks must be an array")?;
    let dt = record
        .get("dt")
        .filter(|d| d.is_array())
        .ok_or("stream.dt must be an array")?;
    if dt.elements().any(|d| d.as_safe_integer().is_none()) {
        return Err("stream.dt entries must be safe integers");
    }
    let count = chunks.elements().count();
    if chunks
        .elements()
        .any(|c| c.get("type").is_none_or(|t| t.kind() != JsonKind::String))
    {
        return Err("stream.chunks entries must be objects with a string type");
    }
    if dt.elements().count() + 1 != count.max(1) {
        return Err("stream.dt must have one entry per chunk after the first");
    }
    Ok(())
}

/// Payload rules of the native types newer than V0.
pub(crate) fn check_native(version: &FormatVersion, event: &Event) -> Result<(), Error> {
    let fail = |detail: &str| {
        Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            Rule::Payload,
            detail,
        ))
    };
    // Only the types with native rules have their payload looked into, through the index
    // its parse made (a walk of the payload would step over the whole message to find no
    // `stream`).
    match event.event_type() {
        "assistant/message" if version.settlement_stream_record => {
            let [record] = event.data_fields(["stream"]);
            if let Some(record) = record {
                check_stream_record(record).or_else(fail)?;
            }
        }
        "assistant/attempt" if version.attempts => {
            let [turn, step, outcome, record] =
                event.data_fields(["turn", "step", "outcome", "stream"]);
            if !is_number(turn) || !is_number(step) {
                return fail("an attempt needs numeric turn and step");
            }
            let outcome = outcome.and_then(|o| o.as_str());
            if !matches!(outcome.as_deref(), Some("error" | "cancelled")) {
                return fail("attempt.outcome must be \"error\" or \"cancelled\"");
            }
            if let Some(record) = record {
                check_stream_record(record).or_else(fail)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether `message` is a DSH V4 tool message (`role: "tool"`), which holds a tool result's
/// blocks as its own content instead of wrapping them in one `tool-result` block.
pub(crate) fn is_tool_message(message: JsonRef<'_>) -> bool {
    message.get("role").and_then(|r| r.as_str()).as_deref() == Some("tool")
}

/// Whether a tool-result replacement changes only `message.content[0].content` (for a V4
/// `role: "tool"` message, `message.content`), key order ignored, as DSH's pruner guarantees.
pub(crate) fn only_tool_content_differs(original: JsonRef<'_>, replacement: JsonRef<'_>) -> bool {
    fn same_except(
        a: JsonRef<'_>,
        b: JsonRef<'_>,
        skip: &str,
        inner: &dyn Fn(JsonRef<'_>, JsonRef<'_>) -> bool,
    ) -> bool {
        if !a.is_object() || !b.is_object() || a.members().count() != b.members().count() {
            return false;
        }
        a.members().all(|(key, value)| match b.get(&key) {
            None => false,
            Some(theirs) if key == skip => inner(value, theirs),
            Some(theirs) => value.deep_equal(&theirs),
        })
    }
    let block = |a: JsonRef<'_>, b: JsonRef<'_>| same_except(a, b, "content", &|_, _| true);
    let content = |a: JsonRef<'_>, b: JsonRef<'_>| {
        let (mut xa, mut xb) = (a.elements(), b.elements());
        match (xa.next(), xb.next(), xa.next(), xb.next()) {
            (Some(x), Some(y), None, None) => block(x, y),
            _ => false,
        }
    };
    // A V4 tool message holds the result's content itself; an older one wraps it in one
    // `tool-result` block.
    let message = |a: JsonRef<'_>, b: JsonRef<'_>| {
        if is_tool_message(a) {
            same_except(a, b, "content", &|_, _| true)
        } else {
            same_except(a, b, "content", &content)
        }
    };
    same_except(original, replacement, "message", &message)
}

/// Which rules an event is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleSet {
    /// DeepSeek Harness's reader (0.1.0-rc.8, whose outputs the fixture goldens pin): what a
    /// load or an import of a DSH log accepts.
    Dsh,
    /// DSH's reader plus the structural rules of native appends: turn/step nesting, typed
    /// turn and step numbers, one `turn/end` per turn, `tool/call` and `tool/result` only for
    /// announced calls, no surface event before the first `step/start`
    /// (see `format-spec/events.md`, "Structural rules").
    Native,
}

/// The value of `key` as a turn or step number (a non-negative safe integer, as DSH 0.2's
/// reader requires), written as the tracker keeps it.
fn number(event: &Event, value: Option<JsonRef<'_>>, key: &str) -> Result<u64, Error> {
    match value.and_then(|v| v.as_seq()) {
        Some(n) => Ok(n),
        None => Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            Rule::Payload,
            format!("data.{key} must be a non-negative integer (a turn or step number)"),
        )),
    }
}

/// The `turn` and `step` numbers of `event`'s payload, read in one lookup.
fn turn_and_step(event: &Event) -> Result<(u64, u64), Error> {
    let [turn, step] = event.data_fields(["turn", "step"]);
    Ok((number(event, turn, "turn")?, number(event, step, "step")?))
}

/// Whether the tracker's open turn or step (kept as `JSON.stringify` writes it) is `n`.
fn names(open: &str, n: u64) -> bool {
    open.parse::<u64>() == Ok(n)
}

/// The turn and step numbers of an event that belongs to the open step, checked against it.
fn check_in_open_step(tracker: &TurnTracker, event: &Event) -> Result<(), Error> {
    let (turn, step) = turn_and_step(event)?;
    let fail = |detail: String| {
        Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            Rule::Nesting,
            detail,
        ))
    };
    match (tracker.open_turn(), tracker.open_step()) {
        (None, _) => fail("no turn is open: append turn/start and step/start first".into()),
        (Some(_), None) => fail("no step is open: append step/start first".into()),
        (Some(open_turn), Some(open_step))
            if !names(open_turn, turn) || !names(open_step, step) =>
        {
            fail(format!(
                "it names turn {turn} step {step}, but turn {open_turn} step {open_step} is open"
            ))
        }
        _ => Ok(()),
    }
}

/// That `turn` is the open turn; `when_none` says what is wrong when no turn is open.
fn check_open_turn(
    tracker: &TurnTracker,
    event: &Event,
    turn: u64,
    when_none: impl FnOnce() -> String,
) -> Result<(), Error> {
    let detail = match tracker.open_turn() {
        None => when_none(),
        Some(open) if !names(open, turn) => {
            format!("it names turn {turn}, but turn {open} is open")
        }
        Some(_) => return Ok(()),
    };
    Err(Error::invalid(
        event.seq().get(),
        event.event_type(),
        Rule::Nesting,
        detail,
    ))
}

/// The call a `tool/result` or `tool/call` names.
fn call_id_of(event: &Event) -> Option<std::borrow::Cow<'_, str>> {
    let id = match event.event_type() {
        "tool/call" => event.data_fields(["callId"])[0],
        _ => event.message_fields(["source"])[0].and_then(|s| s.get("callId")),
    };
    id.and_then(|i| i.as_str())
}

/// The structural rules of native appends, over the turn tracker's state before `event`
/// (spec: format-spec/events.md#structural-rules):
///
/// - `turn/start` opens a turn only when none is open; `turn/end` closes the open turn (so a
///   turn ends once); `step/start` and `step/end` nest inside it;
/// - `turn` and `step` are non-negative integers and name the open turn and step;
/// - settlements, chunks, attempts and `tool/call` belong to the open step; a `tool/call`
///   names a call announced by a settlement of this step;
/// - an appended `tool/result` answers an announced, unanswered call of the open turn;
/// - an appended `user/message` belongs to an open turn;
/// - no surface event (other than `system/message`) comes before the first `step/start`
///   (DSH 0.2 refuses such a log: the event has no system head).
///
/// DSH 0.1.0-rc.8 accepted logs that break these rules, so a load or import does not apply
/// them.
pub(crate) fn check_structure(
    tracker: &TurnTracker,
    version: &FormatVersion,
    event: &Event,
) -> Result<(), Error> {
    let fail = |rule: Rule, detail: String| {
        Err(Error::invalid(
            event.seq().get(),
            event.event_type(),
            rule,
            detail,
        ))
    };
    let appended = event.surface_op() == Some(SurfaceOp::Append);
    match event.event_type() {
        "turn/start" => {
            let turn = number(event, event.data_fields(["turn"])[0], "turn")?;
            if !event.data().has_exact_keys(&["turn"]) {
                return fail(Rule::Payload, "turn/start data is exactly {turn}".into());
            }
            if let Some(open) = tracker.open_turn() {
                return fail(
                    Rule::Nesting,
                    format!("turn {open} is still open: end it with turn/end before starting turn {turn}"),
                );
            }
        }
        "turn/end" => {
            let [turn, reason] = event.data_fields(["turn", "reason"]);
            let turn = number(event, turn, "turn")?;
            let reason_kind = reason.and_then(|r| r.get("kind")).and_then(|k| k.as_str());
            if reason_kind.is_none_or(|k| k.is_empty()) {
                return fail(
                    Rule::Payload,
                    "turn/end needs a reason with a non-empty kind".into(),
                );
            }
            check_open_turn(tracker, event, turn, || {
                "no turn is open (each turn ends once, after its turn/start)".to_owned()
            })?;
        }
        "step/start" => {
            let (turn, step) = turn_and_step(event)?;
            check_open_turn(tracker, event, turn, || {
                format!("turn {turn} is not open: append its turn/start first")
            })?;
            if let Some(open_step) = tracker.open_step() {
                return fail(
                    Rule::Nesting,
                    format!("step {open_step} is still open: end it with step/end before starting step {step}"),
                );
            }
        }
        "step/end" | "assistant/chunk" | "assistant/attempt" => {
            check_in_open_step(tracker, event)?;
        }
        "assistant/message" if appended => check_in_open_step(tracker, event)?,
        "tool/call" => {
            check_in_open_step(tracker, event)?;
            let call = call_id_of(event).unwrap_or_default();
            if tracker.pending_call(&call).is_none() {
                return fail(
                    Rule::ToolPairing,
                    format!("call {call:?} was not announced by a tool-call block of an assistant/message in this step, or was already answered"),
                );
            }
        }
        "tool/result" if appended => {
            let (turn, step) = turn_and_step(event)?;
            let call = call_id_of(event).unwrap_or_default();
            check_open_turn(tracker, event, turn, || {
                "no turn is open: a tool result belongs to the turn of its call".to_owned()
            })?;
            match tracker.pending_call(&call) {
                None => {
                    return fail(
                        Rule::ToolPairing,
                        format!("it answers call {call:?}, which no assistant/message of this turn announced or which already has a result"),
                    )
                }
                Some((call_step, _)) if !names(call_step, step) => {
                    return fail(
                        Rule::Nesting,
                        format!("it names step {step}, but call {call:?} was announced in step {call_step}"),
                    )
                }
                Some(_) => {}
            }
        }
        "user/message" if appended && !tracker.turn_open() => {
            return fail(
                Rule::Nesting,
                "no turn is open: a user message belongs to a turn (append turn/start first)"
                    .into(),
            );
        }
        _ => {}
    }
    let surface = version.surface_type(event.event_type());
    if surface.is_some_and(|s| s.rule != MessageRule::System) && !tracker.has_stepped() {
        return fail(
            Rule::SystemHead,
            "a surface event before the first step/start has no system head (DeepSeek Harness 0.2 refuses it): append step/start first".into(),
        );
    }
    Ok(())
}
