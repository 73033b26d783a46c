//! What a compaction plan carries of the range it chose: every shadowed node's message,
//! verbatim and in surface order, including a tool exchange and an earlier summary; and a
//! range that is nothing but one earlier summary is skipped as already compact.

mod common;

use std::sync::Arc;

use common::{
    assistant, canon, compact_keeping_a_fifth, push, session_in_step, tool_result, user, value,
};
use sessionlog_session::compaction::{
    plan_compaction, CompactionPolicy, DeterministicSummarizer, KeepRecent, SkipReason, Summarizer,
    SummarizerError, Summary, SummaryRequest,
};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};
use sessionlog_session::{Seq, Session};

/// Keeps what each request held.
#[derive(Default)]
struct Recording {
    inner: DeterministicSummarizer,
    messages: Vec<Vec<String>>,
    previous: Vec<Vec<String>>,
}

impl Summarizer for Recording {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        self.messages
            .push(request.messages.iter().map(|m| (*m).to_owned()).collect());
        self.previous.push(request.previous_summaries.clone());
        self.inner.summarize(request)
    }
}

fn grow(session: &mut Session, from: usize) {
    for i in from..from + 4 {
        push(session, user(&format!("u{i}"), &"what fails ".repeat(40)));
        let call = format!("call-{i}");
        push(
            session,
            assistant(&format!("a{i}"), &"let me look ".repeat(30), &[&call]),
        );
        push(
            session,
            tool_result(&format!("r{i}"), &call, &"build output ".repeat(40)),
        );
    }
}

fn projection(session: &Session) -> TokenProjection {
    TokenProjection::from_session(session, Arc::new(HeuristicCounter)).expect("folds")
}

/// The message of a surface event as the log holds it: a `user/message`'s data, any other
/// surface event's `data.message`.
fn stored_message(session: &Session, seq: Seq) -> String {
    let event = session.event(seq).expect("shadowed event");
    let raw = value(event.raw());
    let message = match event.event_type() {
        "user/message" => &raw["data"],
        _ => &raw["data"]["message"],
    };
    canon(message)
}

#[test]
fn the_summarizer_gets_every_shadowed_message_verbatim_in_surface_order() {
    let mut session = session_in_step();
    let mut summarizer = Recording::default();
    grow(&mut session, 0);
    let shadowed = compact_keeping_a_fifth(&mut session, &mut summarizer, "first");
    grow(&mut session, 100);
    let shadowed_again = compact_keeping_a_fifth(&mut session, &mut summarizer, "second");
    for (shadowed, messages) in [&shadowed, &shadowed_again]
        .into_iter()
        .zip(&summarizer.messages)
    {
        assert!(
            shadowed.len() > 3,
            "a range with tool exchanges: {shadowed:?}"
        );
        let expected: Vec<String> = shadowed
            .iter()
            .map(|seq| stored_message(&session, *seq))
            .collect();
        let got: Vec<String> = messages.iter().map(|m| canon(&value(m))).collect();
        assert_eq!(got, expected);
    }
    // The second range starts at the first summary, whose text is handed on as well.
    assert!(summarizer.previous[0].is_empty());
    assert_eq!(summarizer.previous[1].len(), 1, "{:?}", summarizer.previous);
}

#[test]
fn a_range_of_one_earlier_summary_is_skipped_as_already_compact() {
    let mut session = session_in_step();
    let mut summarizer = Recording::default();
    grow(&mut session, 0);
    compact_keeping_a_fifth(&mut session, &mut summarizer, "first");
    let summary = session.surface()[0];
    let projection = projection(&session);
    // Keep every node after the summary verbatim: the summary alone may be shadowed.
    let keep = projection.surface_tokens() - projection.estimate_nodes(&[summary]);
    let alone = CompactionPolicy::default().with_keep_recent(KeepRecent::Tokens(keep));
    let plan = plan_compaction(&session, &projection, &alone).expect("plans");
    assert_eq!(plan.err(), Some(SkipReason::AlreadyCompact));
    // One more node in the range, and there is something to summarize again.
    let next = session.surface()[1];
    let keep = keep - projection.estimate_nodes(&[next]);
    let two = CompactionPolicy::default().with_keep_recent(KeepRecent::Tokens(keep));
    let plan = plan_compaction(&session, &projection, &two)
        .expect("plans")
        .expect("a range of two nodes");
    assert_eq!(plan.shadowed, vec![summary, next]);
}
