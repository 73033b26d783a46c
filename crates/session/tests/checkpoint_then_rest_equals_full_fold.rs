//! A session resumed from a checkpoint is the session folded from scratch: for every DSH
//! fixture and for random agent sessions, at every cut (or a sample of cuts for long
//! sessions), fold 0..k, checkpoint, decode, fold k..n, and compare with the full fold,
//! token measurement, pressure and restart closers included.

mod common;

use std::sync::Arc;

use common::{dsh_fixture_dir, files_under, golden_for};
use proptest::prelude::*;
use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{import_jsonl, ImportOptions, Session};

#[path = "../../testkit/src/resume.rs"]
mod resume;

fn counters() -> [Option<Arc<dyn TokenCounter>>; 2] {
    [None, Some(Arc::new(HeuristicCounter))]
}

fn check_session(session: &Session, samples: usize) -> Vec<String> {
    let cuts = resume::cut_points(session.events().len(), samples);
    let mut problems = Vec::new();
    for counter in counters() {
        problems.extend(resume::check_resume_at_cuts(
            session.header(),
            session.version(),
            counter.as_ref(),
            session.events(),
            &cuts,
        ));
    }
    problems
}

#[test]
fn every_fixture_resumed_at_every_cut_equals_its_full_fold() {
    let Some(root) = dsh_fixture_dir("every_fixture_resumed_at_every_cut_equals_its_full_fold")
    else {
        return;
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for log in files_under(&root.join("logs"), ".jsonl") {
        if golden_for(&root, &log)["error"].is_string() {
            continue;
        }
        let bytes = std::fs::read(&log).expect("fixture readable");
        let Ok(import) = import_jsonl(&bytes, &ImportOptions::default()) else {
            continue;
        };
        checked += 1;
        for problem in check_session(&import.session, 32) {
            failures.push(format!("{}: {problem}", log.display()));
        }
    }
    assert!(checked > 50, "only {checked} fixtures imported");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_sessions_resumed_at_every_cut_equal_their_full_fold(
        steps in prop::collection::vec(common::agent_step(), 0..80),
    ) {
        let session = common::agent_session(&steps);
        let problems = check_session(&session, 96);
        prop_assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
