//! A crash after any prefix of a compaction transaction (start, summary, replacement,
//! end), followed by recovery, leaves a session that derives exactly the messages of
//! before or of after the compaction, with its lock closed.

mod common;

use std::sync::Arc;

use common::{assistant, push, session_in_step, tool_result, user};
use sessionlog_session::compaction::{
    compact, recover_compaction, CompactionContext, CompactionOutcome, CompactionPolicy,
    DeterministicSummarizer, KeepRecent, INTERRUPTED_COMPACTION,
};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};
use sessionlog_session::{Session, SessionHeader};

fn long(n: usize) -> String {
    "word ".repeat(n).trim_end().to_owned()
}

#[test]
fn crash_at_every_point_of_a_compaction_derives_before_or_after() {
    let mut session = session_in_step();
    for i in 0..6 {
        push(&mut session, user(&format!("u{i}"), &long(200)));
        push(
            &mut session,
            assistant(&format!("a{i}"), &long(50), &[&format!("c{i}")]),
        );
        push(
            &mut session,
            tool_result(&format!("r{i}"), &format!("c{i}"), &long(300)),
        );
    }
    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let policy = CompactionPolicy::default().with_keep_recent(KeepRecent::Fraction(0.2));
    let outcome = compact(
        &session,
        &projection,
        &policy,
        &mut DeterministicSummarizer::new(),
        &CompactionContext::new("cmp-1", 2000),
    )
    .expect("plans");
    let CompactionOutcome::Compacted(report) = outcome else {
        panic!("expected a compaction, got {outcome:?}");
    };
    assert_eq!(report.events.len(), 4);

    let before: Vec<String> = session
        .derive_messages()
        .iter()
        .map(|m| m.to_string())
        .collect();
    let mut full = session.clone();
    for event in report.events.clone() {
        full.try_append(event).expect("transaction accepted");
    }
    let after: Vec<String> = full
        .derive_messages()
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_ne!(before, after);
    assert!(after.len() < before.len());

    for cut in 0..=report.events.len() {
        let mut crashed = session.clone();
        for event in report.events.iter().take(cut).cloned() {
            crashed.try_append(event).expect("prefix accepted");
        }
        // Reopen from the stored events, as a cold load would.
        let mut reopened = Session::from_events(
            SessionHeader::new("s1", 1000, Some("/work")),
            crashed.version().clone(),
            crashed.events().to_vec(),
        )
        .expect("prefix reloads");
        let closers = recover_compaction(&reopened);
        assert_eq!(closers.len(), usize::from(cut > 0 && cut < 4), "cut {cut}");
        for closer in closers {
            let errored = closer.data.contains(INTERRUPTED_COMPACTION);
            assert_eq!(
                errored,
                cut < 3,
                "cut {cut}: error end only before the replacement"
            );
            reopened.try_append(closer).expect("closer accepted");
        }
        assert!(
            recover_compaction(&reopened).is_empty(),
            "cut {cut}: lock closed"
        );
        let derived: Vec<String> = reopened
            .derive_messages()
            .iter()
            .map(|m| m.to_string())
            .collect();
        let expected = if cut < 3 { &before } else { &after };
        assert_eq!(&derived, expected, "cut {cut}");
    }
}
