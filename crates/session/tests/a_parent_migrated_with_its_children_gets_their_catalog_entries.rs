//! DSH's migration of a parent session to V4 ends its log with a `subagent/catalog` entry for
//! each direct child its catalog lacks: from the child's own descriptor when DSH's historical
//! reader restores the child, `mode: "unknown"` when it does not. The expected file was
//! written by the real DSH runtime (`tests/dsh-family/README.md`).

use std::path::Path;

use sessionlog_session::{
    export_dsh, import_jsonl, ChildFact, DshFormat, DshImport, ExportOptions, ImportOptions,
};

fn family(name: &str) -> DshImport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/dsh-family")
        .join(format!("{name}.session.jsonl"));
    let bytes = std::fs::read(&path).expect("family file");
    import_jsonl(&bytes, &ImportOptions::default()).expect("imports")
}

fn dsh_file() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dsh-family/parent.dsh.session.v4.jsonl");
    std::fs::read_to_string(path).expect("DSH's V4 file")
}

fn children_of(parent: &DshImport) -> Vec<ChildFact> {
    let id = parent.session.header().id();
    ["child-1", "child-2"]
        .iter()
        .map(|name| {
            let child = family(name);
            ChildFact::of(id, child.session.header(), child.session.events())
                .unwrap_or_else(|| panic!("{name} is a child of the parent"))
        })
        .collect()
}

fn v4(parent: &DshImport, children: Vec<ChildFact>) -> String {
    let options = ExportOptions::default()
        .with_format(Some(DshFormat::V4))
        .with_children(children);
    String::from_utf8(export_dsh(&parent.session, &options).expect("migrates")).expect("utf8")
}

#[test]
fn the_parent_migrated_with_its_children_is_the_file_dsh_writes() {
    let parent = family("parent");
    let ours = v4(&parent, children_of(&parent));
    let dsh = dsh_file();
    for (line, (a, b)) in ours.lines().zip(dsh.lines()).enumerate() {
        assert_eq!(a, b, "line {} differs from DSH's migration", line + 1);
    }
    assert_eq!(ours, dsh);
    let catalogs: Vec<&str> = ours
        .lines()
        .filter(|l| l.starts_with(r#"{"type":"subagent/catalog""#))
        .collect();
    assert_eq!(catalogs.len(), 2, "one entry per child");
    assert!(
        catalogs[0].contains(r#""version":0,"#)
            && catalogs[0].contains(r#""mode":"continuable","label":"Return ALPHA only""#)
    );
    assert!(catalogs[1].contains(r#""version":1,"#) && catalogs[1].contains(r#""mode":"unknown""#));
}

#[test]
fn the_order_of_the_children_given_does_not_matter() {
    let parent = family("parent");
    let mut children = children_of(&parent);
    children.reverse();
    assert_eq!(v4(&parent, children), dsh_file());
}

#[test]
fn without_its_children_the_parent_gets_no_catalog_entries() {
    let parent = family("parent");
    let alone = v4(&parent, Vec::new());
    let dsh = dsh_file();
    let without: Vec<&str> = dsh
        .lines()
        .filter(|l| !l.starts_with(r#"{"type":"subagent/catalog""#))
        .collect();
    assert_eq!(alone.lines().collect::<Vec<_>>(), without);
}

#[test]
fn a_session_is_no_child_of_a_parent_its_header_does_not_name() {
    let parent = family("parent");
    let child = family("child-1");
    assert!(ChildFact::of(
        "another-parent",
        child.session.header(),
        child.session.events()
    )
    .is_none());
    // The parent itself names no parent.
    let id = parent.session.header().id();
    assert!(ChildFact::of(id, parent.session.header(), parent.session.events()).is_none());
}
