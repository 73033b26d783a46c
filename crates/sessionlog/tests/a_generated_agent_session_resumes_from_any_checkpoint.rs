//! Agent sessions from the workload generator (turns, streamed settlements, tool calls,
//! request envelopes, summary compactions, an interrupted last turn) resumed from a
//! checkpoint at sampled cuts equal the full fold, token measurement and pressure included.

use std::sync::Arc;

use proptest::prelude::*;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{FormatVersion, Seq, Session, SessionHeader};
use sessionlog_testkit::resume::{check_resume_at_cuts, cut_points};

fn generated(seed: u64, turns: u64, compact_every: u64, interrupt: Option<usize>) -> Session {
    let mut session = Session::new(SessionHeader::new("g", 1, None), FormatVersion::current());
    let config = WorkloadConfig::default()
        .with_compact_every_turns(Some(compact_every))
        .with_chunks_per_message((1, 4))
        .with_tool_result_bytes((16, 256));
    let mut w = Workload::new(seed, config);
    let append = |session: &mut Session, events: Vec<sessionlog_session::EventInput>| {
        for e in events {
            if let Err(err) = session.try_append(e) {
                panic!("generated event refused: {err}");
            }
        }
    };
    append(&mut session, w.session_start(1));
    for _ in 0..turns {
        let next = session.next_seq().get();
        append(&mut session, w.turn(next, 2, None));
        if w.wants_compaction() {
            let next = session.next_seq().get();
            if let Some(events) = w.compaction(&session.surface(), Seq(next), 3) {
                append(&mut session, events);
            }
        }
    }
    let next = session.next_seq().get();
    append(&mut session, w.turn(next, 4, interrupt));
    session
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn generated_sessions_resume_from_any_checkpoint(
        seed in any::<u64>(),
        turns in 1u64..10,
        compact_every in 1u64..4,
        interrupt in prop::option::of(0usize..12),
    ) {
        let session = generated(seed, turns, compact_every, interrupt);
        let cuts = cut_points(session.events().len(), 40);
        let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
        for counter in [None, Some(&counter)] {
            let problems = check_resume_at_cuts(
                session.header(),
                session.version(),
                counter,
                session.events(),
                &cuts,
            );
            prop_assert!(problems.is_empty(), "{}", problems.join("\n"));
        }
    }
}
