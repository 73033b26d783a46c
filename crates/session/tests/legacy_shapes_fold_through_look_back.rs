//! A session whose events are not in memory folds events in older in-file shapes exactly as a
//! load of the whole session does: each stored event is upgraded in place, reading the
//! earlier events it needs through a `LookBack` that upgrades what it reads, including a
//! chain of legacy tool-result replacements, each taking the id of the one it replaces.

mod common;

use std::borrow::Cow;

use common::{dsh_fixture_dir, files_under, golden_for};
use sessionlog_session::{
    upgrade_event, Error, Event, FormatVersion, LookBack, Seq, Session, SessionHeader, SessionState,
};

/// Earlier events as a store that keeps none in memory hands them out: parsed from their
/// stored text and upgraded as they are read, looking further back through itself (as the
/// store's log reader does).
struct Stored<'a> {
    events: &'a [Event],
    session_id: &'a str,
}

impl LookBack for Stored<'_> {
    fn event_at(&self, seq: Seq) -> Result<Option<Cow<'_, Event>>, Error> {
        let Some(stored) = usize::try_from(seq.get())
            .ok()
            .and_then(|i| self.events.get(i))
        else {
            return Ok(None);
        };
        assert!(!stored.is_upgraded(), "the store holds stored events only");
        let mut event = stored.clone();
        upgrade_event(&mut event, self, self.session_id)?;
        Ok(Some(Cow::Owned(event)))
    }
}

/// Folds `stored` one event at a time through `SessionState::load`; returns the state and
/// the upgraded events.
fn fold_through_look_back(
    header: &SessionHeader,
    version: &FormatVersion,
    stored: &[Event],
) -> Result<(SessionState, Vec<Event>), Error> {
    let mut state = SessionState::new(header.clone(), version.clone());
    let mut upgraded = Vec::with_capacity(stored.len());
    for (i, event) in stored.iter().enumerate() {
        let mut event = event.clone();
        let past = Stored {
            events: &stored[..i],
            session_id: header.id(),
        };
        state.load(&mut event, &past)?;
        upgraded.push(event);
    }
    Ok((state, upgraded))
}

fn parse_log(text: &str) -> Option<(SessionHeader, Vec<Event>)> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = SessionHeader::parse(lines.next()?).ok()?;
    let events = lines
        .enumerate()
        .map(|(i, line)| Event::parse(line, i as u64))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some((header, events))
}

fn check(header: &SessionHeader, stored: &[Event]) -> Result<(), String> {
    let version = FormatVersion::dsh_v0();
    let loaded = Session::from_events(header.clone(), version.clone(), stored.to_vec());
    let folded = fold_through_look_back(header, &version, stored);
    match (loaded, folded) {
        (Err(a), Err(b)) if a == b => Ok(()),
        (Ok(session), Ok((state, upgraded))) => {
            if &state != session.state() {
                return Err("state differs from the load's".into());
            }
            for (a, b) in upgraded.iter().zip(session.events()) {
                if a.event_type() != b.event_type() || a.data().raw() != b.data().raw() {
                    return Err(format!("event {} upgraded differently", a.seq().get()));
                }
            }
            Ok(())
        }
        (a, b) => Err(format!("load gave {:?}, fold gave {:?}", a.err(), b.err())),
    }
}

#[test]
fn every_fixture_folds_through_look_back_as_it_loads() {
    let Some(root) = dsh_fixture_dir("every_fixture_folds_through_look_back_as_it_loads") else {
        return;
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for log in files_under(&root.join("logs"), ".jsonl") {
        if golden_for(&root, &log)["error"].is_string() {
            continue;
        }
        let text = std::fs::read_to_string(&log).expect("fixture readable");
        let Some((header, stored)) = parse_log(&text) else {
            continue;
        };
        checked += 1;
        if let Err(problem) = check(&header, &stored) {
            failures.push(format!("{}: {problem}", log.display()));
        }
    }
    assert!(checked > 50, "only {checked} fixtures parsed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Parses envelope lines numbered from 0.
fn events(lines: &[&str]) -> Vec<Event> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| Event::parse(l, i as u64).unwrap_or_else(|e| panic!("line {i}: {e}")))
        .collect()
}

#[test]
fn every_older_shape_folds_through_look_back_as_it_loads() {
    // The corpus is written in current shapes; these are the older ones a load upgrades.
    let header = SessionHeader::new("old", 1000, None);
    let stored = events(&[
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"user/message","seq":2,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"steering/message","seq":3,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"and then"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"assistant/message","seq":4,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"text","text":"ok"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
        r#"{"type":"step/end","seq":5,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":6,"time":1,"data":{"turn":1,"reason":{"kind":"aborted"}}}"#,
    ]);
    assert!(stored.iter().all(|e| !e.is_upgraded()));
    assert!(stored.iter().any(sessionlog_session::needs_upgrade));
    check(&header, &stored).expect("fold through look-back matches the load");
    let (state, upgraded) =
        fold_through_look_back(&header, &FormatVersion::dsh_v0(), &stored).expect("fold");
    assert_eq!(state.surface(), [2, 3, 4]);
    assert_eq!(upgraded[3].event_type(), "user/message");
    assert!(upgraded.iter().filter(|e| e.is_upgraded()).count() >= 5);
}

#[test]
fn a_chain_of_legacy_tool_result_replacements_takes_the_first_results_id() {
    let header = SessionHeader::new("chain", 1000, None);
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}"#,
        r#"{"type":"tool/result","seq":3,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"a long output"}],"isError":false},"surfaceOp":"append"}"#,
        r#"{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"shorter"}],"isError":false},"sourceEventSeqs":[3],"surfaceOp":{"op":"replace","start":3,"end":3}}"#,
        r#"{"type":"tool/result","seq":5,"time":1,"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"short"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":{"op":"replace","start":4,"end":4}}"#,
    ];
    let stored = events(&lines);
    check(&header, &stored).expect("fold through look-back matches the load");
    let (state, upgraded) =
        fold_through_look_back(&header, &FormatVersion::dsh_v0(), &stored).expect("fold");
    assert_eq!(state.surface(), [2, 5]);
    let id = upgraded[5]
        .data()
        .get("message")
        .and_then(|m| m.get("id"))
        .and_then(|i| i.as_str().map(|s| s.into_owned()));
    assert_eq!(id.as_deref(), Some("legacy-message:chain:3"));
}
