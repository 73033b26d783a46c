//! A parent's child sessions in its migration to V4. DSH's V3 -> V4 stage ends a parent's
//! log with one `subagent/catalog` event for each direct child (a `subagent` session whose
//! header names the parent) that the parent's own catalog lacks, and refuses a parent whose
//! catalog contradicts a child. What the stage knows of a child is a [`ChildFact`]: its id,
//! creation time and own descriptor, read from the child's stored events at its own format,
//! never migrated (DSH reads its children the same way, so a child its migration refuses
//! still gives its parent a catalog entry).

use std::cmp::Ordering;

use super::value::Val;
use super::visit_as_v3;
use crate::event::Event;
use crate::header::SessionHeader;
use crate::json::{write_js_string, JsonKind, JsonRef};

/// What a parent's migration to V4 learns of one direct child session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildFact {
    child_id: String,
    child_created_at: u64,
    /// The child's own `subagent/descriptor` events (after what it inherited).
    descriptor_count: u64,
    /// The payload of the first of them, as stored.
    descriptor: Option<String>,
}

impl ChildFact {
    /// The fact of a child of session `parent_id` with `header` and `events` (every event of
    /// the child as stored, in order), or `None` when the header is not of a direct
    /// `subagent` child of `parent_id` with a creation time. DSH reads a child as its
    /// historical reader restores it, migrated to V3 in memory (a V4 child as it is); a
    /// child that reader refuses, or whose own descriptor DSH cannot read as a catalog entry,
    /// is known by id and creation time only (its catalog entry's mode is then `unknown`).
    pub fn of(parent_id: &str, header: &SessionHeader, events: &[Event]) -> Option<ChildFact> {
        if !header.is_subagent() || header.parent_session() != Some(parent_id) {
            return None;
        }
        let mut fact = ChildFact {
            child_id: header.id().to_owned(),
            child_created_at: header.created_at()?,
            descriptor_count: 0,
            descriptor: None,
        };
        // Descriptors before the inherited cut (`session/end-seed {inherited: true}` in V3
        // and later) came with the parent's events.
        let mut own = !header.is_seeded();
        let mut descriptors: Vec<String> = Vec::new();
        let restored = visit_as_v3(header, events, &mut |ev| match ev.ty.as_ref() {
            "session/end-seed" if !own => {
                own = ev
                    .field("inherited")
                    .is_some_and(|v| v.as_bool() == Some(true));
            }
            "subagent/descriptor" if own => {
                descriptors.push(
                    ev.val("data")
                        .map_or_else(|| "null".to_owned(), Val::to_text),
                );
            }
            _ => {}
        });
        if restored.is_ok() {
            fact.descriptor_count = descriptors.len() as u64;
            fact.descriptor = descriptors.into_iter().next();
        }
        if fact.entry().is_err() {
            fact.descriptor_count = 0;
            fact.descriptor = None;
        }
        Some(fact)
    }

    /// The child's session id.
    pub fn child_id(&self) -> &str {
        &self.child_id
    }

    /// DSH's `childCatalogFact`: the catalog entry the child's own descriptor gives (exactly
    /// one descriptor, of version 1, 2 or 3), `None` otherwise; an error for a descriptor
    /// whose discovery fields DSH refuses.
    fn entry(&self) -> Result<Option<CatalogEntry>, String> {
        let Some(descriptor) = self.descriptor.as_deref().map(JsonRef::new) else {
            return Ok(None);
        };
        let version = descriptor.get("version").and_then(|v| v.as_f64());
        let known = descriptor.is_object()
            && matches!(version, Some(v) if v == 1.0 || v == 2.0 || v == 3.0);
        if self.descriptor_count != 1 || !known {
            return Ok(None);
        }
        let subject = self.subject();
        let is_string = |key: &str| {
            descriptor
                .get(key)
                .is_some_and(|v| v.kind() == JsonKind::String)
        };
        if !is_string("provider") {
            return Err(format!(
                "{subject} has an invalid subagent descriptor provider"
            ));
        }
        let mode = descriptor.get("mode").and_then(|m| m.as_str());
        let mode = if version == Some(1.0) {
            "continuable".to_owned()
        } else {
            match mode.as_deref() {
                Some(m @ ("continuable" | "one-shot")) => m.to_owned(),
                _ => return Err(format!("{subject} has an invalid subagent descriptor mode")),
            }
        };
        let label = match descriptor.get("label") {
            None => None,
            Some(label) => Some(
                label
                    .as_str()
                    .ok_or_else(|| unsupported_fact(&subject))?
                    .into_owned(),
            ),
        };
        if mode == "continuable" && label.is_none() {
            return Err(unsupported_fact(&subject));
        }
        Ok(Some(CatalogEntry::Described { mode, label }))
    }

