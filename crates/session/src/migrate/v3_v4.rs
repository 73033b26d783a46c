//! V3 -> V4: tool results become first-class `role: "tool"` messages; plugin-wrapped
//! message sources name their producer (`{kind: "plugin", plugin: "compact"}` becomes
//! `{kind: "compact-checkpoint"}`, the system prompt's becomes `system-prompt`); content
//! block and stream tags outside V3's set are namespaced `plugin:TAG`, as are unknown
//! ignorable event types; a turn a queued message interrupted gets its `turn/end`.

use std::borrow::Cow;

use super::children::{catalog_additions, CatalogRefusal, ChildFact};
use super::value::{get, has, remove, set, text_of, Obj, Peek, Val};
use super::{
    interrupted_turn_end, malformed_in, queues_next_turn, unsupported, Ev, HeaderFacts, Refusal,
    SeqMap, Step,
};
use crate::version::DshFormat;

const BLOCK_TYPES: [&str; 6] = [
    "text",
    "reasoning",
    "image",
    "file",
    "tool-call",
    "tool-result",
];

const RENAMED_PRODUCERS: [(&str, &str); 5] = [
    ("compact", "compact-checkpoint"),
    ("tools-code-mode", "ptc-mode"),
    ("tools-ptc", "ptc-mode"),
    ("dsh-compaction-basic", "compact-basic"),
    ("@deepseek-ai/dsh-system-prompt", "runtime-context"),
];

const SAME_NAME_PRODUCERS: [&str; 25] = [
    "agent-instructions",
    "session-reference",
    "team-message",
    "goal",
    "skill-invocation",
    "skill-catalog",
    "coordinator",
    "subagent-report",
    "subagent-settled",
    "webhook",
    "agent-message",
    "model-selection",
    "plan-mode",
    "time-context",
    "tmux-context",
    "user-approval",
    "repeat-tool-reminder",
    "tool-cordis",
    "cordis-host-runner",
    "tool-goal",
    "tool-jobs",
    "hooks-codex",
    "hooks-claude-code",
    "schedule",
    "dsh-session-title-llm",
];

pub(super) struct Stage<'s> {
    mapping: SeqMap,
    turn: Option<u64>,
    step_open: bool,
    next_turn_spliced: bool,
    next_seq: u64,
    /// The parent's children, whose catalog entries the end of the log gets.
    children: &'s [ChildFact],
    /// The `subagent/catalog` payloads after the inherited cut, and (with children) the time
    /// of the last source event (the header's creation time before the first).
    catalogs: Vec<String>,
    time: String,
}

impl<'s> Stage<'s> {
    /// The stage for a session of `events` events with the header facts `header`.
    pub(super) fn new(header: &'s HeaderFacts, events: usize) -> Stage<'s> {
        Stage {
            children: &header.children,
            catalogs: Vec::new(),
            time: header.created_at.to_string(),
            mapping: SeqMap::new(
                events,
                3,
                "V3 reference must name an earlier source event",
                "V3 event references must be an array",
            ),
            turn: None,
            step_open: false,
            next_turn_spliced: false,
            next_seq: 0,
        }
    }
}

impl<'a> Step<'a> for Stage<'_> {
    fn push(&mut self, mut ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        self.observe_catalog(&mut ev);
        if let Some(turn) = self.observe_restart(&mut ev) {
            out.push(interrupted_turn_end(
                self.next_seq,
                ev.time(),
                Val::int(turn),
            ));
            self.next_seq += 1;
        }
        let target = self.next_seq;
        self.next_seq += 1;
        let ignorable = ev.get("ignorable").and_then(|v| v.as_bool()) == Some(true);
        if !DshFormat::V3.knows(&ev.ty) {
            if !ignorable {
                return Err(unsupported(format!(
                    "format v3 contains unknown event type {:?} at seq {}",
                    ev.ty, ev.seq
                )));
            }
            let namespaced = format!("plugin:{}", ev.ty);
            ev.ty = Cow::Owned(namespaced.clone());
            set(&mut ev.env, "type", Val::string(&namespaced));
            set(&mut ev.env, "ignorable", Val::literal("true"));
            if ev.seq != target {
                ev.set_seq(target);
            }
            self.mapping.push(target);
            out.push(ev);
            return Ok(());
        }
        if ev.seq != target {
            self.remap(&mut ev, target)?;
        }
        self.mapping.push(target);
        let seq = ev.seq;
        for_each_message(&mut ev, &mut |message| rewrite_source(message, seq))?;
        lift_tool_result(&mut ev)?;
        migrate_content(&mut ev)?;
        out.push(ev);
        Ok(())
    }

