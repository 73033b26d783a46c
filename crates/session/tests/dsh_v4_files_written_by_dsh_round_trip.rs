//! Session files written by DeepSeek Harness 0.2.1 itself (format V4, plain and zstd; see
//! `dsh-v4/README.md`) import, declare V4, and export back byte for byte (for the zstd
//! file, its decompressed stream, with the header alone in the first frame).

use std::path::Path;

use sessionlog_session::{
    export_dsh, import_jsonl, DshFormat, ExportOptions, FormatVersion, ImportOptions, SessionState,
};

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

#[test]
fn dshs_own_v4_migration_with_tool_results_round_trips() {
    let bytes = file("tool-turns-migrated.session.v4.jsonl");
    let imported =
        import_jsonl(&bytes, &ImportOptions::default()).expect("DSH's own migrated V4 file");
    assert!(imported.tail.is_none() && imported.closers.is_empty());
    assert_eq!(imported.session.header().format(), DshFormat::V4);
    assert_eq!(
        export_dsh(&imported.session, &ExportOptions::default()).expect("export"),
        bytes
    );
    // V4 tool results are messages of role `tool`, and reach the model as such.
    let messages = imported.session.derive_messages();
    assert!(
        messages.iter().any(|m| m.contains(r#""role":"tool""#)),
        "{messages:?}"
    );
}

#[test]
fn a_v4_tool_message_naming_another_call_is_refused() {
    let bytes = String::from_utf8(file("tool-turns-migrated.session.v4.jsonl")).expect("utf-8");
    assert!(bytes.contains(r#""toolCallId":"call-1""#));
    let wrong = bytes.replacen(r#""toolCallId":"call-1""#, r#""toolCallId":"call-9""#, 1);
    let err = import_jsonl(wrong.as_bytes(), &ImportOptions::default())
        .expect_err("a tool message whose toolCallId is not its call");
    assert!(err.to_string().contains("toolCallId"), "{err}");
}

#[test]
fn a_v4_sessions_checkpoint_decodes_under_any_default_version() {
    // A session declaring V4 is folded under V4's rules whatever the caller's default, so its
    // checkpoint names V4 and decodes back under either default.
    let bytes = file("tool-turns-migrated.session.v4.jsonl");
    let imported = import_jsonl(&bytes, &ImportOptions::default()).expect("import");
    let state = imported.session.state();
    let mut encoded = Vec::new();
    state.encode_checkpoint(&mut encoded);
    for default in [FormatVersion::dsh_v0(), FormatVersion::current()] {
        let decoded = SessionState::decode_checkpoint(&encoded, default, None)
            .expect("a V4 session's checkpoint decodes");
        assert_eq!(&decoded, state);
        let mut again = Vec::new();
        decoded.encode_checkpoint(&mut again);
        assert_eq!(again, encoded);
    }
}
