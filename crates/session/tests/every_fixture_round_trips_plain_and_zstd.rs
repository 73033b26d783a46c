//! Every DSH fixture log that imports exports back at its own format byte for byte, plain
//! and as DSH's zstd layout (header alone in the first frame), and at every other format
//! that holds its events the export reads back to the same events.

mod common;

use sessionlog_session::{
    export_dsh, import_jsonl, zstd_file, DshFormat, ExportOptions, ImportOptions,
};

fn frames(file: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = file;
    while !rest.is_empty() {
        let size = zstd::zstd_safe::find_frame_compressed_size(rest).expect("a whole frame");
        out.push(zstd::stream::decode_all(&rest[..size]).expect("frame decodes"));
        rest = &rest[size..];
    }
    out
}

#[test]
fn every_fixture_round_trips_plain_and_zstd() {
    let Some(root) = common::dsh_fixture_dir("every_fixture_round_trips_plain_and_zstd") else {
        return;
    };
    let options = ImportOptions::default().with_repair(false);
    let mut checked = 0;
    let mut crossed = 0;
    for log in common::files_under(&root.join("logs"), ".jsonl") {
        let bytes = std::fs::read(&log).expect("fixture");
        let Ok(imported) = import_jsonl(&bytes, &options) else {
            continue;
        };
        if imported.tail.is_some() {
            continue;
        }
        let session = &imported.session;
        let plain = export_dsh(session, &ExportOptions::default()).expect("its own format");
        assert_eq!(plain, bytes, "{}", log.display());

        let packed =
            export_dsh(session, &ExportOptions::default().with_zstd(true)).expect("compressed");
        assert!(zstd_file::is_zstd(&packed));
        let parts = frames(&packed);
        let header_line = bytes.iter().position(|b| *b == b'\n').expect("header") + 1;
        assert_eq!(
            parts[0],
            bytes[..header_line],
            "frame 1 is the header alone"
        );
        assert_eq!(parts.concat(), bytes, "{}", log.display());
        let back = import_jsonl(&packed, &options).expect("the zstd file imports");
        assert!(back.zstd);
        assert_eq!(back.session.events(), session.events());

        for format in DshFormat::ALL {
            // An older session at the latest format is DSH's migration of it, which
            // reshapes events (tests/dsh_migration_matches_dsh.rs); the other formats hold
            // the events as they are.
            if format == session.header().format() || format == DshFormat::LATEST {
                continue;
            }
            let Ok(other) =
                export_dsh(session, &ExportOptions::default().with_format(Some(format)))
            else {
                continue;
            };
            let again = import_jsonl(&other, &options)
                .unwrap_or_else(|e| panic!("{} as {format}: {e}", log.display()));
            assert_eq!(again.session.header().format(), format);
            crossed += 1;
            let seqs =
                |s: &sessionlog_session::Session| -> Vec<Option<Vec<sessionlog_session::Seq>>> {
                    s.events()
                        .iter()
                        .map(|e| {
                            e.source_event_seqs()
                                .map(<[sessionlog_session::Seq]>::to_vec)
                        })
                        .collect()
                };
            assert_eq!(
                seqs(&again.session),
                seqs(session),
                "{} as {format}",
                log.display()
            );
            // And back at the original format, the original bytes.
            let home = export_dsh(
                &again.session,
                &ExportOptions::default().with_format(Some(session.header().format())),
            )
            .expect("back home");
            if session.header().raw().contains("\"version\"") {
                assert_eq!(home, bytes, "{} via {format}", log.display());
            }
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} fixtures imported");
    assert!(
        crossed >= checked,
        "only {crossed} exports at another format"
    );
}
