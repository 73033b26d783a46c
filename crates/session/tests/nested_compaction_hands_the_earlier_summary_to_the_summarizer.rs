//! A second compaction may shadow the first one's summary node: it cites that node (not
//! the events behind it), and the summarizer receives the earlier summary's text.

mod common;

use common::{assistant, compact_keeping_a_fifth, push, session_in_step, user};
use sessionlog_session::compaction::{
    DeterministicSummarizer, Summarizer, SummarizerError, Summary, SummaryRequest,
};
use sessionlog_session::Session;

struct Recording {
    inner: DeterministicSummarizer,
    previous: Vec<Vec<String>>,
}

impl Summarizer for Recording {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        self.previous.push(request.previous_summaries.clone());
        self.inner.summarize(request)
    }
}

fn grow(session: &mut Session, from: usize) {
    for i in from..from + 5 {
        push(
            session,
            user(&format!("u{i}"), &"question about the build ".repeat(30)),
        );
        push(
            session,
            assistant(&format!("a{i}"), &"answer with details ".repeat(30), &[]),
        );
    }
}

#[test]
fn nested_compaction_hands_the_earlier_summary_to_the_summarizer() {
    let mut session = session_in_step();
    let mut summarizer = Recording {
        inner: DeterministicSummarizer::new(),
        previous: Vec::new(),
    };
    grow(&mut session, 0);
    compact_keeping_a_fifth(&mut session, &mut summarizer, "first");
    let first_summary = session.surface()[0];
    assert!(summarizer.previous[0].is_empty());

    grow(&mut session, 100);
    let shadowed = compact_keeping_a_fifth(&mut session, &mut summarizer, "second");
    assert_eq!(
        shadowed[0], first_summary,
        "the new range starts at the earlier summary"
    );
    let earlier = &summarizer.previous[1];
    assert_eq!(earlier.len(), 1);
    assert!(earlier[0].contains("messages condensed"), "{earlier:?}");
    let newest = session.surface()[0];
    let replacement = session.event(newest).expect("event");
    assert!(replacement
        .source_event_seqs()
        .expect("sources")
        .contains(&first_summary));
}