    fn subject(&self) -> String {
        format!("Session {}", self.child_id)
    }

    /// DSH's candidate order: by creation time, then by id (JavaScript's string order).
    fn order(&self, other: &ChildFact) -> Ordering {
        self.child_created_at
            .cmp(&other.child_created_at)
            .then_with(|| {
                self.child_id
                    .encode_utf16()
                    .cmp(other.child_id.encode_utf16())
            })
    }
}

fn unsupported_fact(subject: &str) -> String {
    format!("{subject} requires a supported versioned catalog fact")
}

/// The catalog entry DSH writes for a child its parent's catalog lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CatalogEntry {
    /// From the child's own descriptor: `{version: 0, childId, childCreatedAt, mode, label?}`.
    Described { mode: String, label: Option<String> },
    /// Without one: `{version: 1, childId, childCreatedAt, mode: "unknown"}`.
    Unknown,
}

/// One catalog fact the parent's log already holds (a V3 `subagent/catalog` payload),
/// checked as DSH's `catalogFact` checks it.
#[derive(Debug, Clone)]
pub(crate) struct ExistingCatalog {
    child_id: String,
    child_created_at: u64,
    mode: Option<String>,
    label: Option<String>,
}

impl ExistingCatalog {
    /// The fact of a `subagent/catalog` payload, or DSH's reason for refusing it.
    pub(crate) fn read(data: &str) -> Result<ExistingCatalog, String> {
        let value = JsonRef::new(data);
        let refused = || unsupported_fact("subagent/catalog");
        if !value.is_object() {
            return Err(refused());
        }
        let text = |key: &str| {
            value
                .get(key)
                .and_then(|v| v.as_str())
                .map(|s| s.into_owned())
        };
        let version = value.get("version").and_then(|v| v.as_f64());
        let mode = text("mode");
        let child_id = text("childId").ok_or_else(refused)?;
        let label = text("label");
        let mode_ok = matches!(
            mode.as_deref(),
            Some("continuable" | "one-shot" | "external" | "unknown")
        );
        let version_ok = matches!(version, Some(v) if v == 0.0 || v == 1.0 || v == 2.0);
        if !version_ok
            || !mode_ok
            || (version == Some(2.0)) != (mode.as_deref() == Some("external"))
            || (version == Some(0.0) && mode.as_deref() == Some("unknown"))
            || (mode.as_deref() == Some("continuable") && label.is_none())
            || (value.get("label").is_some() && label.is_none())
        {
            return Err(refused());
        }
        // DSH's `sessionFormatCount`: a non-negative safe integer, and not `-0`.
        let child_created_at = value
            .get("childCreatedAt")
            .filter(|v| v.raw() != "-0")
            .and_then(|v| v.as_seq())
            .ok_or_else(|| {
                "catalog child creation time must be a non-negative safe integer".to_owned()
            })?;
        Ok(ExistingCatalog {
            child_id,
            child_created_at,
            mode,
            label,
        })
    }
}

/// Why the end of a parent's migration refuses it: DSH's unsupported-migration message, or
/// a malformed-source message the stage's name prefixes.
#[derive(Debug)]
pub(crate) enum CatalogRefusal {
    Unsupported(String),
    Malformed(String),
}

