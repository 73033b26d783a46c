//! Format versions as data: each version is a table of its vocabulary, its surface types,
//! how each surface type maps to a message, and which optional rules apply. Adding a
//! version means adding a table, not touching the fold.

use std::collections::BTreeSet;

/// Where the message of a surface event lives in its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageLocation {
    /// The payload is the message (`user/message`, `system/message`).
    Data,
    /// The message is `data.message` (`assistant/message`, `tool/result`).
    DataMessage,
}

/// The message-shape rule a surface type enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageRule {
    /// `role: "user"`, a source with a non-empty `kind`.
    User,
    /// `role: "assistant"`, `source {kind: "model", provider, model}`.
    Assistant,
    /// `role: "user"`, `source {kind: "tool", callId}`, one `tool-result` block for it.
    ToolResult,
    /// DSH V4's tool message: `role: "tool"`, `source {kind: "tool", callId}`, `toolCallId`
    /// equal to that call id, `content` an array of blocks.
    ToolMessage,
    /// `role: "system"`; `source`, when present, has a non-empty `kind`.
    System,
}

/// One surface event type of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurfaceType {
    /// The event type.
    pub event_type: &'static str,
    /// Where its message lives.
    pub message: MessageLocation,
    /// Its message-shape rule.
    pub rule: MessageRule,
    /// Whether `derive_messages` skips it when its message content is empty
    /// (DSH skips usage-only assistant settlements).
    pub skip_empty_content: bool,
}

/// A session format version: vocabulary, surface table and optional rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatVersion {
    name: &'static str,
    /// Ordered, so a lookup is a few short comparisons rather than a SipHash per event.
    known_types: BTreeSet<String>,
    surface_types: Vec<SurfaceType>,
    /// Whether `assistant/message` may carry a `stream` record that is validated.
    pub settlement_stream_record: bool,
    /// Whether `assistant/attempt` payloads are validated as attempts.
    pub attempts: bool,
}

/// The 48 event types DSH 0.1.0-rc.8 knows (`dsh-known-event-types.txt`).
pub const DSH_V0_KNOWN_TYPES: [&str; 48] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

fn v0_surface_types() -> Vec<SurfaceType> {
    vec![
        SurfaceType {
            event_type: "user/message",
            message: MessageLocation::Data,
            rule: MessageRule::User,
            skip_empty_content: false,
        },
        SurfaceType {
            event_type: "assistant/message",
            message: MessageLocation::DataMessage,
            rule: MessageRule::Assistant,
            skip_empty_content: true,
        },
        SurfaceType {
            event_type: "tool/result",
            message: MessageLocation::DataMessage,
            rule: MessageRule::ToolResult,
            skip_empty_content: false,
        },
    ]
}

impl FormatVersion {
    /// DSH format V0 as written by 0.1.0-rc.8: three surface types, 48 known types.
    pub fn dsh_v0() -> Self {
        FormatVersion {
            name: "DSH V0",
            known_types: DSH_V0_KNOWN_TYPES.iter().map(|t| (*t).to_owned()).collect(),
            surface_types: v0_surface_types(),
            settlement_stream_record: false,
            attempts: false,
        }
    }

    /// The current model: V0 plus `system/message` (the rendered system prompt as a
    /// surface node), `assistant/attempt` (a failed or cancelled provider stream,
    /// structural) and settlements carrying a compact timed `stream` record.
    pub fn current() -> Self {
        let mut version = Self::dsh_v0();
        version.name = "sessionlog V1";
        version.known_types.insert("system/message".to_owned());
        version.known_types.insert("assistant/attempt".to_owned());
        version.surface_types.insert(
            0,
            SurfaceType {
                event_type: "system/message",
                message: MessageLocation::Data,
                rule: MessageRule::System,
                skip_empty_content: false,
            },
        );
        version.settlement_stream_record = true;
        version.attempts = true;
        version
    }

