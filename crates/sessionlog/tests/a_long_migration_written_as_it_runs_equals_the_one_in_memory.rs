//! `import_and_export_to` hands a migration's text to its file in pieces of about 1 MiB while
//! the migration runs. For a session whose V4 text is several such pieces, the file must hold
//! exactly what `import_and_export` collects in memory, after whatever the file held before;
//! and a destination that refuses every write (`/dev/full`) must end in the output error
//! rather than a panic, a hang of the migration's second thread or a success.

use std::io::Write;

use sessionlog::session::{
    import_and_export, import_and_export_to, DshFormat, Error, ExportOptions, ImportOptions,
};
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{SessionHeader, Store, StoreOptions};

/// A generated V0 session file of at least `events` events (the benchmark's workload).
fn long_v0_session(events: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("store");
    let header = SessionHeader::new("long", 1_700_000_000, Some("/work"));
    let mut h = store.create_session("long", header).expect("create");
    Workload::new(7, WorkloadConfig::default())
        .fill(&mut h, events, 1_700_000_000_000, None)
        .expect("the generated session");
    drop(h);
    let mut out = Vec::new();
    store.write_dsh("long", &mut out).expect("V0 export");
    store.close().expect("close");
    out
}

#[test]
fn a_migration_of_several_mebibytes_writes_the_file_it_would_collect() {
    let v0 = long_v0_session(20_000);
    let import = ImportOptions::default();
    let export = ExportOptions::default().with_format(Some(DshFormat::V4));
    let (expected_import, expected) = import_and_export(&v0, &import, &export).expect("migrates");
    assert!(
        expected.len() > 3 << 20,
        "the V4 text ({} bytes) spans several of the pieces handed over while migrating",
        expected.len()
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session.v4.jsonl");
    let before = b"what the file held before\n";
    let mut file = std::fs::File::create(&path).expect("file");
    file.write_all(before).expect("written");
    let imported = import_and_export_to(&v0, &import, &export, &mut file).expect("migrates");
    drop(file);
    let written = std::fs::read(&path).expect("readable");
    assert_eq!(
        &written[..before.len()],
        before,
        "what the file held is kept"
    );
    assert!(
        written[before.len()..] == expected[..],
        "the file holds the text the migration collects in memory ({} bytes written, {} expected)",
        written.len() - before.len(),
        expected.len()
    );
    assert_eq!(
        imported.session.events().len(),
        expected_import.session.events().len()
    );
    assert_eq!(imported.closers, expected_import.closers);
}

#[test]
fn a_destination_that_refuses_writes_gives_the_output_error() {
    let full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(f) => f,
        Err(e) => {
            eprintln!("skipped a_destination_that_refuses_writes_gives_the_output_error: no /dev/full ({e})");
            return;
        }
    };
    let v0 = long_v0_session(20_000);
    let import = ImportOptions::default();
    let export = ExportOptions::default().with_format(Some(DshFormat::V4));
    let mut full = full;
    match import_and_export_to(&v0, &import, &export, &mut full) {
        Err(Error::Output { detail }) => assert!(!detail.is_empty(), "the system's error is named"),
        other => panic!("expected the output error, got {other:?}"),
    }
}
