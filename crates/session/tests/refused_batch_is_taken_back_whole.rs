//! An atomic batch that is refused part-way is taken back whole: the session compares equal
//! to what it was, exports the same bytes, derives the same messages, and goes on accepting
//! exactly what it would have accepted before, whatever replacements the batch had applied.

mod common;

use common::{empty_session, push, replacing, user};
use proptest::prelude::*;
use sessionlog_session::{export_jsonl, Error, EventInput, Session};

/// One step of a random session or batch.
#[derive(Debug, Clone)]
enum Op {
    /// A new user message.
    Append,
    /// A replacement of the surface nodes `[from, from + len]` (positions modulo the
    /// surface length).
    Replace { from: usize, len: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Append),
        1 => (0usize..64, 0usize..4).prop_map(|(from, len)| Op::Replace { from, len }),
    ]
}

/// The input `op` stands for on the current surface (`None` when the surface is empty).
fn input(session: &Session, op: &Op, id: usize) -> Option<EventInput> {
    let text = format!("m{id}");
    match op {
        Op::Append => Some(user(&format!("u{id}"), &text)),
        Op::Replace { from, len } => {
            let surface: Vec<u64> = session.surface_state().iter().map(|n| n.get()).collect();
            if surface.is_empty() {
                return None;
            }
            let first = from % surface.len();
            let last = (first + len).min(surface.len() - 1);
            let shadowed = &surface[first..=last];
            Some(replacing(
                user(&format!("r{id}"), &text),
                shadowed[0],
                shadowed[shadowed.len() - 1],
                shadowed,
            ))
        }
    }
}

fn started() -> Session {
    let mut session = empty_session();
    push(
        &mut session,
        EventInput::new("turn/start", 1000, r#"{"turn":1}"#),
    );
    push(
        &mut session,
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
    );
    session
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn refused_batch_leaves_the_session_as_it_was(
        history in prop::collection::vec(op(), 0..40),
        batch in prop::collection::vec(op(), 0..12),
    ) {
        let mut session = started();
        for (id, op) in history.iter().enumerate() {
            if let Some(input) = input(&session, op, id) {
                push(&mut session, input);
            }
        }
        let before = session.clone();
        let bytes = export_jsonl(&session);
        let messages = session.derive_messages_json();

        let mut applied = 0usize;
        let result: Result<(), Error> = session.atomically(|s| {
            for (k, op) in batch.iter().enumerate() {
                if let Some(input) = input(s, op, 1000 + k) {
                    s.try_append(input)?;
                    applied += 1;
                }
            }
            // A replacement of a node that is not on the surface is always refused.
            s.try_append(replacing(user("bad", "x"), u64::MAX, u64::MAX, &[u64::MAX]))?;
            Ok(())
        });
        prop_assert!(result.is_err());
        prop_assert!(applied <= batch.len());
        prop_assert_eq!(&session, &before);
        prop_assert_eq!(export_jsonl(&session), bytes);
        prop_assert_eq!(session.derive_messages_json(), messages);

        // The session goes on exactly like the untouched copy.
        let mut copy = before.clone();
        for (k, op) in batch.iter().enumerate() {
            let (Some(a), Some(b)) = (input(&session, op, 2000 + k), input(&copy, op, 2000 + k))
            else {
                continue;
            };
            push(&mut session, a);
            push(&mut copy, b);
        }
        prop_assert_eq!(&session, &copy);
        prop_assert_eq!(session.derive_messages_json(), copy.derive_messages_json());
    }

    #[test]
    fn nested_refusal_takes_back_only_the_inner_part(
        history in prop::collection::vec(op(), 1..30),
        outer in prop::collection::vec(op(), 1..6),
        inner in prop::collection::vec(op(), 1..6),
    ) {
        let mut session = started();
        for (id, op) in history.iter().enumerate() {
            if let Some(input) = input(&session, op, id) {
                push(&mut session, input);
            }
        }
        let mut expected = session.clone();
        let result: Result<(), Error> = session.atomically(|s| {
            for (k, op) in outer.iter().enumerate() {
                if let (Some(a), Some(b)) = (input(s, op, 100 + k), input(&expected, op, 100 + k)) {
                    s.try_append(a)?;
                    push(&mut expected, b);
                }
            }
            let nested: Result<(), Error> = s.atomically(|s| {
                for (k, op) in inner.iter().enumerate() {
                    if let Some(input) = input(s, op, 200 + k) {
                        s.try_append(input)?;
                    }
                }
                s.try_append(replacing(user("bad", "x"), u64::MAX, u64::MAX, &[u64::MAX]))?;
                Ok(())
            });
            assert!(nested.is_err());
            Ok(())
        });
        prop_assert!(result.is_ok());
        prop_assert_eq!(&session, &expected);
        prop_assert_eq!(session.derive_messages_json(), expected.derive_messages_json());
    }
}
