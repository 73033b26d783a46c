//! Loading a stored event in two halves (`LoadPreparer::prepare`, then
//! `SessionState::load_prepared`) reaches exactly the state a plain `SessionState::load`
//! reaches and refuses exactly what it refuses, with the same error: on every line of every
//! DSH fixture log (the invalid ones included), and on random agent sessions with and
//! without a random damage (an event dropped, retyped, or with a payload key renamed or
//! the surface operation removed), with and without token measurement. A damage that every
//! load must refuse (an event missing before the end, a surface event without its surface
//! operation) must be refused by both. A preparation once loaded is spent: loading the
//! event left in it again (a third state, fed only such events) is a plain load too.

mod common;

use std::sync::Arc;

use common::{dsh_fixture_dir, files_under};
use proptest::prelude::*;
use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{Event, FormatVersion, SessionHeader, SessionState};

fn counters() -> [Option<Arc<dyn TokenCounter>>; 2] {
    [None, Some(Arc::new(HeuristicCounter))]
}

fn empty_state(
    header: &SessionHeader,
    version: &FormatVersion,
    counter: Option<&Arc<dyn TokenCounter>>,
) -> SessionState {
    match counter {
        Some(c) => SessionState::with_tokens(header.clone(), version.clone(), Arc::clone(c)),
        None => SessionState::new(header.clone(), version.clone()),
    }
}

/// What the two loads did with each event, in order; ends with the first refusal.
#[derive(Debug, Default)]
struct Outcome {
    /// Events both loads accepted.
    accepted: usize,
    /// The refusal both made, if any.
    refused: Option<String>,
}

/// Loads `events` both ways, comparing the states after every event and the errors;
/// returns what happened or the first difference.
fn load_both_ways(
    header: &SessionHeader,
    version: &FormatVersion,
    counter: Option<&Arc<dyn TokenCounter>>,
    events: &[Event],
) -> Result<Outcome, String> {
    let mut plain = empty_state(header, version, counter);
    let mut halves = empty_state(header, version, counter);
    let mut spent = empty_state(header, version, counter);
    let mut preparer = halves.load_preparer();
    // The upgraded events the loads look back at, as a store reads them back.
    let mut past: Vec<Event> = Vec::new();
    let mut outcome = Outcome::default();
    for event in events {
        let mut one = event.clone();
        let a = plain.load(&mut one, &past.as_slice());
        let mut prepared = preparer.prepare(event.clone());
        let b = halves.load_prepared(&mut prepared, &past.as_slice());
        let c = spent.load_prepared(&mut prepared, &past.as_slice());
        if prepared.event() != event {
            return Err(format!(
                "seq {}: the event was not left as stored",
                event.seq()
            ));
        }
        if format!("{b:?}") != format!("{c:?}") {
            return Err(format!(
                "seq {}: prepared load {b:?}, its spent preparation loaded {c:?}",
                event.seq()
            ));
        }
        match (a, b) {
            (Ok(()), Ok(())) => {
                if plain != halves || plain != spent {
                    return Err(format!("states differ after seq {}", event.seq()));
                }
                if plain.token_view() != halves.token_view() {
                    return Err(format!("token views differ after seq {}", event.seq()));
                }
                outcome.accepted += 1;
                past.push(one);
            }
            (Err(a), Err(b)) => {
                let (a, b) = (format!("{a:?}"), format!("{b:?}"));
                if a != b {
                    return Err(format!("seq {}: refused as {a} and as {b}", event.seq()));
                }
                outcome.refused = Some(a);
                return Ok(outcome);
            }
            (a, b) => {
                return Err(format!(
                    "seq {}: plain load {a:?}, prepared load {b:?}",
                    event.seq()
                ))
            }
        }
    }
    Ok(outcome)
}

/// The header and the events of a DSH log whose lines parse (parsing stops at the first
/// line that does not: such a line never reaches a fold).
fn parse_log(text: &str) -> Option<(SessionHeader, Vec<Event>)> {
    let mut lines = text.lines();
    let header = SessionHeader::parse(lines.next()?).ok()?;
    let events = lines
        .enumerate()
        .map_while(|(i, line)| Event::parse(line, i as u64).ok())
        .collect();
    Some((header, events))
}

