//! Raw bytes as a DeepSeek Harness `session.jsonl` into the importer (header, events, packed
//! chunk rows, torn-tail scan). No input may panic. An imported session exports to a file that
//! imports again to the same session and exports to the same bytes, with and without repair.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sessionlog_session::{export_jsonl, import_jsonl, ImportOptions};

fuzz_target!(|data: &[u8]| {
    // Both ways, whatever the input: a file's first byte is nearly always `{`, so a bit of
    // it would leave one way all but untried.
    for repair in [false, true] {
        round_trip(data, repair);
    }
});

fn round_trip(data: &[u8], repair: bool) {
    let options = ImportOptions::default().with_repair(repair);
    let Ok(imported) = import_jsonl(data, &options) else {
        return;
    };
    let exported = export_jsonl(&imported.session);
    let plain = ImportOptions::default().with_repair(false);
    let again = match import_jsonl(&exported, &plain) {
        Ok(again) => again,
        Err(e) => panic!("an exported session does not import (repair {repair}): {e}"),
    };
    assert!(again.tail.is_none(), "an exported session has a torn tail");
    assert_eq!(
        again.session.events(),
        imported.session.events(),
        "export and import changed the events (repair {repair})"
    );
    assert_eq!(
        export_jsonl(&again.session),
        exported,
        "export is not stable (repair {repair})"
    );
}
