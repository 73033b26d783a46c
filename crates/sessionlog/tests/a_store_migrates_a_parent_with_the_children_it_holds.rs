//! A store's V4 export of a parent session finds the parent's children among the sessions it
//! holds, as DSH finds them among its own, and ends the parent's log with their catalog
//! entries: the file the real DSH runtime wrote for the same three sessions
//! (`crates/session/tests/dsh-family/README.md`).

use std::path::{Path, PathBuf};

use sessionlog::session::{DshFormat, ExportOptions};
use sessionlog::{Store, StoreOptions};

fn family_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../session/tests/dsh-family")
        .join(name)
}

fn v4_export(store: &Store, name: &str) -> String {
    let mut out = Vec::new();
    let written = store
        .write_dsh_as(
            name,
            &ExportOptions::default().with_format(Some(DshFormat::V4)),
            &mut out,
        )
        .expect("V4 export");
    assert_eq!(written, DshFormat::V4);
    String::from_utf8(out).expect("utf8")
}

#[test]
fn the_parent_exported_at_v4_ends_with_its_childrens_catalog_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("store");
    let read = |name: &str| std::fs::read(family_file(name)).expect("family file");
    store
        .import_dsh(&read("parent.session.jsonl"), Some("parent"))
        .expect("parent");
    let dsh =
        std::fs::read_to_string(family_file("parent.dsh.session.v4.jsonl")).expect("DSH's file");
    // Alone in its store, the parent has no children to list.
    let alone = v4_export(&store, "parent");
    assert!(!alone.contains(r#""type":"subagent/catalog""#));
    assert!(dsh.starts_with(&alone));
    // The children are found by their headers, whatever the store calls them.
    store
        .import_dsh(&read("child-1.session.jsonl"), Some("first child"))
        .expect("child 1");
    store
        .import_dsh(&read("child-2.session.jsonl"), None)
        .expect("child 2");
    assert_eq!(v4_export(&store, "parent"), dsh);
    let header = store.header("parent").expect("header");
    let children = store.children_of(&header).expect("children");
    assert_eq!(children.len(), 2);
    // A child is no child of itself, nor of its sibling.
    let child = store.header("first child").expect("child header");
    assert!(store.children_of(&child).expect("none").is_empty());
    store.close().expect("close");
}