    /// DSH's end of the stage: the parent's own catalog checked, then a catalog entry for
    /// each child it lacks, at the time of the last source event.
    fn finish(&mut self, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        if self.children.is_empty() && self.catalogs.is_empty() {
            return Ok(());
        }
        let added = catalog_additions(&self.catalogs, self.children).map_err(|r| match r {
            CatalogRefusal::Unsupported(message) => unsupported(message),
            CatalogRefusal::Malformed(message) => malformed_in(3, message),
        })?;
        for data in added {
            out.push(Ev::new(
                "subagent/catalog",
                self.next_seq,
                Val::Text(self.time.clone()),
                Val::Text(data),
            ));
            self.next_seq += 1;
        }
        Ok(())
    }
}

impl Stage<'_> {
    /// Keeps what the end of the stage needs of a source event: the parent's own catalog
    /// payloads after the inherited cut (an inherited `session/end-seed` starts them anew),
    /// and its time when children get entries.
    fn observe_catalog(&mut self, ev: &mut Ev<'_>) {
        // Only entries added for children take the time; a parent's own catalog is checked
        // whether or not children are given, as DSH checks it.
        if !self.children.is_empty() {
            if let Some(time) = ev.val("time").map(Val::to_text) {
                self.time = time;
            }
        }
        match ev.ty.as_ref() {
            "session/end-seed" => {
                let inherited = ev
                    .field("inherited")
                    .is_some_and(|v| v.as_bool() == Some(true));
                if inherited {
                    self.catalogs.clear();
                }
            }
            "subagent/catalog" => {
                if let Some(data) = ev.val("data") {
                    self.catalogs.push(data.to_text());
                }
            }
            _ => {}
        }
    }

    fn observe_restart(&mut self, ev: &mut Ev<'_>) -> Option<u64> {
        let turn_field = if ev.ty == "turn/start" {
            ev.field("turn").and_then(|t| t.as_u64())
        } else {
            None
        };
        let interrupted = match (ev.ty.as_ref(), self.turn) {
            ("turn/start", Some(open))
                if !self.step_open && self.next_turn_spliced && turn_field == Some(open + 1) =>
            {
                Some(open)
            }
            _ => None,
        };
        self.next_turn_spliced = queues_next_turn(ev);
        match ev.ty.as_ref() {
            "turn/start" if turn_field.is_some() => self.turn = turn_field,
            "turn/end" => self.turn = None,
            "step/start" => self.step_open = true,
            "step/end" => self.step_open = false,
            _ => {}
        }
        interrupted
    }

    /// DSH's `remapV3References` for an event that moved (after an inserted `turn/end`).
    fn remap(&self, ev: &mut Ev<'_>, target: u64) -> Result<(), Refusal> {
        let seq = ev.seq;
        self.mapping.payload(ev, seq)?;
        if ev.ty == "image/offload" {
            let mut targets = ev
                .field("targets")
                .and_then(Val::arr)
                .cloned()
                .unwrap_or_default();
            for item in &mut targets {
                let mapped = self
                    .mapping
                    .one(item.get("seq").and_then(|v| v.as_u64()), seq)?;
                if let Some(members) = item.obj() {
                    set(members, "seq", Val::int(mapped));
                }
            }
            ev.set_field("targets", Val::Arr(targets));
        }
        ev.set_seq(target);
        self.mapping.envelope(ev, seq, ("startSeq", "endSeq"))
    }
}

