//! A store opened read-only beside its open writer: views, loads, exports, listings and
//! cache checks work; every write is refused with `ReadOnly` before anything happens; and
//! not one file of the store changes (no cache written, no lock taken).

use std::collections::BTreeMap;
use std::path::Path;

use sessionlog::session::{EventInput, SessionHeader};
use sessionlog::{Error, Store, StoreOptions};

fn picture(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("list") {
        let path = e.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            for (k, v) in picture(&path) {
                out.insert(format!("{name}/{k}"), v);
            }
            out.insert(format!("{name}/"), Vec::new());
        } else {
            out.insert(name, std::fs::read(&path).expect("read"));
        }
    }
    out
}

fn is_read_only(e: &Error) -> bool {
    matches!(e, Error::Log(sessionlog_log::Error::ReadOnly { .. }))
}

#[test]
fn a_read_only_store_reads_everything_and_refuses_every_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Store::open(dir.path(), StoreOptions::default()).expect("open");
    let mut handle = writer
        .create_session("s", SessionHeader::new("s", 1, None))
        .expect("create");
    for (time, event_type, data) in [
        (1, "turn/start", r#"{"turn":1}"#),
        (2, "turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        (3, "turn/start", r#"{"turn":2}"#),
    ] {
        handle
            .append(EventInput::new(event_type, time, data))
            .expect("append");
    }
    handle.commit().expect("commit");
    let exported = writer.export_dsh("s").expect("export");
    let before = picture(dir.path());

    let reader = Store::open_read_only(dir.path(), StoreOptions::default()).expect("read-only");
    assert!(reader.log_reader().is_read_only());
    assert_eq!(reader.session_names(), vec!["s".to_owned()]);
    assert_eq!(
        reader.session_state("s").expect("state").next_seq().get(),
        3
    );
    assert_eq!(reader.view("s").expect("view").events, 3);
    assert_eq!(reader.export_dsh("s").expect("export"), exported);
    assert_eq!(reader.list_sessions(None, None, 10).len(), 1);
    reader.cache_verify().expect("cache verify");

    let refusals: Vec<(&str, Error)> = vec![
        (
            "create_session",
            reader
                .create_session("t", SessionHeader::new("t", 1, None))
                .expect_err("create"),
        ),
        ("open_session", reader.open_session("s").expect_err("open")),
        (
            "delete_session",
            reader.delete_session("s").expect_err("delete"),
        ),
        (
            "cache_rebuild",
            reader.cache_rebuild().expect_err("rebuild"),
        ),
        (
            "import_dsh",
            reader.import_dsh(&exported, Some("u")).expect_err("import"),
        ),
    ];
    for (what, e) in &refusals {
        assert!(is_read_only(e), "{what} was not refused as read-only: {e}");
        assert!(e.to_string().contains("read-only"), "{what}: {e}");
    }
    reader.close().expect("close the reader");
    assert_eq!(
        picture(dir.path()),
        before,
        "the read-only store changed a file"
    );
    drop(handle);
    writer.close().expect("close");
}