/// The `subagent/catalog` payloads the end of a parent's V3 -> V4 migration adds, in order,
/// given the parent's own catalog payloads (after its inherited cut) and its children.
pub(crate) fn catalog_additions(
    existing: &[String],
    children: &[ChildFact],
) -> Result<Vec<String>, CatalogRefusal> {
    let mut known: Vec<ExistingCatalog> = Vec::with_capacity(existing.len());
    for data in existing {
        let fact = ExistingCatalog::read(data).map_err(CatalogRefusal::Malformed)?;
        if known.iter().any(|k| k.child_id == fact.child_id) {
            return Err(CatalogRefusal::Unsupported(format!(
                "duplicate catalog child {}",
                fact.child_id
            )));
        }
        known.push(fact);
    }
    let mut candidates: Vec<&ChildFact> = children.iter().collect();
    candidates.sort_by(|a, b| a.order(b));
    let mut added = Vec::new();
    for child in candidates {
        let entry = child.entry().map_err(CatalogRefusal::Unsupported)?;
        if let Some(existing) = known.iter().find(|k| k.child_id == child.child_id) {
            let conflicts = existing.child_created_at != child.child_created_at
                || matches!(&entry, Some(CatalogEntry::Described { mode, label })
                    if existing.mode.as_deref() != Some(mode.as_str()) || existing.label != *label);
            if conflicts {
                return Err(CatalogRefusal::Unsupported(format!(
                    "{} conflicts with its parent catalog",
                    child.subject()
                )));
            }
            continue;
        }
        let entry = entry.unwrap_or(CatalogEntry::Unknown);
        let (mode, label) = match &entry {
            CatalogEntry::Described { mode, label } => (mode.clone(), label.clone()),
            CatalogEntry::Unknown => ("unknown".to_owned(), None),
        };
        known.push(ExistingCatalog {
            child_id: child.child_id.clone(),
            child_created_at: child.child_created_at,
            mode: Some(mode),
            label,
        });
        added.push(entry_json(child, &entry));
    }
    Ok(added)
}

