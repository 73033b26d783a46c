//! The session header (DSH JSONL line 1), kept byte for byte with typed accessors.
//!
//! Parsing is lenient by default so that headers as written in real snapshots (with
//! placeholder ids and cwds, or without `version`/`delegationDepth`) import losslessly;
//! [`SessionHeader::validate_strict`] applies DSH's own reader and construction rules.

use crate::error::Error;
use crate::json::{self, JsonRef, ObjectWriter};
use crate::version::DshFormat;

/// A session's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    raw: Box<str>,
    id: String,
    created_at: Option<u64>,
    cwd: Option<String>,
    parent_session: Option<String>,
    seed_length: Option<u64>,
    delegation_depth: Option<u64>,
    format: DshFormat,
    is_seeded: Option<bool>,
}

fn header_error(detail: impl Into<String>) -> Error {
    Error::Header {
        detail: detail.into(),
    }
}

impl SessionHeader {
    /// A fresh header written as DSH writes it:
    /// `{"type":"session","version":0,"id":…,"createdAt":…,"cwd"?:…,"delegationDepth":0}`.
    /// `created_at_ms` is epoch milliseconds, the type of every event `time`; DSH requires a
    /// non-negative `createdAt`, so a negative time is written as 0.
    pub fn new(id: &str, created_at_ms: i64, cwd: Option<&str>) -> SessionHeader {
        let created_at = u64::try_from(created_at_ms).unwrap_or(0);
        let mut writer = ObjectWriter::new()
            .string("type", "session")
            .int("version", 0)
            .string("id", id)
            .raw("createdAt", &created_at.to_string());
        if let Some(cwd) = cwd {
            writer = writer.string("cwd", cwd);
        }
        let raw = writer.int("delegationDepth", 0).finish();
        // The text above is built from typed values, so it always parses.
        SessionHeader::parse(&raw).unwrap_or(SessionHeader {
            raw: raw.into(),
            id: id.to_owned(),
            created_at: Some(created_at),
            cwd: cwd.map(str::to_owned),
            parent_session: None,
            seed_length: None,
            delegation_depth: Some(0),
            format: DshFormat::V0,
            is_seeded: None,
        })
    }

