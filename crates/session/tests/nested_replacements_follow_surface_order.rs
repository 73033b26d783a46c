//! Spec §11 (b): nested replacements name nodes by seq in surface order, so a range may
//! run from a numerically larger seq to a smaller one, and shadowed nodes are gone.

mod common;

use common::{assistant, empty_session, push, replacing, user};
use sessionlog_session::{Error, Rule, Session};

fn after_first_replace() -> Session {
    let mut s = empty_session();
    push(&mut s, user("u0", "a"));
    push(&mut s, assistant("a1", "b", &[]));
    push(&mut s, user("u2", "c"));
    push(&mut s, assistant("a3", "d", &[]));
    push(&mut s, replacing(user("u4", "summary"), 1, 2, &[1, 2]));
    push(&mut s, user("u5", "e"));
    s
}

#[test]
fn nested_replace_may_run_from_a_larger_seq_to_a_smaller_one() {
    let mut s = after_first_replace();
    assert_eq!(s.surface(), vec![0, 4, 3, 5]);
    push(&mut s, replacing(user("u6", "again"), 4, 3, &[4, 3]));
    assert_eq!(s.surface(), vec![0, 6, 5]);
    assert_eq!(s.replace_generation(), 2);
}

#[test]
fn replace_of_the_whole_surface_leaves_one_node() {
    let mut s = after_first_replace();
    push(&mut s, replacing(user("u6", "all"), 0, 5, &[0, 4, 3, 5]));
    assert_eq!(s.surface(), vec![6]);
}

#[test]
fn an_already_shadowed_node_cannot_be_replaced_again() {
    let mut s = after_first_replace();
    let err = s
        .try_append(replacing(user("u6", "x"), 1, 5, &[1, 2, 3, 4, 5]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                rule: Rule::ReplaceRange,
                ..
            }
        ),
        "{err}"
    );
}