    /// The reading rules for a file of DSH format `format`: V0 reads as DSH 0.1.0-rc.8
    /// did ([`FormatVersion::dsh_v0`]); later formats know their own vocabulary, and V3
    /// and later put `system/message` on the surface. DSH's own V2+ stream records (an
    /// array of timed entries) are kept opaque: sessionlog's `{time0, dt, chunks}` record
    /// rules are not applied to them.
    pub fn for_dsh(format: DshFormat) -> Self {
        if format == DshFormat::V0 {
            return Self::dsh_v0();
        }
        let mut version = if format >= DshFormat::V3 {
            Self::current()
        } else {
            Self::dsh_v0()
        };
        version.settlement_stream_record = false;
        version.attempts = false;
        // DSH's system messages sit under `data.message`, with the turn and step beside it;
        // from V4 on a tool result is a message of role `tool` naming its call.
        for surface in &mut version.surface_types {
            if surface.event_type == "system/message" {
                surface.message = MessageLocation::DataMessage;
            }
            if surface.event_type == "tool/result" && format >= DshFormat::V4 {
                surface.rule = MessageRule::ToolMessage;
            }
        }
        version.name = match format {
            DshFormat::V0 => "DSH V0",
            DshFormat::V1 => "DSH V1",
            DshFormat::V2 => "DSH V2",
            DshFormat::V3 => "DSH V3",
            DshFormat::V4 => "DSH V4",
        };
        version.known_types = format
            .event_types()
            .into_iter()
            .map(str::to_owned)
            .collect();
        version
    }

    /// The rules a session with `header` is read with: `default` for a V0 header (native
    /// sessions and rc.8 files), its own format's rules ([`FormatVersion::for_dsh`]) for a
    /// header declaring V1 or later.
    pub fn for_header(default: &FormatVersion, header: &crate::header::SessionHeader) -> Self {
        match header.format() {
            DshFormat::V0 => default.clone(),
            format => Self::for_dsh(format),
        }
    }

    /// Adds a known type (for example a namespaced capability event).
    pub fn with_known_type(mut self, event_type: impl Into<String>) -> Self {
        self.known_types.insert(event_type.into());
        self
    }

    /// The version's display name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether `event_type` is in the vocabulary.
    pub fn is_known(&self, event_type: &str) -> bool {
        self.known_types.contains(event_type)
    }

    /// The surface entry for `event_type`, if it is a surface type.
    pub fn surface_type(&self, event_type: &str) -> Option<&SurfaceType> {
        self.surface_types
            .iter()
            .find(|s| s.event_type == event_type)
    }

    /// A fingerprint of everything in this table that changes what a fold makes of an
    /// event: the name, the vocabulary, the surface table and the optional rules. A
    /// checkpoint stores it and is refused under a version with another fingerprint, so
    /// any field added here that changes the fold must feed it.
    pub(crate) fn fingerprint(&self) -> u64 {
        use std::fmt::Write;
        // Hashed as it is written: a checkpoint is encoded with it each time.
        let mut hash = crate::tokens::projection::Fnv1a::new();
        hash.part(self.name);
        let _ = write!(hash, "{:?}", self.surface_types);
        hash.end_part();
        let _ = write!(hash, "{}{}", self.settlement_stream_record, self.attempts);
        hash.end_part();
        // A `BTreeSet` iterates in byte order: the known types sorted.
        for known in &self.known_types {
            hash.part(known);
        }
        hash.finish()
    }

    /// All surface types.
    pub fn surface_types(&self) -> &[SurfaceType] {
        &self.surface_types
    }
}

impl Default for FormatVersion {
    fn default() -> Self {
        Self::dsh_v0()
    }
}

/// A DSH session file format generation: the `version` of a session header, `V0` as
/// DSH 0.1.0 froze it through `V4`, which DSH 0.2 writes. Each generation is a fixed
/// vocabulary plus envelope and shape rules ([`DshFormat::holds`]); a file of version N is
/// named `session.jsonl` (N = 0) or `session.vN.jsonl`, with `.zstd` when compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DshFormat {
    /// The frozen 0.1.0 format: 51 types plus legacy names, packed chunk rows,
    /// `seedLength` in the header.
    V0,
    /// V0's layout and vocabulary with every legacy shape normalized.
    V1,
    /// `assistant/chunk` folded into settlements (`stream`) and `assistant/attempt`;
    /// `isSeeded` header with an inherited `session/end-seed`; source ranges in files.
    V2,
    /// `system/message` joins the surface; replacements spell `{op, startSeq, endSeq}`;
    /// `tool/code-dispatch*` renamed `tool/ptc-dispatch*`.
    V3,
    /// Adds `developer/message`, jobs and working-directory changes (DSH 0.2's writer).
    V4,
}

