//! `Surface::iter_rev` walks the current surface from its newest node: after replacements
//! (which take the place of the first node they shadow, whatever their seq) it is exactly
//! the surface order reversed, so a reader of the newest nodes never walks the oldest.

mod common;

use common::{assistant, empty_session, push, replacing, user};

#[test]
fn reverse_walk_is_the_surface_order_reversed_after_nested_replacements() {
    let mut s = empty_session();
    assert_eq!(s.state().surface_state().iter_rev().next(), None);
    push(&mut s, user("u0", "a"));
    push(&mut s, assistant("a1", "b", &[]));
    push(&mut s, user("u2", "c"));
    push(&mut s, assistant("a3", "d", &[]));
    push(&mut s, replacing(user("u4", "summary"), 1, 2, &[1, 2]));
    push(&mut s, user("u5", "e"));
    push(&mut s, replacing(user("u6", "again"), 4, 3, &[4, 3]));
    let surface = s.state().surface_state();
    let backwards: Vec<sessionlog_session::Seq> = surface.iter_rev().collect();
    assert_eq!(backwards, vec![5, 6, 0]);
    let mut forwards = surface.to_vec();
    forwards.reverse();
    assert_eq!(backwards, forwards);
    // the newest two without walking further
    assert_eq!(surface.iter_rev().take(2).collect::<Vec<_>>(), vec![5, 6]);
}

#[test]
fn replacing_the_newest_node_makes_the_replacement_the_newest() {
    let mut s = empty_session();
    push(&mut s, user("u0", "a"));
    push(&mut s, user("u1", "b"));
    push(&mut s, replacing(assistant("a2", "", &[]), 1, 1, &[1]));
    assert_eq!(
        s.state().surface_state().iter_rev().collect::<Vec<_>>(),
        vec![2, 0]
    );
}