#[test]
fn every_fixture_line_loads_the_same_in_two_halves() {
    let Some(root) = dsh_fixture_dir("every_fixture_line_loads_the_same_in_two_halves") else {
        return;
    };
    let version = FormatVersion::dsh_v0();
    let (mut logs, mut refused, mut accepted) = (0, 0, 0);
    let mut failures = Vec::new();
    for log in files_under(&root.join("logs"), ".jsonl") {
        let Ok(text) = std::fs::read_to_string(&log) else {
            continue;
        };
        let Some((header, events)) = parse_log(&text) else {
            continue;
        };
        logs += 1;
        for counter in counters() {
            match load_both_ways(&header, &version, counter.as_ref(), &events) {
                Ok(outcome) => {
                    accepted += outcome.accepted;
                    refused += usize::from(outcome.refused.is_some());
                }
                Err(problem) => failures.push(format!("{}: {problem}", log.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(logs > 50, "only {logs} fixture logs parsed");
    assert!(accepted > 1000, "only {accepted} events loaded");
    assert!(
        refused > 0,
        "no fixture was refused: the refusals went untested"
    );
}

/// A damage to one event's text, so that loads refuse it (or something after it).
#[derive(Debug, Clone)]
enum Damage {
    /// The event is left out (every later seq is then one too high).
    Drop,
    /// Its type is another type of the vocabulary.
    Retype(&'static str),
    /// A payload key is spelled otherwise.
    RenameKey(&'static str, &'static str),
    /// Its surface operation is removed.
    NoSurfaceOp,
}

const TYPES: [&str; 10] = [
    "user/message",
    "assistant/message",
    "tool/result",
    "turn/start",
    "turn/end",
    "step/start",
    "tool/call",
    "request/header",
    "compaction/summary",
    "no/such-type",
];

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Drop),
        prop::sample::select(TYPES.to_vec()).prop_map(Damage::Retype),
        prop::sample::select(vec![
            ("\"content\"", "\"contents\""),
            ("\"role\"", "\"rôle\""),
            ("\"turn\"", "\"turns\""),
            ("\"config\"", "\"conf\""),
            ("\"callId\"", "\"call\""),
            ("\"toolCallId\"", "\"callID\""),
            ("\"id\"", "\"ID\""),
        ])
        .prop_map(|(a, b)| Damage::RenameKey(a, b)),
        Just(Damage::NoSurfaceOp),
    ]
}

/// `events` with `damage` done to the event at `at` (modulo their number); an event
/// whose damaged text no longer parses is left as it was. The flag says whether every load
/// must refuse the result: a dropped event that is not the last (each later seq is then one
/// too high), and a surface event whose surface operation was removed.
fn damaged(events: &[Event], at: usize, damage: &Damage) -> (Vec<Event>, bool) {
    let mut out: Vec<Event> = events.to_vec();
    if out.is_empty() {
        return (out, false);
    }
    let at = at % out.len();
    let raw = out[at].raw().to_owned();
    let seq = out[at].seq().get();
    let text = match damage {
        Damage::Drop => {
            let last = at + 1 == out.len();
            out.remove(at);
            return (out, !last);
        }
        Damage::Retype(t) => raw.replacen(
            &format!("\"type\":\"{}\"", out[at].stored_type()),
            &format!("\"type\":\"{t}\""),
            1,
        ),
        Damage::RenameKey(a, b) => raw.replacen(a, b, 1),
        Damage::NoSurfaceOp => raw.replacen(",\"surfaceOp\":\"append\"", "", 1),
    };
    let must_refuse = matches!(damage, Damage::NoSurfaceOp) && text != raw;
    match Event::parse(&text, seq) {
        Ok(event) => {
            out[at] = event;
            (out, must_refuse)
        }
        Err(_) => (out, false),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_sessions_load_the_same_in_two_halves(
        steps in prop::collection::vec(common::agent_step(), 0..80),
    ) {
        let session = common::agent_session(&steps);
        for counter in counters() {
            let outcome = load_both_ways(
                session.header(),
                session.version(),
                counter.as_ref(),
                session.events(),
            );
            prop_assert!(outcome.is_ok(), "{:?}", outcome);
            let outcome = outcome.unwrap_or_default();
            prop_assert_eq!(outcome.accepted, session.events().len());
        }
    }

    #[test]
    fn damaged_sessions_are_refused_the_same_in_two_halves(
        steps in prop::collection::vec(common::agent_step(), 1..60),
        at in any::<usize>(),
        damage in damage(),
    ) {
        let session = common::agent_session(&steps);
        let (events, must_refuse) = damaged(session.events(), at, &damage);
        for counter in counters() {
            let outcome = load_both_ways(
                session.header(),
                session.version(),
                counter.as_ref(),
                &events,
            );
            prop_assert!(outcome.is_ok(), "{:?}: {:?}", damage, outcome);
            let outcome = outcome.unwrap_or_default();
            if must_refuse {
                prop_assert!(
                    outcome.refused.is_some(),
                    "{:?} at {} was accepted by both loads",
                    damage,
                    at % session.events().len()
                );
            }
        }
    }
}