/// The three types DSH's frozen V0 inventory has beyond the 48 that 0.1.0-rc.8 knew
/// ([`DSH_V0_KNOWN_TYPES`]): 51 in all.
pub const DSH_FORMAT_V0_ADDED_TYPES: [&str; 3] = [
    "model/selection",
    "session-log-deepseek/delivery-accepted",
    "subagent/model-selection-policy",
];

/// Retired names a V0 file may still hold; the V0 → V1 stage renames or rewrites them
/// (or refuses the unsupported ones), so no later version has them.
pub const DSH_FORMAT_V0_LEGACY_TYPES: [&str; 7] = [
    "steering/message",
    "request/header-delta",
    "mode/set",
    "compact/start",
    "compact/summary",
    "compact/end",
    "compact/prune",
];

/// The types V3 adds to V2's vocabulary (V2 is V0's minus `assistant/chunk`, plus
/// `assistant/attempt`).
const V3_ADDED_TYPES: [&str; 9] = [
    "deliverables/presented",
    "feedback/message-delete",
    "feedback/message-put",
    "image/offload",
    "subagent/catalog",
    "system/message",
    "tool/ptc-dispatch",
    "tool/ptc-dispatch-start",
    "workspace/changes",
];

/// The V2 types V3 no longer has (renamed to `tool/ptc-dispatch*`).
const V3_REMOVED_TYPES: [&str; 2] = ["tool/code-dispatch", "tool/code-dispatch-start"];

/// The types V4 adds to V3's vocabulary.
const V4_ADDED_TYPES: [&str; 4] = [
    "developer/message",
    "job/registered",
    "job/settled",
    "working-directory/change",
];

impl DshFormat {
    /// Every generation, oldest first.
    pub const ALL: [DshFormat; 5] = [
        DshFormat::V0,
        DshFormat::V1,
        DshFormat::V2,
        DshFormat::V3,
        DshFormat::V4,
    ];

    /// The newest generation (what DSH 0.2 writes).
    pub const LATEST: DshFormat = DshFormat::V4;

    /// The header `version` number.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The generation a header `version` names, if it is one of 0..=4.
    pub fn from_number(number: u64) -> Option<DshFormat> {
        DshFormat::ALL.get(usize::try_from(number).ok()?).copied()
    }

    /// The file name DSH gives this generation: `session.jsonl` for V0,
    /// `session.vN.jsonl` after, with `.zstd` when compressed.
    pub fn file_name(self, zstd: bool) -> String {
        let base = match self {
            DshFormat::V0 => "session.jsonl".to_owned(),
            other => format!("session.v{}.jsonl", other.number()),
        };
        if zstd {
            base + ".zstd"
        } else {
            base
        }
    }

    /// Whether `event_type` is in this generation's vocabulary (legacy names aside).
    pub fn knows(self, event_type: &str) -> bool {
        let v0 = DSH_V0_KNOWN_TYPES.contains(&event_type)
            || DSH_FORMAT_V0_ADDED_TYPES.contains(&event_type);
        match self {
            DshFormat::V0 | DshFormat::V1 => v0,
            DshFormat::V2 => {
                (v0 && event_type != "assistant/chunk") || event_type == "assistant/attempt"
            }
            DshFormat::V3 => {
                (DshFormat::V2.knows(event_type) && !V3_REMOVED_TYPES.contains(&event_type))
                    || V3_ADDED_TYPES.contains(&event_type)
            }
            DshFormat::V4 => {
                DshFormat::V3.knows(event_type) || V4_ADDED_TYPES.contains(&event_type)
            }
        }
    }

