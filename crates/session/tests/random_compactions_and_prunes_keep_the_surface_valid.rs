//! Random sessions with random compactions and prunes: every event the engine writes is
//! accepted, tool calls stay paired in the derived messages, each summary's shadowed
//! token count equals the estimate of the nodes it shadows, the incremental projection
//! equals one folded from scratch, and replaying the log reproduces the same surface.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{assistant, session_in_step, tool_result, user};
use proptest::prelude::*;
use sessionlog_session::compaction::{
    compact, prune_tool_results, CompactionContext, CompactionOutcome, CompactionPolicy,
    DeterministicSummarizer, KeepRecent, PruneOptions,
};
use sessionlog_session::json::JsonRef;
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection};
use sessionlog_session::{EventInput, Session, SessionHeader};

#[derive(Debug, Clone)]
enum Op {
    User(usize),
    Exchange { calls: usize, result_words: usize },
    Compact { keep_percent: u8 },
    Prune { threshold: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..120).prop_map(Op::User),
        3 => (0usize..3, 1usize..400).prop_map(|(calls, result_words)| Op::Exchange { calls, result_words }),
        1 => (0u8..60).prop_map(|keep_percent| Op::Compact { keep_percent }),
        1 => (200usize..1500).prop_map(|threshold| Op::Prune { threshold }),
    ]
}

fn words(n: usize) -> String {
    "lorem ".repeat(n).trim_end().to_owned()
}

struct World {
    session: Session,
    projection: TokenProjection,
    next_id: u64,
}

impl World {
    fn append(&mut self, input: EventInput) {
        let event = self
            .session
            .try_append(input)
            .expect("engine event accepted")
            .clone();
        self.projection.apply(&event).expect("projection folds");
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }
}

fn check_pairing(session: &Session) {
    let mut open: HashSet<String> = HashSet::new();
    for message in session.derive_messages() {
        let message = JsonRef::new(message);
        for block in message.get("content").iter().flat_map(|c| c.elements()) {
            match block.get("type").and_then(|t| t.as_str()).as_deref() {
                Some("tool-call") => {
                    open.insert(
                        block
                            .get("id")
                            .and_then(|i| i.as_str())
                            .expect("id")
                            .into_owned(),
                    );
                }
                Some("tool-result") => {
                    let call = block
                        .get("toolCallId")
                        .and_then(|i| i.as_str())
                        .expect("call id");
                    assert!(
                        open.remove(call.as_ref()),
                        "result {call} has no earlier call"
                    );
                }
                _ => {}
            }
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

fn run(ops: Vec<Op>) {
    let session = session_in_step();
    let projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    let mut world = World {
        session,
        projection,
        next_id: 0,
    };
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::User(n) => {
                let id = world.id("u");
                world.append(user(&id, &words(n)));
            }
            Op::Exchange {
                calls,
                result_words,
            } => {
                let id = world.id("a");
                let call_ids: Vec<String> = (0..calls).map(|_| world.id("c")).collect();
                let refs: Vec<&str> = call_ids.iter().map(String::as_str).collect();
                world.append(assistant(&id, &words(5), &refs));
                for call in &call_ids {
                    let id = world.id("r");
                    world.append(tool_result(&id, call, &words(result_words)));
                }
            }
            Op::Compact { keep_percent } => {
                let policy = CompactionPolicy::default()
                    .with_keep_recent(KeepRecent::Fraction(f64::from(keep_percent) / 100.0));
                let context = CompactionContext::new(format!("cmp-{step}"), 1000);
                let outcome = compact(
                    &world.session,
                    &world.projection,
                    &policy,
                    &mut DeterministicSummarizer::new(),
                    &context,
                )
                .expect("plans");
                let events = match outcome {
                    CompactionOutcome::Compacted(report) => {
                        assert_eq!(
                            report.shadowed_tokens,
                            world.projection.estimate_nodes(&report.shadowed)
                        );
                        assert!(report.summary_tokens < report.shadowed_tokens);
                        let summary = JsonRef::new(&report.events[1].data);
                        let recorded = summary
                            .get("shadowedTokenCount")
                            .and_then(|c| c.as_seq())
                            .expect("count recorded");
                        assert_eq!(recorded, report.shadowed_tokens);
                        report.events
                    }
                    CompactionOutcome::Failed { events, .. } => events,
                    CompactionOutcome::Skipped(_) => Vec::new(),
                };
                for event in events {
                    world.append(event);
                }
            }
            Op::Prune { threshold } => {
                let options = PruneOptions::default()
                    .with_threshold_bytes(threshold)
                    .with_head_bytes(60)
                    .with_tail_bytes(40);
                let events = prune_tool_results(&world.session, &world.projection, &options, 1000)
                    .expect("plans");
                for event in events {
                    world.append(event);
                }
            }
        }
        check_pairing(&world.session);
    }
    let fresh =
        TokenProjection::from_session(&world.session, Arc::new(HeuristicCounter)).expect("folds");
    assert_eq!(fresh.view(), world.projection.view());
    assert_eq!(
        fresh.surface_tokens(),
        fresh.estimate_nodes(&world.session.surface_state().to_vec())
    );
    let replayed = Session::from_events(
        SessionHeader::new("s1", 1000, Some("/work")),
        world.session.version().clone(),
        world.session.events().to_vec(),
    )
    .expect("log replays");
    assert_eq!(replayed.surface(), world.session.surface());
    assert_eq!(replayed.derive_messages(), world.session.derive_messages());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn random_compactions_and_prunes_keep_the_surface_valid(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
