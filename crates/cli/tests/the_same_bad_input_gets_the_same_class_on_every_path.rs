//! One refusal classification: the same bad input gets the same [`ErrorClass`] whether it
//! comes through a `SessionHandle`, the `Store`, the `SessionStore` trait (of the store and of
//! the in-memory adapter), an import, or the command-line tool, whose exit code follows from
//! the class alone (3 refused, 2 not found / busy / environment, 1 damaged).

mod common;

use sessionlog::session::{EventInput, NewEvent, SessionStore, SurfaceOp};
use sessionlog::{ErrorClass, Store, StoreOptions};
use sessionlog_adapters::MemoryStore;
use sessionlog_session::SessionHeader;

/// The exit code the tool gives for `args` with `stdin`; its error is one line.
fn exit_code(args: &[&str], stdin: &[u8]) -> i32 {
    let r = common::run(args, std::str::from_utf8(stdin).expect("utf-8 input"));
    assert!(r.stderr.lines().count() <= 1, "errors are one line: {r:?}");
    // Shown with a failing assertion on the code, so a wrong class says what the tool said.
    eprintln!("sessionlog {args:?} exited {}: {}", r.code, r.stderr.trim());
    r.code
}

/// The tool's exit code for a class, as the README states it.
fn code_of(class: ErrorClass) -> i32 {
    match class {
        ErrorClass::Refused => 3,
        ErrorClass::Damaged => 1,
        _ => 2,
    }
}

fn options() -> StoreOptions {
    StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false))
}

const HEADER_LINE: &str = r#"{"type":"session","version":0,"id":"x","createdAt":1}"#;

/// A user message whose payload holds `-0`, which the lossless-JSON rule refuses.
const BAD_DATA: &str = r#"{"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"u1","n":-0}"#;

fn bad_event() -> EventInput {
    EventInput::new("user/message", 1, BAD_DATA).with_surface_op(SurfaceOp::Append)
}

fn bad_line() -> String {
    format!(r#"{{"type":"user/message","data":{BAD_DATA},"surfaceOp":"append"}}"#)
}

fn bad_file() -> Vec<u8> {
    format!(
        "{HEADER_LINE}\n{{\"type\":\"user/message\",\"seq\":0,\"time\":1,\"data\":{BAD_DATA},\"surfaceOp\":\"append\"}}\n"
    )
    .into_bytes()
}

#[test]
fn an_invalid_event_is_refused_on_every_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("lib"), options()).expect("store");
    let mut handle = store
        .create_session("h", SessionHeader::new("h", 1, None))
        .expect("create");
    let via_handle = handle.append(bad_event()).expect_err("handle refuses");
    drop(handle);
    let via_import = store
        .import_dsh(&bad_file(), Some("i"))
        .expect_err("import refuses");
    SessionStore::create(&store, "t", &SessionHeader::new("t", 1, None)).expect("create");
    let via_trait = SessionStore::append(&store, "t", &[NewEvent::Input(&bad_event())], 0)
        .expect_err("trait refuses");
    let memory = MemoryStore::default();
    memory
        .create("m", &SessionHeader::new("m", 1, None))
        .expect("create");
    let via_memory = memory
        .append("m", &[NewEvent::Input(&bad_event())], 0)
        .expect_err("memory adapter refuses");
    for (path, class) in [
        ("handle", via_handle.class()),
        ("import", via_import.class()),
        ("store trait", via_trait.class()),
        ("memory adapter", via_memory.class()),
    ] {
        assert_eq!(class, ErrorClass::Refused, "{path}");
    }
    drop(store);

    let cli_store = dir.path().join("cli");
    let cli_store = cli_store.to_str().expect("utf8");
    let append = exit_code(
        &["append", "--store", cli_store, "--session", "c", "--create"],
        format!("{}\n", bad_line()).as_bytes(),
    );
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, bad_file()).expect("write file");
    let import = exit_code(
        &["import", "--store", cli_store, file.to_str().expect("utf8")],
        b"",
    );
    assert_eq!((append, import), (3, 3), "append and import exit 3");
}

#[test]
fn a_session_that_exists_is_refused_on_every_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ok.jsonl");
    std::fs::write(&file, format!("{HEADER_LINE}\n")).expect("write file");
    let lib = dir.path().join("lib");
    let store = Store::open(&lib, options()).expect("store");
    store
        .import_dsh(&std::fs::read(&file).expect("read"), None)
        .expect("first import");
    let via_import = store
        .import_dsh(&std::fs::read(&file).expect("read"), None)
        .expect_err("second import");
    let via_create = store
        .create_session("x", SessionHeader::new("x", 1, None))
        .map(drop)
        .expect_err("create over it");
    let via_trait = SessionStore::create(&store, "x", &SessionHeader::new("x", 1, None))
        .expect_err("trait create over it");
    let memory = MemoryStore::default();
    memory
        .create("x", &SessionHeader::new("x", 1, None))
        .expect("create");
    let via_memory = memory
        .create("x", &SessionHeader::new("x", 1, None))
        .expect_err("memory create over it");
    for (path, class) in [
        ("import", via_import.class()),
        ("create", via_create.class()),
        ("store trait", via_trait.class()),
        ("memory adapter", via_memory.class()),
    ] {
        assert_eq!(class, ErrorClass::Refused, "{path}");
    }
    drop(store);
    let lib = lib.to_str().expect("utf8");
    let import = exit_code(
        &["import", "--store", lib, file.to_str().expect("utf8")],
        b"",
    );
    assert_eq!(import, code_of(ErrorClass::Refused));
}

#[test]
fn a_missing_session_is_not_found_on_every_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("lib");
    let store = Store::open(&lib, options()).expect("store");
    let via_open = store.open_session("nope").map(drop).expect_err("open");
    let via_export = store.export_dsh("nope").expect_err("export");
    let via_trait = SessionStore::read_from(&store, "nope", 0, 10).expect_err("trait read");
    let via_memory = MemoryStore::default()
        .read_from("nope", 0, 10)
        .expect_err("memory read");
    for (path, class) in [
        ("open", via_open.class()),
        ("export", via_export.class()),
        ("store trait", via_trait.class()),
        ("memory adapter", via_memory.class()),
    ] {
        assert_eq!(class, ErrorClass::NotFound, "{path}");
    }
    drop(store);
    let lib = lib.to_str().expect("utf8");
    let export = exit_code(&["export", "--store", lib, "--session", "nope"], b"");
    assert_eq!(export, code_of(ErrorClass::NotFound));
}

#[test]
fn a_store_or_session_held_elsewhere_is_busy_on_every_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("lib");
    let store = Store::open(&lib, options()).expect("store");
    let _writer = store
        .create_session("w", SessionHeader::new("w", 1, None))
        .expect("create");
    let second_writer = store
        .open_session("w")
        .map(drop)
        .expect_err("second writer");
    let second_open = Store::open(&lib, options())
        .map(drop)
        .expect_err("second open");
    let via_trait = SessionStore::delete(&store, "w").expect_err("trait delete of a held session");
    assert_eq!(second_writer.class(), ErrorClass::Busy);
    assert_eq!(second_open.class(), ErrorClass::Busy);
    assert_eq!(via_trait.class(), ErrorClass::Busy);
    // Reading commands open read-only and work beside the writer; a writing one is refused.
    let held = lib.to_str().expect("utf8");
    // No input: the tool exits at the lock before reading any.
    let append = exit_code(&["append", "--store", held, "--session", "w"], b"");
    assert_eq!(append, code_of(ErrorClass::Busy));
}