    /// Parses a header line leniently: it must be a lossless JSON object with
    /// `type: "session"` and a string `id`; `version`, when present, must be 0; the
    /// retired keys `sandboxMode` and `approvalPolicy` are refused. Typed fields that are
    /// present must have their DSH types.
    pub fn parse(raw: &str) -> Result<SessionHeader, Error> {
        json::validate_str(raw)
            .map_err(|e| header_error(format!("not lossless JSON: {}", e.kind)))?;
        let root = JsonRef::new(raw);
        if !root.is_object()
            || root.get("type").and_then(|t| t.as_str()).as_deref() != Some("session")
        {
            return Err(header_error(
                "first line is not a session header (type must be \"session\")",
            ));
        }
        let format = match root.get("version") {
            None => DshFormat::V0,
            Some(version) => match version.as_seq().and_then(DshFormat::from_number) {
                Some(format) => format,
                None if version.as_f64().is_some() => {
                    return Err(Error::UnsupportedVersion {
                        version: version.raw().to_owned(),
                    })
                }
                None => return Err(header_error("version must be a number")),
            },
        };
        let id = root
            .get("id")
            .and_then(|i| i.as_str())
            .ok_or_else(|| header_error("id must be a string"))?;
        for retired in ["sandboxMode", "approvalPolicy"] {
            if root.get(retired).is_some() {
                return Err(header_error(format!("retired header key {retired:?}")));
            }
        }
        let count = |key: &str| -> Result<Option<u64>, Error> {
            match root.get(key) {
                None => Ok(None),
                Some(v) => v.as_seq().map(Some).ok_or_else(|| {
                    header_error(format!("{key} must be a non-negative safe integer"))
                }),
            }
        };
        let text = |key: &str| -> Result<Option<String>, Error> {
            match root.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_str()
                    .map(|s| Some(s.into_owned()))
                    .ok_or_else(|| header_error(format!("{key} must be a string"))),
            }
        };
        if let Some(origin) = root.get("origin") {
            if origin.as_str().as_deref() != Some("subagent") {
                return Err(header_error("origin, when present, must be \"subagent\""));
            }
        }
        text("agentPreset")?;
        let is_seeded = match root.get("isSeeded") {
            None => None,
            Some(v) => Some(
                v.as_bool()
                    .ok_or_else(|| header_error("isSeeded must be a boolean"))?,
            ),
        };
        if format.header_is_seeded() {
            if root.get("seedLength").is_some() {
                return Err(header_error(format!(
                    "a format {format} header says isSeeded, not seedLength"
                )));
            }
            if is_seeded.is_none() {
                return Err(header_error(format!(
                    "a format {format} header requires isSeeded"
                )));
            }
        } else if is_seeded.is_some() {
            return Err(header_error(format!(
                "a format {format} header says seedLength, not isSeeded"
            )));
        }
        Ok(SessionHeader {
            format,
            is_seeded,
            id: id.into_owned(),
            created_at: count("createdAt")?,
            cwd: text("cwd")?,
            parent_session: text("parentSession")?,
            seed_length: count("seedLength")?,
            delegation_depth: count("delegationDepth")?,
            raw: raw.into(),
        })
    }

    /// DSH's strict rules: `version` 0 and `createdAt`/`delegationDepth` present, and an
    /// absolute `cwd` when one is given.
    pub fn validate_strict(&self) -> Result<(), Error> {
        let root = JsonRef::new(&self.raw);
        if root.get("version").is_none() {
            return Err(header_error("version is required"));
        }
        if self.created_at.is_none() || self.delegation_depth.is_none() {
            return Err(header_error("createdAt and delegationDepth are required"));
        }
        if let Some(cwd) = &self.cwd {
            if !cwd.starts_with('/') {
                return Err(header_error(format!("cwd {cwd:?} is not an absolute path")));
            }
        }
        Ok(())
    }

    /// The header line exactly as stored (without the line feed).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Creation time in epoch milliseconds, when present.
    pub fn created_at(&self) -> Option<u64> {
        self.created_at
    }

    /// The working directory, when present.
    pub fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// The parent session id of a child session.
    pub fn parent_session(&self) -> Option<&str> {
        self.parent_session.as_deref()
    }

    /// Whether the header says the session is a sub-agent's (`origin: "subagent"`, the one
    /// origin DSH's headers name).
    pub fn is_subagent(&self) -> bool {
        JsonRef::new(&self.raw).get("origin").is_some()
    }

    /// How many events were seeded from the parent.
    pub fn seed_length(&self) -> Option<u64> {
        self.seed_length
    }

    /// The DSH format generation the header declares (`version`; V0 when absent).
    pub fn format(&self) -> DshFormat {
        self.format
    }

    /// Whether the session was seeded from a parent: `seedLength` present (V0, V1) or
    /// `isSeeded: true` (V2 and later).
    pub fn is_seeded(&self) -> bool {
        self.is_seeded.unwrap_or(self.seed_length.is_some())
    }

    /// The header as format `target` writes it: `version` set to the target's number, the
    /// other members kept byte for byte and in order. A header already of `target` is
    /// returned unchanged (so export at the imported version is lossless). Crossing the
    /// V1/V2 line rewrites an unseeded header's `seedLength`-free layout into
    /// `isSeeded:false` (or back); a seeded session cannot cross it, because V2 marks
    /// the inherited prefix with an event that only migration writes.
    pub fn for_format(&self, target: DshFormat) -> Result<SessionHeader, Error> {
        if target == self.format {
            return Ok(self.clone());
        }
        if target.header_is_seeded() != self.format.header_is_seeded() && self.is_seeded() {
            return Err(header_error(format!(
                "a seeded format {} session cannot be written as format {target} without \
                 migration (the inherited prefix is marked differently); export it at format {}",
                self.format, self.format
            )));
        }
        if target == DshFormat::LATEST {
            return self.as_written_by_latest();
        }
        let root = JsonRef::new(&self.raw);
        let mut writer = ObjectWriter::new();
        // V2's writer puts isSeeded right before origin (or delegationDepth).
        let mut pending_is_seeded = target.header_is_seeded() && !self.format.header_is_seeded();
        for (key, value) in root.members() {
            if pending_is_seeded
                && matches!(key.as_ref(), "origin" | "delegationDepth" | "agentPreset")
            {
                writer = writer.raw("isSeeded", "false");
                pending_is_seeded = false;
            }
            match key.as_ref() {
                "version" => writer = writer.int("version", i64::from(target.number())),
                // Only an unseeded header crosses the V1/V2 line (checked above).
                "isSeeded" if !target.header_is_seeded() => {}
                other => writer = writer.raw(other, value.raw()),
            }
            if key == "type" && root.get("version").is_none() {
                writer = writer.int("version", i64::from(target.number()));
            }
        }
        if pending_is_seeded {
            writer = writer.raw("isSeeded", "false");
        }
        let raw = writer.finish();
        SessionHeader::parse(&raw)
    }

    /// The header as DSH's V4 writer encodes it after reading an older header: its members in
    /// the writer's fixed order (`type`, `version`, `id`, `createdAt`, `cwd`, `parentSession`,
    /// `isSeeded`, `origin`, `delegationDepth`, `agentPreset`), `isSeeded` derived from
    /// `seedLength` below V2, `delegationDepth` 0 when absent (sessionlog's lenient import keeps
    /// headers without one), and the V2 -> V3 rename of agent preset `code` to `ptc`.
    pub(crate) fn as_written_by_latest(&self) -> Result<SessionHeader, Error> {
        let root = JsonRef::new(&self.raw);
        let raw_of = |key: &str| root.get(key).map(|v| v.raw());
        let created_at = raw_of("createdAt")
            .ok_or_else(|| header_error("format v4 header lacks required field createdAt"))?;
        let mut writer = ObjectWriter::new()
            .string("type", "session")
            .int("version", i64::from(DshFormat::LATEST.number()))
            .string("id", &self.id)
            .raw("createdAt", created_at);
        for key in ["cwd", "parentSession"] {
            if let Some(value) = raw_of(key) {
                writer = writer.raw(key, value);
            }
        }
        writer = writer.raw("isSeeded", if self.is_seeded() { "true" } else { "false" });
        if let Some(origin) = raw_of("origin") {
            writer = writer.raw("origin", origin);
        }
        writer = writer.raw("delegationDepth", raw_of("delegationDepth").unwrap_or("0"));
        if let Some(preset) = root.get("agentPreset") {
            let renamed = self.format < DshFormat::V3 && preset.as_str().as_deref() == Some("code");
            writer = writer.raw(
                "agentPreset",
                if renamed { "\"ptc\"" } else { preset.raw() },
            );
        }
        SessionHeader::parse(&writer.finish())
    }

    /// Sub-agent delegation depth.
    pub fn delegation_depth(&self) -> Option<u64> {
        self.delegation_depth
    }
}
