//! The real DSH log with a compaction (`compaction-recovery`) derives its golden surface
//! and messages, and the token and compaction views read it correctly: exact usage per
//! request and in total, the summarizer's usage kept apart, the shadowed prompt marked as
//! compacted in the history, no lock left to recover.

mod common;

use std::sync::Arc;

use common::{canon, dsh_fixture_dir, golden_for, value};
use sessionlog_session::compaction::{history_view, recover_compaction, EntryKind, HistoryMark};
use sessionlog_session::tokens::{HeuristicCounter, Label, RequestKind, TokenProjection};
use sessionlog_session::{import_jsonl, ImportOptions, Seq};

#[test]
fn compaction_recovery_fixture_derives_its_golden_surface() {
    let Some(root) = dsh_fixture_dir("compaction_recovery_fixture_derives_its_golden_surface")
    else {
        return;
    };
    let log =
        root.join("logs/examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl");
    let golden = golden_for(&root, &log);
    let bytes = std::fs::read(&log).expect("fixture readable");
    let session = import_jsonl(&bytes, &ImportOptions::default())
        .expect("fixture imports")
        .session;

    let surface: Vec<u64> =
        serde_json::from_value(golden["surfaceSeqs"].clone()).expect("surfaceSeqs");
    assert_eq!(session.surface(), surface);
    assert_eq!(session.surface(), vec![21, 13, 15, 28]);
    let messages: Vec<String> = session
        .derive_messages()
        .iter()
        .map(|m| canon(&value(m)))
        .collect();
    let golden_messages: Vec<String> = golden["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(canon)
        .collect();
    assert_eq!(messages, golden_messages);

    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let view = projection.view();
    assert_eq!(view.surface_nodes, 4);
    assert_eq!(
        view.surface_estimate.tokens,
        projection.estimate_nodes(&session.surface())
    );
    assert_eq!(
        view.surface_estimate.label,
        Label::Estimated {
            counter: "heuristic-bytes/4".into()
        }
    );

    // Exact accounting: two settlements (24/6 and 20/4) and one summarizer request (20/4).
    let ledger = projection.ledger();
    assert_eq!(ledger.requests().len(), 3);
    assert_eq!(ledger.settlements().requests(), 2);
    assert_eq!(ledger.settlements().usage().input, 44);
    assert_eq!(ledger.settlements().usage().output, 10);
    assert_eq!(ledger.auxiliary().requests(), 1);
    assert_eq!(ledger.requests()[1].kind, RequestKind::CompactionSummary);
    assert_eq!(ledger.cumulative().usage().input, 64);
    assert!(ledger.cumulative().total_tokens().label.is_exact());
    let last = view.last_request.expect("a settlement");
    assert_eq!(last.seq, Seq(28));
    assert_eq!(last.prompt_tokens().tokens, 20);

    // Pressure is anchored on the last settlement's exact prompt (the envelope is unchanged).
    assert_eq!(view.pressure.context_window, Some(128_000));
    assert_eq!(view.pressure.anchored_on, Some(Seq(28)));
    assert!(!view.pressure.estimated_prompt_tokens.label.is_exact());
    assert!(view.pressure.ratio.is_some_and(|r| r > 0.0 && r < 0.01));

    // The history keeps the shadowed prompt, marked; the summary names what it covers.
    let history = history_view(&session);
    let prompt = history
        .iter()
        .find(|e| e.seq == Seq(4))
        .expect("prompt listed");
    assert_eq!(
        prompt.mark,
        HistoryMark::Compacted {
            summary_seq: Seq(21)
        }
    );
    let summary = history
        .iter()
        .find(|e| e.seq == Seq(21))
        .expect("summary listed");
    assert_eq!(summary.kind, EntryKind::Summary { shadowed: vec![4] });
    assert_eq!(summary.mark, HistoryMark::Visible);

    assert!(
        recover_compaction(&session).is_empty(),
        "the fixture's compaction is closed"
    );
}
