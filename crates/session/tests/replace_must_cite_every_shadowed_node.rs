//! Spec §11 (a): a replace names current surface nodes by seq, takes their place and
//! must cite every node it shadows.

mod common;

use common::{assistant, empty_session, push, replacing, user};
use sessionlog_session::{Error, Rule};

fn four_messages() -> sessionlog_session::Session {
    let mut s = empty_session();
    push(&mut s, user("u0", "a"));
    push(&mut s, assistant("a1", "b", &[]));
    push(&mut s, user("u2", "c"));
    push(&mut s, assistant("a3", "d", &[]));
    s
}

#[test]
fn replace_of_a_middle_range_takes_its_place() {
    let mut s = four_messages();
    push(&mut s, replacing(user("u4", "summary"), 1, 2, &[1, 2]));
    assert_eq!(s.surface(), vec![0, 4, 3]);
    assert_eq!(s.replace_generation(), 1);
    let ids: Vec<String> = s
        .derive_messages()
        .iter()
        .map(|m| {
            common::value(m)["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["u0", "u4", "a3"]);
}

#[test]
fn replace_missing_a_shadowed_source_is_refused() {
    let mut s = four_messages();
    let err = s
        .try_append(replacing(user("u4", "summary"), 1, 2, &[1]))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Invalid { rule: Rule::SourceEventSeqs, detail, .. } if detail.contains('2')),
        "{err}"
    );
    assert_eq!(s.surface(), vec![0, 1, 2, 3]);
}

#[test]
fn replace_with_endpoints_out_of_surface_order_is_refused() {
    let mut s = four_messages();
    let err = s
        .try_append(replacing(user("u4", "summary"), 2, 1, &[1, 2]))
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
