//! While a turn is open, its newest tool result (and the call it answers) is neither
//! compacted nor pruned, however small the kept tail: the model has not answered it yet.

mod common;

use std::sync::Arc;

use common::{assistant, empty_session, push, tool_result, user};
use sessionlog_session::compaction::{
    compact, prune_tool_results, CompactionContext, CompactionOutcome, CompactionPolicy,
    DeterministicSummarizer, KeepRecent, PruneOptions,
};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};
use sessionlog_session::EventInput;

#[test]
fn active_turn_newest_tool_result_is_never_shadowed() {
    let mut session = empty_session();
    push(
        &mut session,
        EventInput::new("turn/start", 1000, r#"{"turn":1}"#),
    );
    push(
        &mut session,
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
    );
    push(&mut session, user("u0", &"please look ".repeat(200)));
    push(&mut session, assistant("a0", "looking", &["c0"]));
    push(
        &mut session,
        tool_result("r0", "c0", &"old output ".repeat(400)),
    );
    let call = push(&mut session, assistant("a1", "again", &["c1"]));
    let newest = push(
        &mut session,
        tool_result("r1", "c1", &"fresh output ".repeat(400)),
    );
    assert!(session.turn_open());

    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Tokens(0));
    let outcome = compact(
        &session,
        &projection,
        &policy,
        &mut DeterministicSummarizer::new(),
        &CompactionContext::new("c", 1),
    )
    .expect("plans");
    let CompactionOutcome::Compacted(report) = outcome else {
        panic!("expected a compaction, got {outcome:?}");
    };
    assert!(!report.shadowed.contains(&sessionlog_session::Seq(newest)));
    assert!(
        !report.shadowed.contains(&sessionlog_session::Seq(call)),
        "a call is never split from its result"
    );
    assert!(report.events[0].data.contains("\"turn\":1"));

    let options = PruneOptions::default()
        .with_threshold_bytes(500)
        .with_head_bytes(100)
        .with_tail_bytes(100);
    let prunes = prune_tool_results(&session, &projection, &options, 1).expect("plans");
    assert_eq!(prunes.len(), 2, "only the older result is pruned");
    assert!(prunes[0].data.contains("\"shadowedSeqs\":[4]"));
}
