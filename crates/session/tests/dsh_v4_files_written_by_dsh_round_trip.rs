//! Session files written by DeepSeek Harness 0.2.1 itself (format V4, plain and zstd; see
//! `dsh-v4/README.md`) import, declare V4, and export back byte for byte (for the zstd
//! file, its decompressed stream, with the header alone in the first frame).

use std::path::Path;

use sessionlog_session::{export_dsh, import_jsonl, DshFormat, ExportOptions, ImportOptions};

fn file(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/dsh-v4")
            .join(name),
    )
    .expect("generated file")
}

#[test]
fn a_plain_v4_file_written_by_dsh_round_trips() {
    let bytes = file("text-turns.session.v4.jsonl");
    let imported = import_jsonl(&bytes, &ImportOptions::default()).expect("DSH's own V4 file");
    assert!(imported.tail.is_none() && imported.closers.is_empty());
    assert_eq!(imported.session.header().format(), DshFormat::V4);
    assert_eq!(
        export_dsh(&imported.session, &ExportOptions::default()).expect("export"),
        bytes
    );
    // Its surface: system prompt, the two user prompts, a runtime-context note and the two
    // answers, in order.
    let messages = imported.session.derive_messages();
    assert!(messages.len() >= 5, "{messages:?}");
}

#[test]
fn a_zstd_v4_file_written_by_dsh_round_trips_its_stream() {
    let bytes = file("text-turns.session.v4.jsonl.zstd");
    let plain = zstd::stream::decode_all(&bytes[..]).expect("concatenated frames");
    let imported = import_jsonl(&bytes, &ImportOptions::default()).expect("DSH's own V4 file");
    assert!(imported.zstd);
    assert_eq!(imported.session.header().format(), DshFormat::V4);
    let again =
        export_dsh(&imported.session, &ExportOptions::default().with_zstd(true)).expect("export");
    assert_eq!(
        zstd::stream::decode_all(&again[..]).expect("decodes"),
        plain
    );
    let plain_export = export_dsh(&imported.session, &ExportOptions::default()).expect("plain");
    assert_eq!(plain_export, plain);
}
