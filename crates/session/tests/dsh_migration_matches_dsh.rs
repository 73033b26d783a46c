//! sessionlog's export of a V0 session at format V4 is DeepSeek Harness's own migration of
//! it, byte for byte, and sessionlog refuses (with DSH's reason) exactly the sessions DSH's
//! migration refuses. The expected files were written by the real DSH runtime
//! (`tests/dsh-migrate/README.md`).

use std::path::{Path, PathBuf};

use sessionlog_session::{
    export_dsh, import_jsonl, zstd_file, DshFormat, Error, ExportOptions, ImportOptions,
};

fn cases() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dsh-migrate");
    let mut cases: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("tests/dsh-migrate")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.strip_suffix(".session.jsonl")?;
            (!name.ends_with(".dsh")).then(|| (name.to_owned(), path.clone()))
        })
        .collect();
    cases.sort();
    cases
}

fn v4_export(source: &Path, zstd: bool) -> Result<Vec<u8>, Error> {
    let bytes = std::fs::read(source).expect("readable");
    let imported =
        import_jsonl(&bytes, &ImportOptions::default()).expect("sessionlog imports the V0 file");
    assert_eq!(imported.session.header().format(), DshFormat::V0);
    export_dsh(
        &imported.session,
        &ExportOptions::default()
            .with_format(Some(DshFormat::V4))
            .with_zstd(zstd),
    )
}

#[test]
fn every_migration_dsh_accepts_is_written_byte_for_byte() {
    let mut compared = 0;
    for (name, source) in cases() {
        let expected = source.with_file_name(format!("{name}.dsh.session.v4.jsonl"));
        let Ok(dsh) = std::fs::read_to_string(&expected) else {
            continue;
        };
        let ours = v4_export(&source, false).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = String::from_utf8(ours).expect("utf8");
        for (line, (a, b)) in ours.lines().zip(dsh.lines()).enumerate() {
            assert_eq!(
                a,
                b,
                "{name}: line {} differs from DSH's migration",
                line + 1
            );
        }
        assert_eq!(
            ours.lines().count(),
            dsh.lines().count(),
            "{name}: line count"
        );
        assert_eq!(ours, dsh, "{name}");
        // The same events in DSH's compressed layout: the header alone in the first frame.
        let packed = v4_export(&source, true).expect("compressed");
        let decoded = zstd_file::decode(&packed).expect("decodes");
        assert_eq!(decoded.plain, dsh.as_bytes(), "{name}: zstd");
        // And the V4 file imports back and exports as itself.
        let back = import_jsonl(dsh.as_bytes(), &ImportOptions::default()).expect("V4 imports");
        assert_eq!(back.session.header().format(), DshFormat::V4);
        let again = export_dsh(&back.session, &ExportOptions::default()).expect("V4 export");
        assert_eq!(again, dsh.as_bytes(), "{name}: V4 round trip");
        compared += 1;
    }
    assert!(compared >= 8, "only {compared} DSH migrations compared");
}

#[test]
fn every_session_dsh_refuses_to_migrate_is_refused_with_dsh_reason() {
    let mut refused = 0;
    for (name, source) in cases() {
        let Ok(reason) =
            std::fs::read_to_string(source.with_file_name(format!("{name}.dsh.refused")))
        else {
            continue;
        };
        let reason = reason.trim();
        match v4_export(&source, false) {
            Ok(_) => panic!("{name}: exported at V4, but DSH refuses: {reason}"),
            Err(error @ Error::Export { .. }) => {
                assert!(
                    error.to_string().contains(reason),
                    "{name}: {error} lacks DSH's reason {reason:?}"
                )
            }
            Err(other) => panic!("{name}: refused with another error: {other}"),
        }
        refused += 1;
    }
    assert!(refused >= 4, "only {refused} refusals checked");
}
