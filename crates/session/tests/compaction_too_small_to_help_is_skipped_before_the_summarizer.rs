//! A span no larger than a summary message with an empty summary (the fixed preamble and
//! tags) cannot be replaced by anything smaller: the compaction is skipped before any
//! summarizer call, so no lock or failure record is written for a foreseeable failure.

mod common;

use std::sync::Arc;

use common::{assistant, empty_session, push, user};
use sessionlog_session::compaction::{
    compact, CompactionContext, CompactionOutcome, CompactionPolicy, KeepRecent, SkipReason,
    Summarizer, SummarizerError, Summary, SummaryRequest,
};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};

struct Counting(u32);

impl Summarizer for Counting {
    fn summarize(&mut self, _request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        self.0 += 1;
        Ok(Summary {
            blocks: vec!["s".into()],
            ..Summary::empty()
        })
    }
}

#[test]
fn compaction_too_small_to_help_is_skipped_before_the_summarizer() {
    let mut session = empty_session();
    for i in 0..2 {
        push(&mut session, user(&format!("u{i}"), "hi"));
        push(&mut session, assistant(&format!("a{i}"), "hello", &[]));
    }
    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Tokens(0));
    let mut summarizer = Counting(0);
    let outcome = compact(
        &session,
        &projection,
        &policy,
        &mut summarizer,
        &CompactionContext::new("x", 5),
    )
    .expect("plans");
    let CompactionOutcome::Skipped(SkipReason::SummaryCannotBeSmaller {
        shadowed_tokens,
        summary_floor_tokens,
    }) = outcome
    else {
        panic!("expected a skip, got {outcome:?}");
    };
    assert!(shadowed_tokens > 0);
    assert!(summary_floor_tokens >= shadowed_tokens);
    assert_eq!(summarizer.0, 0, "no summarizer call");
}