/// Visits each message an event's payload carries (DSH's `mapEventMessages`).
fn for_each_message<'a>(
    ev: &mut Ev<'a>,
    visit: &mut dyn FnMut(&mut Val<'a>) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    let ty = ev.ty.clone();
    match ty.as_ref() {
        "user/message" => match ev.get("data") {
            Some(data) if data.is_object() => visit(data),
            _ => Ok(()),
        },
        "developer/message" | "system/message" | "assistant/message" | "tool/result" => {
            match ev.field("message") {
                Some(message) if message.is_object() => visit(message),
                _ => Err(malformed_in(3, format!("{ty} requires a message"))),
            }
        }
        "agent/inbox/spliced" | "session/title-llm-request" => {
            let key = if ty == "agent/inbox/spliced" {
                "inserted"
            } else {
                "messages"
            };
            let Some(messages) = ev.field(key).and_then(Val::arr) else {
                return Err(malformed_in(3, format!("{ty} requires message array")));
            };
            messages.iter_mut().try_for_each(visit)
        }
        _ => Ok(()),
    }
}

fn producer_kind(plugin: &str, role: Option<&str>) -> String {
    if plugin == "@deepseek-ai/dsh-system-prompt" && role == Some("system") {
        return "system-prompt".to_owned();
    }
    if let Some((_, kind)) = RENAMED_PRODUCERS.iter().find(|(p, _)| *p == plugin) {
        return (*kind).to_owned();
    }
    if SAME_NAME_PRODUCERS.contains(&plugin) {
        return plugin.to_owned();
    }
    format!("plugin:{plugin}")
}

