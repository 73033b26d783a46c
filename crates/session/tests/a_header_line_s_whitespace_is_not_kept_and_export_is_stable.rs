//! A DSH header line may carry whitespace around its JSON value (JSON allows it, and a file
//! written on Windows ends its lines with a carriage return). The header is kept as its
//! value, as an event is, so that an export (each line ended by a line feed alone) imports
//! to the same session and exports to the same bytes again. A header that kept a trailing
//! carriage return lost one more to every import and export (found by the `dsh_import` fuzz
//! target).

use sessionlog_session::{
    export_dsh, export_jsonl, import_and_export, import_jsonl, ExportOptions, ImportOptions,
};

const HEADER: &str = r#"{"type":"session","id":"x","createdAt":1}"#;
const EVENT: &str = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;

#[test]
fn whitespace_around_a_header_is_not_kept_and_export_is_stable() {
    for around in [
        ("", "\r"),
        ("", " \r"),
        ("", "\r\r\r"),
        ("", " \t\r \r"),
        ("  ", ""),
        ("\t", " \r"),
    ] {
        let file = format!("{}{HEADER}{}\n{EVENT}\r\n", around.0, around.1);
        for repair in [false, true] {
            let options = ImportOptions::default().with_repair(repair);
            let imported = import_jsonl(file.as_bytes(), &options)
                .unwrap_or_else(|e| panic!("{around:?}: {e}"));
            assert_eq!(imported.session.header().raw(), HEADER, "{around:?}");
            let exported = export_jsonl(&imported.session);
            let plain = ImportOptions::default().with_repair(false);
            let again = import_jsonl(&exported, &plain).expect("re-import");
            assert_eq!(again.session.header().raw(), HEADER, "{around:?}");
            assert_eq!(again.session.events(), imported.session.events());
            assert_eq!(export_jsonl(&again.session), exported, "{around:?}: stable");
            // The migration in one pass reads the header the same way.
            let export = ExportOptions::default();
            let (side, out) = import_and_export(file.as_bytes(), &options, &export)
                .unwrap_or_else(|e| panic!("{around:?}: {e}"));
            assert_eq!(side.session.header().raw(), HEADER, "{around:?}");
            let after = export_dsh(&imported.session, &export).expect("export");
            assert_eq!(out, after, "{around:?}: import_and_export");
        }
    }
}

/// A header stored before imports dropped the whitespace around it still decodes as stored
/// (format-spec/events.md, version history).
#[test]
fn a_header_record_stored_with_whitespace_decodes_as_stored() {
    let stored = format!("{HEADER} \r");
    let header = sessionlog_session::SessionHeader::parse(&stored).expect("parse");
    let record = sessionlog_session::encode_header(&header);
    let decoded = sessionlog_session::decode_header(&record).expect("decode");
    assert_eq!(decoded.raw(), stored);
}
