//! The session state alone (no events kept) tells a reader everything it needs to rebuild a
//! view by reading events by seq: which surface nodes contribute a message, the latest
//! request header and context, and the token measurement a separate projection would fold.

mod common;

use std::sync::Arc;

use common::{dsh_fixture_dir, files_under, golden_for};
use sessionlog_session::tokens::{HeuristicCounter, TokenProjection, LEDGER_RECENT};
use sessionlog_session::{
    derive_message, derive_message_content, import_jsonl, ImportOptions, RuleSet, Session,
    SessionState,
};

/// An empty state of `session`'s header and rules that measures tokens.
fn state_with_tokens(session: &Session) -> SessionState {
    SessionState::with_tokens(
        session.header().clone(),
        session.version().clone(),
        Arc::new(HeuristicCounter),
    )
}

/// The sessions of the fixture logs under `root` that import (and are not meant to fail),
/// each with its log's path.
fn fixture_sessions(root: &std::path::Path) -> impl Iterator<Item = (String, Session)> + '_ {
    files_under(&root.join("logs"), ".jsonl")
        .into_iter()
        .filter(|log| !golden_for(root, log)["error"].is_string())
        .filter_map(|log| {
            let bytes = std::fs::read(&log).expect("fixture readable");
            let import = import_jsonl(&bytes, &ImportOptions::default()).ok()?;
            Some((log.display().to_string(), import.session))
        })
}

/// Folds the (already upgraded) events of `session` into a fresh state that measures tokens.
fn fold_with_tokens(session: &Session) -> SessionState {
    let mut state = state_with_tokens(session);
    let events = session.events();
    for (i, event) in events.iter().enumerate() {
        state
            .append(event, RuleSet::Dsh, &&events[..i])
            .unwrap_or_else(|e| panic!("event {i} refused on refold: {e}"));
    }
    state
}

fn check(session: &Session) -> Vec<String> {
    let mut problems = Vec::new();
    let state = fold_with_tokens(session);
    if state.surface() != session.surface() {
        problems.push("surface differs from the session's".to_owned());
    }
    // The view a reader builds: message nodes in order, each event read back by seq.
    let read_back: Vec<&str> = state
        .message_nodes()
        .filter_map(|seq| session.event(seq))
        .filter_map(|event| derive_message(session.version(), event))
        .collect();
    if read_back != session.derive_messages() {
        problems.push("messages read back by seq differ from derive_messages".to_owned());
    }
    if state.message_nodes().count() != session.derive_messages().len() {
        problems.push("message node count differs".to_owned());
    }
    let last_of = |t: &str| {
        session
            .events()
            .iter()
            .rev()
            .find(|e| e.event_type() == t)
            .map(|e| e.seq())
    };
    if state.latest_request_header() != last_of("request/header") {
        problems.push("latest request/header seq differs".to_owned());
    }
    if state.latest_request_context() != last_of("request/context") {
        problems.push("latest request/context seq differs".to_owned());
    }
    let projection =
        TokenProjection::from_session(session, Arc::new(HeuristicCounter)).expect("token fold");
    if state.token_view() != Some(projection.view()) {
        problems.push(format!(
            "token view {:?} != projection's {:?}",
            state.token_view(),
            projection.view()
        ));
    }
    // The state's ledger is bounded: exact totals, newest settlement and unreadable count,
    // and the newest records of the projection's full list.
    match state.usage_ledger() {
        None => problems.push("the state measures no usage".to_owned()),
        Some(kept) => {
            let full = projection.ledger();
            let tail = |all: usize, n: usize| all.saturating_sub(n);
            if kept.settlements() != full.settlements()
                || kept.auxiliary() != full.auxiliary()
                || kept.last_settlement() != full.last_settlement()
                || kept.unreadable_count() != full.unreadable().len() as u64
                || full
                    .requests()
                    .get(tail(full.requests().len(), kept.requests().len())..)
                    != Some(kept.requests())
                || full
                    .unreadable()
                    .get(tail(full.unreadable().len(), kept.unreadable().len())..)
                    != Some(kept.unreadable())
                || kept.requests().len() != full.requests().len().min(LEDGER_RECENT)
            {
                problems.push("usage ledger differs".to_owned());
            }
        }
    }
    for seq in state.surface() {
        if state.node_estimate(seq) != projection.node_estimate(seq) {
            problems.push(format!("estimate of node {seq} differs"));
        }
    }
    problems
}

#[test]
fn every_fixture_state_rebuilds_messages_requests_and_tokens() {
    let Some(root) = dsh_fixture_dir("every_fixture_state_rebuilds_messages_requests_and_tokens")
    else {
        return;
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for (log, session) in fixture_sessions(&root) {
        checked += 1;
        for problem in check(&session) {
            failures.push(format!("{log}: {problem}"));
        }
    }
    assert!(checked > 0, "no fixture imported");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_state_without_tokens_reports_none() {
    let session = common::session_in_step();
    assert!(!session.state().measures_tokens());
    assert!(session.state().pressure().is_none());
    assert!(session.state().token_view().is_none());
    assert_eq!(session.state().message_nodes().count(), 0);
}

/// The message a state hands on for the event it folded last is the one a fresh look
/// derives, for every event of every fixture; it is handed on for that very event only
/// (not for an equal copy, nor once the next event is folded), and for every surface event
/// whose message lies in its envelope.
#[test]
fn the_message_handed_on_is_the_one_the_event_derives() {
    let Some(root) = dsh_fixture_dir("the_message_handed_on_is_the_one_the_event_derives") else {
        return;
    };
    let raw = |m: Option<(&str, Option<sessionlog_session::json::JsonRef<'_>>)>| {
        m.map(|(message, content)| (message.to_owned(), content.map(|c| c.raw().to_owned())))
    };
    let (mut checked, mut handed_on) = (0, 0);
    for (log, session) in fixture_sessions(&root) {
        let mut state = state_with_tokens(&session);
        let events = session.events();
        for (i, event) in events.iter().enumerate() {
            state
                .append(event, RuleSet::Dsh, &&events[..i])
                .unwrap_or_else(|e| panic!("{log}: event {i} refused: {e}"));
            checked += 1;
            let fresh = derive_message_content(session.version(), event);
            match state.folded_message(event) {
                Some(known) => {
                    handed_on += 1;
                    assert_eq!(raw(known), raw(fresh), "{log}: event {i}");
                    assert!(state.folded_message(&event.clone()).is_none());
                }
                None => assert!(
                    session.version().surface_type(event.event_type()).is_none()
                        || event.raw().find(event.data().raw()).is_none(),
                    "{log}: surface event {i} handed on nothing"
                ),
            }
            if let Some(before) = i.checked_sub(1).and_then(|b| events.get(b)) {
                assert!(state.folded_message(before).is_none(), "event {i}: stale");
            }
        }
    }
    assert!(
        checked > 0 && handed_on > 0,
        "{checked} events, {handed_on} handed on"
    );
}