/// DSH's `rewriteV3MessageSource`: a plugin source names its producer kind instead.
fn rewrite_source(message: &mut Val<'_>, seq: u64) -> Result<(), Refusal> {
    // Most sources name their kind already; only a plugin source is opened up and rewritten.
    let kind = message
        .peek("source")
        .and_then(|s| s.peek("kind"))
        .and_then(|k| k.as_str());
    if kind.is_some_and(|k| !k.is_empty() && k != "plugin") {
        return Ok(());
    }
    let role = message
        .get("role")
        .and_then(|r| r.as_str())
        .map(|r| r.into_owned());
    let Some(source) = message.get("source").filter(|s| s.is_object()) else {
        return Ok(());
    };
    let Some(members) = source.obj() else {
        return Ok(());
    };
    let kind = get(members, "kind")
        .and_then(|k| k.as_str())
        .map(|k| k.into_owned());
    match kind.as_deref() {
        None | Some("") => Err(malformed_in(
            3,
            format!("message source at seq {seq} requires a nonempty kind"),
        )),
        Some("plugin") => {
            let Some(plugin) = get(members, "plugin")
                .and_then(|p| p.as_str())
                .map(|p| p.into_owned())
            else {
                return Err(malformed_in(
                    3,
                    format!(
                        "plugin source at seq {seq} is not canonical: plugin requires a string"
                    ),
                ));
            };
            let kind = Val::string(&producer_kind(&plugin, role.as_deref()));
            if members.len() == 2 {
                *members = vec![("kind".into(), kind)];
            } else {
                remove(members, "plugin");
                set(members, "kind", kind);
            }
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

/// Members of `value` other than `known`, renamed `plugin:OWNER:KEY`.
fn extension_fields<'a>(value: &Obj<'a>, known: &[&str], owner: &str) -> Obj<'a> {
    value
        .iter()
        .filter(|(k, _)| !known.contains(&k.as_ref()))
        .map(|(k, v)| (Cow::Owned(format!("plugin:{owner}:{k}")), v.clone()))
        .collect()
}

/// DSH's `liftToolResult`: a V3 tool result (a user message wrapping one `tool-result`
/// block) becomes a `role: "tool"` message.
fn lift_tool_result(ev: &mut Ev<'_>) -> Result<(), Refusal> {
    if ev.ty != "tool/result" {
        return Ok(());
    }
    let seq = ev.seq;
    let Some(message) = ev.field("message") else {
        return Ok(());
    };
    if message.peek_str("role").as_deref() != Some("user") {
        return Ok(());
    }
    let Some(members) = message.obj() else {
        return Ok(());
    };
    let wrong = || {
        malformed_in(3, format!("format v3 tool/result at seq {seq} requires exactly one tool-result wrapper matching its tool source"))
    };
    let id_ok = get(members, "id")
        .and_then(|i| i.as_str())
        .is_some_and(|i| !i.is_empty());
    let mut source = get(members, "source").cloned().ok_or_else(wrong)?;
    let source_is_tool = source.get("kind").and_then(|k| k.as_str()).as_deref() == Some("tool");
    let call_id = source
        .get("callId")
        .and_then(|c| c.as_str())
        .map(|c| c.into_owned())
        .filter(|c| !c.is_empty());
    let mut wrapper = match get(members, "content").and_then(Val::arr) {
        Some(blocks) if blocks.len() == 1 => blocks.first().cloned().ok_or_else(wrong)?,
        _ => return Err(wrong()),
    };
    let Some(call_id) = call_id else {
        return Err(wrong());
    };
    let wrapper_ok = wrapper.is_object()
        && wrapper.get("type").and_then(|t| t.as_str()).as_deref() == Some("tool-result")
        && wrapper
            .get("toolCallId")
            .and_then(|t| t.as_str())
            .as_deref()
            == Some(call_id.as_str());
    if !id_ok || !source_is_tool || !wrapper_ok {
        return Err(wrong());
    }
    let is_error = wrapper.get("isError").cloned();
    if is_error.as_ref().is_some_and(|e| e.as_bool().is_none()) {
        return Err(malformed_in(
            3,
            format!("format v3 tool/result at seq {seq} tool-result isError must be boolean"),
        ));
    }
    let mut content = wrapper
        .get("content")
        .cloned()
        .unwrap_or(Val::literal("null"));
    let Some(blocks) = content.arr() else {
        return Err(malformed_in(
            3,
            format!("format v3 tool/result at seq {seq} tool-result content must be an array"),
        ));
    };
    if blocks.iter_mut().any(|b| {
        b.is_object() && b.get("type").and_then(|t| t.as_str()).as_deref() == Some("tool-result")
    }) {
        return Err(unsupported(format!("format v3 tool/result at seq {seq} contains a nested tool-result unsupported by this converter")));
    }
    let id = get(members, "id").cloned().unwrap_or(Val::literal("null"));
    let mut target: Obj<'_> = vec![
        ("role".into(), Val::literal("\"tool\"")),
        ("source".into(), source),
        ("toolCallId".into(), Val::string(&call_id)),
        ("content".into(), content),
    ];
    if let Some(is_error) = is_error {
        target.push(("isError".into(), is_error));
    }
    target.push(("id".into(), id));
    target.extend(extension_fields(
        members,
        &["id", "role", "source", "content"],
        "message",
    ));
    if let Some(wrapper_members) = wrapper.obj() {
        target.extend(extension_fields(
            wrapper_members,
            &["type", "toolCallId", "content", "isError"],
            "result",
        ));
    }
    *message = Val::Obj(target);
    Ok(())
}

fn migrate_block(block: &mut Val<'_>, subject: &str) -> Result<(), Refusal> {
    let ty = block
        .get("type")
        .and_then(|t| t.as_str())
        .map(|t| t.into_owned());
    let Some(ty) = ty.filter(|_| block.is_object()) else {
        return Err(malformed_in(
            3,
            format!("{subject} requires content blocks with string type tags"),
        ));
    };
    if !BLOCK_TYPES.contains(&ty.as_str()) {
        if let Some(members) = block.obj() {
            set(members, "type", Val::string(&format!("plugin:{ty}")));
        }
    }
    Ok(())
}