/// The payload as DSH's `JSON.stringify` writes it.
fn entry_json(child: &ChildFact, entry: &CatalogEntry) -> String {
    let mut out = String::with_capacity(96);
    let version = match entry {
        CatalogEntry::Described { .. } => "0",
        CatalogEntry::Unknown => "1",
    };
    out.push_str("{\"version\":");
    out.push_str(version);
    out.push_str(",\"childId\":");
    write_js_string(&mut out, &child.child_id);
    out.push_str(",\"childCreatedAt\":");
    out.push_str(&child.child_created_at.to_string());
    out.push_str(",\"mode\":");
    match entry {
        CatalogEntry::Described { mode, label } => {
            write_js_string(&mut out, mode);
            if let Some(label) = label {
                out.push_str(",\"label\":");
                write_js_string(&mut out, label);
            }
        }
        CatalogEntry::Unknown => out.push_str("\"unknown\""),
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(id: &str, created: u64, descriptor: Option<&str>) -> ChildFact {
        ChildFact {
            child_id: id.to_owned(),
            child_created_at: created,
            descriptor_count: u64::from(descriptor.is_some()),
            descriptor: descriptor.map(str::to_owned),
        }
    }

    const ONE_SHOT: &str = r#"{"version":2,"mode":"one-shot","provider":"spawn","label":"L"}"#;

    #[test]
    fn children_are_listed_by_creation_time_then_id() {
        let added = catalog_additions(
            &[],
            &[
                child("b", 2, None),
                child("c", 1, None),
                child("a", 2, Some(ONE_SHOT)),
            ],
        )
        .expect("added");
        assert_eq!(
            added,
            [
                r#"{"version":1,"childId":"c","childCreatedAt":1,"mode":"unknown"}"#,
                r#"{"version":0,"childId":"a","childCreatedAt":2,"mode":"one-shot","label":"L"}"#,
                r#"{"version":1,"childId":"b","childCreatedAt":2,"mode":"unknown"}"#,
            ]
        );
    }

    #[test]
    fn a_child_the_catalog_already_lists_alike_is_not_listed_again() {
        let existing = [
            r#"{"version":0,"childId":"a","childCreatedAt":2,"mode":"one-shot","label":"L"}"#
                .to_owned(),
        ];
        let added = catalog_additions(&existing, &[child("a", 2, Some(ONE_SHOT))]).expect("same");
        assert!(added.is_empty());
        // An unknown fact agrees with any listed mode.
        let added = catalog_additions(&existing, &[child("a", 2, None)]).expect("unknown");
        assert!(added.is_empty());
    }

    #[test]
    fn a_catalog_that_contradicts_a_child_is_refused() {
        let existing = [
            r#"{"version":0,"childId":"a","childCreatedAt":2,"mode":"continuable","label":"L"}"#
                .to_owned(),
        ];
        for other in [child("a", 3, None), child("a", 2, Some(ONE_SHOT))] {
            match catalog_additions(&existing, &[other]) {
                Err(CatalogRefusal::Unsupported(m)) => {
                    assert_eq!(m, "Session a conflicts with its parent catalog")
                }
                other => panic!("not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn a_duplicate_or_malformed_catalog_is_refused() {
        let entry = r#"{"version":1,"childId":"a","childCreatedAt":2,"mode":"unknown"}"#;
        match catalog_additions(&[entry.to_owned(), entry.to_owned()], &[]) {
            Err(CatalogRefusal::Unsupported(m)) => assert_eq!(m, "duplicate catalog child a"),
            other => panic!("not refused: {other:?}"),
        }
        for bad in [
            r#"{"version":0,"childId":"a","childCreatedAt":2,"mode":"unknown"}"#,
            r#"{"version":1,"childId":"a","childCreatedAt":2,"mode":"continuable"}"#,
            r#"{"version":2,"childId":"a","childCreatedAt":2,"mode":"one-shot"}"#,
            r#"{"version":1,"childId":7,"childCreatedAt":2,"mode":"unknown"}"#,
            r#"[]"#,
        ] {
            match catalog_additions(&[bad.to_owned()], &[]) {
                Err(CatalogRefusal::Malformed(m)) => {
                    assert_eq!(
                        m, "subagent/catalog requires a supported versioned catalog fact",
                        "{bad}"
                    )
                }
                other => panic!("{bad}: not refused: {other:?}"),
            }
        }
        let negative = r#"{"version":1,"childId":"a","childCreatedAt":-1,"mode":"unknown"}"#;
        match catalog_additions(&[negative.to_owned()], &[]) {
            Err(CatalogRefusal::Malformed(m)) => {
                assert_eq!(
                    m,
                    "catalog child creation time must be a non-negative safe integer"
                )
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_descriptor_dsh_cannot_read_as_an_entry_is_an_error_or_no_entry() {
        // Two descriptors, or one of an unknown version: no entry from them.
        let mut two = child("a", 1, Some(ONE_SHOT));
        two.descriptor_count = 2;
        assert_eq!(two.entry(), Ok(None));
        assert_eq!(child("a", 1, Some(r#"{"version":4}"#)).entry(), Ok(None));
        // Fields DSH refuses.
        assert!(child("a", 1, Some(r#"{"version":2,"mode":"one-shot"}"#))
            .entry()
            .is_err());
        assert!(
            child("a", 1, Some(r#"{"version":2,"mode":"x","provider":"p"}"#))
                .entry()
                .is_err()
        );
        assert!(child("a", 1, Some(r#"{"version":1,"provider":"p"}"#))
            .entry()
            .is_err());
        assert_eq!(
            child("a", 1, Some(r#"{"version":1,"provider":"p","label":"x"}"#)).entry(),
            Ok(Some(CatalogEntry::Described {
                mode: "continuable".into(),
                label: Some("x".into())
            }))
        );
    }
}
