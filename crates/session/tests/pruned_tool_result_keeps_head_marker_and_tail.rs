//! The pruner shortens an oversized tool result to head, marker and tail by a single-node
//! tool-result replacement that keeps the message id; the original stays in the log and
//! the history lists it in full, marked as pruned.

mod common;

use std::sync::Arc;

use common::{assistant, push, session_in_step, tool_result, user};
use sessionlog_session::compaction::{history_view, prune_tool_results, HistoryMark, PruneOptions};
use sessionlog_session::json::JsonRef;
use sessionlog_session::tokens::{visible_text, HeuristicCounter, TokenProjection};
use sessionlog_session::{EventInput, Seq, Session};

/// A session whose one turn ran a tool with a 35 KB result and ended (the active turn's
/// newest tool result is never pruned), and the seq of that result.
fn finished_turn_with_a_long_tool_result() -> (Session, u64) {
    let mut session = session_in_step();
    push(&mut session, user("u0", "run it"));
    push(&mut session, assistant("a0", "running", &["c0"]));
    let body = format!("HEAD{}TAIL", "middle ".repeat(5000));
    let original = push(&mut session, tool_result("r0", "c0", &body));
    // The active turn's newest tool result is never pruned: end the turn.
    push(
        &mut session,
        EventInput::new("step/end", 1, r#"{"turn":1,"step":1}"#),
    );
    push(
        &mut session,
        EventInput::new("turn/end", 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    (session, original)
}

#[test]
fn pruned_tool_result_keeps_head_marker_and_tail() {
    let (mut session, original) = finished_turn_with_a_long_tool_result();
    let mut projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let before = projection.surface_tokens();

    let options = PruneOptions::default()
        .with_threshold_bytes(4096)
        .with_head_bytes(200)
        .with_tail_bytes(100);
    let events = prune_tool_results(&session, &projection, &options, 9).expect("plans");
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].event_type, "compaction/prune");
    for input in events {
        let event = session
            .try_append(input)
            .expect("the session's replacement rule accepts it")
            .clone();
        projection.apply(&event).expect("folds");
    }
    assert!(projection.surface_tokens() < before / 4);

    let messages = session.derive_messages();
    let pruned = JsonRef::new(messages[2]);
    assert_eq!(
        pruned.get("id").and_then(|i| i.as_str()).as_deref(),
        Some("r0")
    );
    let text = visible_text(pruned);
    assert!(text.starts_with("HEAD"));
    assert!(text.ends_with("TAIL"));
    assert!(text.contains(&format!("kept in the session log at seq {original}")));
    assert!(text.len() < 4096);

    assert!(session
        .event(Seq(original))
        .expect("original kept")
        .raw()
        .contains("middle middle"));
    let history = history_view(&session);
    let entry = history
        .iter()
        .find(|e| e.seq == Seq(original))
        .expect("listed");
    assert_eq!(
        entry.mark,
        HistoryMark::Pruned {
            // After the step and turn ends and the compaction/prune event.
            replacement_seq: Seq(original + 4)
        }
    );

    // Pruning again finds nothing: the copy is under the threshold.
    assert!(prune_tool_results(&session, &projection, &options, 9)
        .expect("plans")
        .is_empty());
}

/// In a V4 session (here the same session migrated to V4 and read back) a tool result is a
/// `role: "tool"` message holding its blocks itself; the pruner shortens those.
#[test]
fn a_v4_tool_message_is_pruned_too() {
    use sessionlog_session::{export_dsh, import_jsonl, DshFormat, ExportOptions, ImportOptions};
    let (session, _) = finished_turn_with_a_long_tool_result();
    let v4 = export_dsh(
        &session,
        &ExportOptions::default().with_format(Some(DshFormat::V4)),
    )
    .expect("migrates");
    let mut session = import_jsonl(&v4, &ImportOptions::default())
        .expect("reads back")
        .session;
    assert_eq!(session.header().format(), DshFormat::V4);
    let mut projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let before = projection.surface_tokens();
    let options = PruneOptions::default()
        .with_threshold_bytes(4096)
        .with_head_bytes(200)
        .with_tail_bytes(100);
    let events = prune_tool_results(&session, &projection, &options, 9).expect("plans");
    assert_eq!(events.len(), 2, "the V4 tool result is pruned");
    for input in events {
        let event = session
            .try_append(input)
            .expect("the V4 replacement rule accepts it")
            .clone();
        projection.apply(&event).expect("folds");
    }
    assert!(projection.surface_tokens() < before / 4);
    let messages = session.derive_messages();
    let pruned = messages
        .iter()
        .map(|m| JsonRef::new(m))
        .find(|m| m.get("role").and_then(|r| r.as_str()).as_deref() == Some("tool"))
        .expect("the tool message");
    let text = visible_text(pruned);
    assert!(text.starts_with("HEAD") && text.ends_with("TAIL") && text.len() < 4096);
}
