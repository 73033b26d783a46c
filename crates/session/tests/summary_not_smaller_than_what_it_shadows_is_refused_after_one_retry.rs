//! A summary whose replacement is not smaller than the span it would shadow is refused;
//! the summarizer is asked once more, and when the retry is no better the compaction is
//! recorded as failed (start, then an end with the error) and the surface is unchanged.

mod common;

use std::sync::Arc;

use common::{assistant, empty_session, push, user};
use sessionlog_session::compaction::{
    compact, CompactionContext, CompactionOutcome, CompactionPolicy, KeepRecent, Summarizer,
    SummarizerError, Summary, SummaryRequest,
};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};

struct Verbose {
    calls: Vec<u32>,
}

impl Summarizer for Verbose {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        self.calls.push(request.attempt);
        Ok(Summary {
            blocks: vec!["far too long ".repeat(2000)],
            provider: "p".into(),
            model: "m".into(),
            usage: None,
            max_tokens: None,
        })
    }
}

#[test]
fn summary_not_smaller_than_what_it_shadows_is_refused_after_one_retry() {
    let mut session = empty_session();
    // Long enough that a summary could be smaller (a shorter span is skipped before any
    // summarizer call; see compaction_too_small_to_help_is_skipped_before_the_summarizer).
    let question = "a question of some length ".repeat(8);
    let answer = "an answer of some length ".repeat(8);
    for i in 0..4 {
        push(&mut session, user(&format!("u{i}"), &question));
        push(&mut session, assistant(&format!("a{i}"), &answer, &[]));
    }
    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Tokens(0));
    let mut summarizer = Verbose { calls: Vec::new() };
    let before = session.surface();
    let outcome = compact(
        &session,
        &projection,
        &policy,
        &mut summarizer,
        &CompactionContext::new("x", 5),
    )
    .expect("plans");
    assert_eq!(summarizer.calls, vec![1, 2], "one try and one retry");
    let CompactionOutcome::Failed {
        events,
        error,
        attempts,
    } = outcome
    else {
        panic!("expected a refusal, got {outcome:?}");
    };
    assert_eq!(attempts, 2);
    assert!(error.contains("not smaller"), "{error}");
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].event_type, "compaction/start");
    assert_eq!(events[1].event_type, "compaction/end");
    assert!(events[1].data.contains("\"error\""));
    for event in events {
        session.try_append(event).expect("failure record accepted");
    }
    assert_eq!(session.surface(), before);
}