/// Whether every block of a content array has a tag of V3's set (read without opening it up).
fn content_is_v3(content: Option<Peek<'_>>) -> bool {
    let known = |tag: Option<std::borrow::Cow<'_, str>>| {
        tag.is_some_and(|t| BLOCK_TYPES.contains(&t.as_ref()))
    };
    match content {
        Some(Peek::Json(json)) => {
            json.is_array()
                && json
                    .elements()
                    .all(|block| known(block.get("type").and_then(|t| t.as_str())))
        }
        Some(Peek::Val(Val::Arr(blocks))) => {
            blocks.iter().all(|block| known(block.peek_str("type")))
        }
        _ => false,
    }
}

fn migrate_content_array(content: Option<&mut Val<'_>>, subject: &str) -> Result<(), Refusal> {
    let Some(blocks) = content.and_then(Val::arr) else {
        return Err(malformed_in(
            3,
            format!("{subject} content must be an array"),
        ));
    };
    for (index, block) in blocks.iter_mut().enumerate() {
        if needs_namespace(block) {
            migrate_block(block, &format!("{subject}[{index}]"))?;
        }
    }
    Ok(())
}

/// Whether a block's tag is outside V3's set (only those are opened and rewritten).
fn needs_namespace(block: &mut Val<'_>) -> bool {
    !block
        .get("type")
        .and_then(|t| t.as_str())
        .is_some_and(|t| BLOCK_TYPES.contains(&t.as_ref()))
}

