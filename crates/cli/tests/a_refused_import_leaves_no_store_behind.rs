//! `import` validates the whole file before it writes anything; bound for an absent or empty
//! directory, a refused file must not leave a freshly created store there either.

mod common;

use common::{describe, sessionlog, text};

fn refused_import_into(store: &std::path::Path, file: &std::path::Path) -> String {
    let out = sessionlog(
        &[
            "import",
            "--store",
            store.to_str().expect("utf8"),
            file.to_str().expect("utf8"),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("invalid session header"),
        "{}",
        describe(&out)
    );
    text(&out.stderr)
}

#[test]
fn a_refused_import_creates_no_store_in_an_absent_or_empty_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, b"not json\n").expect("write the file");

    let absent = dir.path().join("absent");
    refused_import_into(&absent, &file);
    assert!(!absent.exists(), "no directory was created");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    refused_import_into(&empty, &file);
    let left: Vec<_> = std::fs::read_dir(&empty).expect("list").collect();
    assert!(left.is_empty(), "the directory stays empty: {left:?}");
}

#[test]
fn an_empty_or_headless_file_is_refused_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, b"").expect("write the file");
    let said = refused_import_into(&store, &empty);
    assert!(said.contains("the file is empty"), "{said}");

    let blank_first = dir.path().join("blank.jsonl");
    std::fs::write(&blank_first, b"\n{\"version\":0}\n").expect("write the file");
    let said = refused_import_into(&store, &blank_first);
    assert!(said.contains("the first line is blank"), "{said}");
    assert!(!store.exists(), "no store was created");
}
