//! `import_and_export`, which migrates a file while its events are validated and folded, is
//! `import_jsonl` followed by `export_dsh`: the same session, the same bytes, and the same
//! error when either step refuses, for every file DSH's migration accepted or refused, every
//! fixture of the DSH corpus (plain and zstd), with and without repair, at V4 and by default.
//! `import_and_export_to`, which hands the migrated text to a file as it goes, writes that
//! file after whatever the file held before (rewriting its own part when repair adds
//! closers).

mod common;

use std::path::{Path, PathBuf};

use common::{dsh_fixture_dir, files_under};
use sessionlog_session::{
    export_dsh, import_and_export, import_and_export_to, import_jsonl, zstd_file, DshFormat,
    DshImport, ExportOptions, ImportOptions, Seq, TailCut,
};

/// What an import gave: the header, every event as stored, the cut tail and the closers.
type Imported = (String, Vec<String>, Option<TailCut>, Vec<Seq>);

fn what(imported: &DshImport) -> Imported {
    let session = &imported.session;
    (
        session.header().raw().to_owned(),
        session
            .events()
            .iter()
            .map(|e| e.raw().to_owned())
            .collect(),
        imported.tail.clone(),
        imported.closers.clone(),
    )
}

fn one_after_the_other(
    file: &[u8],
    import: &ImportOptions,
    export: &ExportOptions,
) -> Result<(Imported, Vec<u8>), String> {
    let imported = import_jsonl(file, import).map_err(|e| e.to_string())?;
    let out = export_dsh(&imported.session, export).map_err(|e| e.to_string())?;
    Ok((what(&imported), out))
}

fn side_by_side(
    file: &[u8],
    import: &ImportOptions,
    export: &ExportOptions,
) -> Result<(Imported, Vec<u8>), String> {
    let (imported, out) = import_and_export(file, import, export).map_err(|e| e.to_string())?;
    Ok((what(&imported), out))
}

/// What a file held before the export was written after it.
const BEFORE: &[u8] = b"bytes already in the file\n";

fn written_to_a_file(
    file: &[u8],
    import: &ImportOptions,
    export: &ExportOptions,
) -> Result<(Imported, Vec<u8>), String> {
    use std::io::Write;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "sessionlog-import-and-export-to-{}-{n}",
        std::process::id()
    ));
    let mut out = std::fs::File::create(&path).expect("temp file");
    out.write_all(BEFORE).expect("written");
    let imported = import_and_export_to(file, import, export, &mut out);
    drop(out);
    let written = std::fs::read(&path).expect("readable");
    let _ = std::fs::remove_file(&path);
    let imported = imported.map_err(|e| e.to_string())?;
    let rest = written
        .strip_prefix(BEFORE)
        .expect("what the file held is kept")
        .to_vec();
    Ok((what(&imported), rest))
}

/// Compares both paths on `file` for every import and export option; returns how many
/// of the comparisons migrated without a refusal.
fn compare(name: &str, file: &[u8]) -> usize {
    let mut migrated = 0;
    for repair in [false, true] {
        let import = ImportOptions::default().with_repair(repair);
        for format in [None, Some(DshFormat::V4)] {
            for zstd in [false, true] {
                let export = ExportOptions::default().with_format(format).with_zstd(zstd);
                let expected = one_after_the_other(file, &import, &export);
                let case = format!("{name}: repair {repair}, format {format:?}, zstd {zstd}");
                for (path, got) in [
                    ("side by side", side_by_side(file, &import, &export)),
                    ("to a file", written_to_a_file(file, &import, &export)),
                ] {
                    match (&got, &expected) {
                        (Ok((got_import, got_file)), Ok((import, file))) => {
                            assert!(
                                got_import == import,
                                "{case}, {path}: the imported session differs"
                            );
                            assert!(
                                got_file == file,
                                "{case}, {path}: the exported file differs"
                            );
                        }
                        _ => assert_eq!(got.err(), expected.clone().err(), "{case}, {path}"),
                    }
                }
                migrated += usize::from(format == Some(DshFormat::V4) && expected.is_ok());
            }
        }
    }
    migrated
}

fn migration_cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dsh-migrate");
    files_under(&dir, ".jsonl")
}

#[test]
fn every_migration_case_gives_the_same_session_file_or_refusal() {
    let cases = migration_cases();
    assert!(cases.len() > 10, "the migration cases are present");
    let mut migrated = 0;
    for path in &cases {
        let bytes = std::fs::read(path).expect("readable");
        let name = path.display().to_string();
        migrated += compare(&name, &bytes);
        let compressed = zstd_file::encode(&bytes).expect("compressible");
        migrated += compare(&format!("{name} (zstd)"), &compressed);
    }
    assert!(
        migrated > 0,
        "some cases migrate, so the side-by-side path ran"
    );
}

#[test]
fn every_fixture_gives_the_same_session_file_or_refusal() {
    let Some(root) = dsh_fixture_dir("every_fixture_gives_the_same_session_file_or_refusal") else {
        return;
    };
    let logs = files_under(&root.join("logs"), ".jsonl");
    assert!(!logs.is_empty(), "the corpus has logs");
    let mut migrated = 0;
    for log in &logs {
        let bytes = std::fs::read(log).expect("readable");
        migrated += compare(&log.display().to_string(), &bytes);
    }
    assert!(
        migrated > 0,
        "some fixtures migrate, so the side-by-side path ran"
    );
}

#[test]
fn a_torn_final_zstd_frame_is_reported_the_same_way() {
    let cases = migration_cases();
    let path = cases.first().expect("a case");
    let mut compressed = zstd_file::encode(&std::fs::read(path).expect("readable")).unwrap();
    let extra = zstd_file::frame(b"{\"type\":\"turn/start\"}\n").expect("a frame");
    compressed.extend_from_slice(&extra[..extra.len() / 2]);
    compare("torn zstd", &compressed);
}