/// DSH's `migrateV3EventContent`.
fn migrate_content(ev: &mut Ev<'_>) -> Result<(), Refusal> {
    let subject = format!("format v3 {} at seq {}", ev.ty, ev.seq);
    for_each_message(ev, &mut |message| {
        if content_is_v3(message.peek("content")) {
            return Ok(());
        }
        migrate_content_array(message.get("content"), &subject)
    })?;
    let ty = ev.ty.clone();
    match ty.as_ref() {
        "compaction/summary" => {
            migrate_content_array(ev.field("summary"), &format!("{subject}.summary"))?;
            if ev.field("rawOutput").is_some() {
                migrate_content_array(ev.field("rawOutput"), &format!("{subject}.rawOutput"))?;
            }
        }
        "tool/ptc-dispatch" => {
            migrate_content_array(ev.field("content"), &format!("{subject}.content"))?
        }
        "team/message/queued" => {
            if let Some(message) = ev.field("message").filter(|m| m.is_object()) {
                migrate_content_array(message.get("content"), &subject)?;
            }
        }
        "request/header" => {
            if let Some(tools) = ev
                .field("header")
                .and_then(|h| h.get("tools"))
                .and_then(Val::arr)
            {
                for (index, tool) in tools.iter_mut().enumerate() {
                    if tool.obj().is_some_and(|t| has(t, "deferLoading")) {
                        return Err(unsupported(format!(
                            "{subject}.header.tools[{index}] contains deferLoading, which is only defined in V4"
                        )));
                    }
                }
            }
        }
        "assistant/message" | "assistant/attempt" => {
            if let Some(stream) = ev.field("stream").and_then(Val::arr) {
                for (index, entry) in stream.iter_mut().enumerate() {
                    if entry.get("type").and_then(|t| t.as_str()).as_deref() != Some("chunk") {
                        continue;
                    }
                    if let Some(chunk) = entry.get("chunk") {
                        migrate_chunk(chunk, &format!("{subject}.stream[{index}]"))?;
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn migrate_chunk(chunk: &mut Val<'_>, subject: &str) -> Result<(), Refusal> {
    let tag = chunk.peek_str("type");
    let block_tag = match tag.as_deref() {
        Some("block-end") => chunk
            .peek("block")
            .and_then(|b| b.peek("type"))
            .and_then(|t| t.as_str()),
        Some("block-start") => chunk.peek_str("blockType"),
        _ => return Ok(()),
    };
    if block_tag.is_some_and(|t| BLOCK_TYPES.contains(&t.as_ref())) {
        return Ok(());
    }
    match chunk
        .get("type")
        .and_then(|t| t.as_str())
        .map(|t| t.into_owned())
        .as_deref()
    {
        Some("block-end") => {
            if let Some(block) = chunk.get("block") {
                if needs_namespace(block) {
                    migrate_block(block, &format!("{subject}.block"))?;
                }
            }
        }
        Some("block-start") => {
            let Some(original) = chunk
                .get("blockType")
                .and_then(|t| t.as_str())
                .map(|t| t.into_owned())
            else {
                return Err(malformed_in(
                    3,
                    format!("{subject} blockType must be a string"),
                ));
            };
            if !BLOCK_TYPES.contains(&original.as_str()) {
                if let Some(members) = chunk.obj() {
                    set(
                        members,
                        "blockType",
                        Val::string(&format!("plugin:{original}")),
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The checks of DSH's V4 reader on the migrated artifact that the corpus meets (the
/// reader's turn, step and compaction ownership rules; its other relationship rules are not
/// repeated here): an `assistant/attempt` inside the open turn and step it names, and a
/// compaction owned by the turn open when it runs (`null` between turns). One event at a
/// time, after the last stage.
pub(super) struct Lifecycle {
    from: DshFormat,
    turn: Option<String>,
    step: Option<String>,
    /// The open compaction's owner turn (its text, `null` between turns).
    compaction: Option<String>,
}

impl Lifecycle {
    pub(super) fn new(from: DshFormat) -> Lifecycle {
        Lifecycle {
            from,
            turn: None,
            step: None,
            compaction: None,
        }
    }

    fn refuse(&self, what: &str) -> Result<(), Refusal> {
        Err(Refusal(format!(
            "Session migration from {} to v4 refuses the transformed artifact: {what}",
            self.from
        )))
    }

    fn open_turn(&self) -> String {
        self.turn.clone().unwrap_or_else(|| "null".to_owned())
    }

    fn check(&mut self, ev: &mut Ev<'_>) -> Result<(), Refusal> {
        match ev.ty.as_ref() {
            "turn/start" => {
                self.turn = Some(text_of(ev.field("turn")));
                self.step = None;
            }
            "turn/end" => {
                self.turn = None;
                self.step = None;
            }
            "step/start" => self.step = Some(text_of(ev.field("step"))),
            "step/end" => self.step = None,
            "session/end-seed" => self.compaction = None,
            "assistant/attempt" => {
                let here = (
                    Some(text_of(ev.field("turn"))),
                    Some(text_of(ev.field("step"))),
                );
                if self.turn.is_none()
                    || self.step.is_none()
                    || here != (self.turn.clone(), self.step.clone())
                {
                    return self.refuse("assistant/attempt does not match an open turn and step");
                }
            }
            "compaction/start" => {
                if self.compaction.is_some() {
                    return self.refuse("compaction/start overlaps an open compaction");
                }
                let owner = text_of(ev.field("turn"));
                if owner != self.open_turn() {
                    return self.refuse("compaction/start does not match the open turn");
                }
                self.compaction = Some(owner);
            }
            ty @ ("compaction/summary" | "compaction/end") => {
                if self
                    .compaction
                    .as_ref()
                    .is_some_and(|owner| *owner != self.open_turn())
                {
                    return self.refuse(&format!("{ty} does not match the open turn"));
                }
                if ty == "compaction/end" {
                    self.compaction = None;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl<'a> Step<'a> for Lifecycle {
    fn push(&mut self, mut ev: Ev<'a>, out: &mut Vec<Ev<'a>>) -> Result<(), Refusal> {
        self.check(&mut ev)?;
        out.push(ev);
        Ok(())
    }
}
