//! The human history view: every message ever on the surface, in log order, with what
//! became of it.
//!
//! `derive_messages` answers "what does the model see"; this answers "what happened". An
//! original shadowed by a summary is still listed, marked with the summary that took its
//! place; a pruned tool result is listed in full, marked with its shortened copy.

use std::collections::HashMap;

use crate::event::{Event, Seq, SurfaceOp};
use crate::json::JsonRef;
use crate::session::Session;
use crate::surface::Surface;
use crate::validate::message_of;

/// What became of a history entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryMark {
    /// On the current surface: the model sees it.
    Visible,
    /// Condensed into the compaction summary at `summary_seq` (the first summary that
    /// covered it; that summary may itself be condensed later).
    Compacted {
        /// The summary message's seq.
        summary_seq: Seq,
    },
    /// Shortened by the pruner; the model sees the copy at `replacement_seq`.
    Pruned {
        /// The shortened copy's seq.
        replacement_seq: Seq,
    },
    /// Replaced by some other replacement event.
    Replaced {
        /// The replacement's seq.
        by: Seq,
    },
}

/// What kind of surface event an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// An original message.
    Message,
    /// A compaction summary standing for `shadowed`.
    Summary {
        /// The nodes it took the place of.
        shadowed: Vec<u64>,
    },
    /// A shortened copy of the tool result at `of`.
    PrunedCopy {
        /// The original's seq.
        of: Seq,
    },
    /// Another replacement standing for `shadowed`.
    Replacement {
        /// The nodes it took the place of.
        shadowed: Vec<u64>,
    },
}

/// One line of the human transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry<'a> {
    /// The event's seq.
    pub seq: Seq,
    /// The event's type.
    pub event_type: &'a str,
    /// The message, verbatim.
    pub message: JsonRef<'a>,
    /// Original, summary or copy.
    pub kind: EntryKind,
    /// Whether the model still sees it.
    pub mark: HistoryMark,
}

fn kind_of(event: &Event, message: JsonRef<'_>, shadowed: Vec<u64>) -> EntryKind {
    if event.event_type() == "tool/result" {
        if let [of] = shadowed.as_slice() {
            return EntryKind::PrunedCopy { of: Seq(*of) };
        }
    }
    if super::is_summary_message(message) {
        EntryKind::Summary { shadowed }
    } else {
        EntryKind::Replacement { shadowed }
    }
}

/// The history view of `session`: one entry per surface event in log order (usage-only
/// settlements, which the model never sees, are left out).
pub fn history_view(session: &Session) -> Vec<HistoryEntry<'_>> {
    let version = session.version();
    let mut surface = Surface::default();
    let mut entries: Vec<HistoryEntry<'_>> = Vec::new();
    let mut index_of: HashMap<u64, usize> = HashMap::new();
    for event in session.events() {
        let Some(surface_type) = version.surface_type(event.event_type()) else {
            continue;
        };
        let Some(message) = message_of(version, event) else {
            continue;
        };
        let seq = event.seq().get();
        let kind = match event.surface_op() {
            Some(SurfaceOp::Replace { start, end }) => {
                let sources = event.source_event_seqs().unwrap_or(&[]);
                let Ok(shadowed) = surface.plan_replace(start.get(), end.get(), sources) else {
                    // The session accepted this event, so the plan cannot fail; skip it
                    // rather than guess if it ever does.
                    continue;
                };
                surface.apply_replace(&shadowed, seq, Default::default());
                let kind = kind_of(event, message, shadowed.clone());
                for node in shadowed {
                    let Some(entry) = index_of.get(&node).and_then(|i| entries.get_mut(*i)) else {
                        continue;
                    };
                    if entry.mark != HistoryMark::Visible {
                        continue;
                    }
                    entry.mark = match &kind {
                        EntryKind::Summary { .. } => HistoryMark::Compacted {
                            summary_seq: Seq(seq),
                        },
                        EntryKind::PrunedCopy { .. } => HistoryMark::Pruned {
                            replacement_seq: Seq(seq),
                        },
                        _ => HistoryMark::Replaced { by: Seq(seq) },
                    };
                }
                kind
            }
            Some(SurfaceOp::Append) => {
                surface.append(seq, Default::default());
                EntryKind::Message
            }
            None => continue,
        };
        let empty = message.get("content").is_some_and(|c| !c.has_elements());
        if surface_type.skip_empty_content && empty {
            continue;
        }
        index_of.insert(seq, entries.len());
        entries.push(HistoryEntry {
            seq: Seq(seq),
            event_type: event.event_type(),
            message,
            kind,
            mark: HistoryMark::Visible,
        });
    }
    entries
}