    /// Every type of the vocabulary, sorted.
    pub fn event_types(self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = DSH_V0_KNOWN_TYPES
            .iter()
            .chain(DSH_FORMAT_V0_ADDED_TYPES.iter())
            .chain(std::iter::once(&"assistant/attempt"))
            .chain(V3_ADDED_TYPES.iter())
            .chain(V4_ADDED_TYPES.iter())
            .copied()
            .filter(|t| self.knows(t))
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether files of this generation write runs of three or more consecutive cited
    /// seqs as `[start, end]` pairs (V2's writer and later). Readers of every generation
    /// accept the pairs.
    pub fn writes_source_ranges(self) -> bool {
        self >= DshFormat::V2
    }

    /// Whether the header says `isSeeded` (V2 and later) instead of `seedLength`.
    pub fn header_is_seeded(self) -> bool {
        self >= DshFormat::V2
    }

    /// Whether a replacement is spelled `{op, startSeq, endSeq}` (V3 and later) rather
    /// than `{op, start, end}`.
    pub fn replace_spells_seq(self) -> bool {
        self >= DshFormat::V3
    }

    /// Whether this generation holds `event` as it is, without any migration. The error
    /// says why not, in DSH's words where DSH's reader has them.
    pub fn holds(self, event: &crate::event::Event) -> Result<(), String> {
        let event_type = event.event_type();
        let seq = event.seq().get();
        if !self.knows(event_type) {
            let legacy = self == DshFormat::V0 && DSH_FORMAT_V0_LEGACY_TYPES.contains(&event_type);
            if self == DshFormat::V0 && !legacy {
                return Err(format!(
                    "format v0 contains unknown historical event type {event_type:?} at seq {seq}; \
                     migration refuses unknown historical events even when ignorable"
                ));
            }
            // DSH's V1 -> V2 stage refuses every type V1 lacks, ignorable or not; from V2
            // on, an ignorable unknown event is kept as an opaque record.
            if self == DshFormat::V1 {
                return Err(format!(
                    "format v1 contains unknown event type {event_type:?} at seq {seq}"
                ));
            }
            if !legacy && !event.is_ignorable() {
                return Err(format!(
                    "format v{} contains unknown required event type {event_type:?} at seq {seq}",
                    self.number()
                ));
            }
        }
        let data = event.data();
        match event_type {
            "assistant/message" => {
                let has_stream = data.get("stream").is_some();
                if self >= DshFormat::V2 && !has_stream {
                    return Err(format!(
                        "format v{} assistant/message {seq} lacks its stream record",
                        self.number()
                    ));
                }
                if self < DshFormat::V2 && has_stream {
                    return Err(format!(
                        "format v{} assistant/message {seq} has a stream record, which only v2 and later define",
                        self.number()
                    ));
                }
                if self >= DshFormat::V2 && event.source_event_seqs().is_some() {
                    return Err(format!(
                        "assistant/message {seq} retains obsolete chunk references"
                    ));
                }
            }
            "session/end-seed" if self < DshFormat::V2 && data.get("inherited").is_some() => {
                return Err(format!(
                    "format v{} session/end-seed {seq} has inherited, which only v2 and later define",
                    self.number()
                ));
            }
            _ => {}
        }
        if let Some(crate::event::SurfaceOp::Replace { .. }) = event.surface_op() {
            if event.replace_spells_seq() != self.replace_spells_seq() {
                return Err(format!(
                    "format v{} {event_type} {seq} spells its replacement {}",
                    self.number(),
                    if event.replace_spells_seq() {
                        "{op, startSeq, endSeq}, which only v3 and later use"
                    } else {
                        "{op, start, end}, which v3 and later no longer use"
                    }
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for DshFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::{DshFormat, FormatVersion};

    /// The fingerprint as first defined: every part joined in one list, then hashed.
    fn listed(v: &FormatVersion) -> u64 {
        let mut known: Vec<&str> = v.known_types.iter().map(String::as_str).collect();
        known.sort_unstable();
        let surface = format!("{:?}", v.surface_types);
        let flags = format!("{}{}", v.settlement_stream_record, v.attempts);
        let mut parts = vec![v.name, surface.as_str(), flags.as_str()];
        parts.extend(known);
        crate::tokens::projection::fnv1a(&parts)
    }

    #[test]
    fn the_fingerprint_hashed_as_written_is_the_fingerprint_of_the_listed_parts() {
        let mut versions: Vec<FormatVersion> = DshFormat::ALL
            .into_iter()
            .map(FormatVersion::for_dsh)
            .collect();
        versions.push(FormatVersion::default());
        let mut flipped = FormatVersion::default();
        flipped.attempts = !flipped.attempts;
        versions.push(flipped);
        let mut seen = std::collections::HashSet::new();
        for v in &versions {
            assert_eq!(v.fingerprint(), listed(v), "{}", v.name);
            seen.insert(v.fingerprint());
        }
        // Versions that fold differently are told apart.
        assert!(seen.len() >= 3, "{seen:?}");
    }
}
