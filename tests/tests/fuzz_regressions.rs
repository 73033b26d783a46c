//! Inputs the fuzz targets (`fuzz/`) found, shrunk, each pinned with what it must do.

use sessionlog::session::{export_jsonl, import_jsonl, ImportOptions};
use sessionlog::{Store, StoreOptions};

/// Found by `dsh_import`, shrunk by `cargo fuzz tmin`: a turn numbered 0 is accepted on
/// import, restart repair closes it with `turn/end {"turn":0,…}`, and that closer is refused
/// when the session is loaded again ("malformed legacy shape: expected {turn, reason{kind}}",
/// `upgrade_turn_end` in crates/session/src/upgrade.rs requires turn ≥ 1).
const TURN_ZERO_LEFT_OPEN: &[u8] = b"{\"type\":\"session\",\"id\":\"\"}\n\
{\"type\":\"agent/inbox/spliced\",\"seq\":0,\"time\":0,\"data\":{}}\n\
{\"type\":\"turn/start\",\"seq\":1,\"time\":0,\"data\":{\"turn\":0}}\n";

#[test]

fn a_repaired_session_exports_to_a_file_that_imports_again() {
    let repaired = import_jsonl(TURN_ZERO_LEFT_OPEN, &ImportOptions::default())
        .expect("the file imports with repair");
    assert!(!repaired.closers.is_empty(), "the open turn got closers");
    let exported = export_jsonl(&repaired.session);
    let plain = ImportOptions::default().with_repair(false);
    let again = import_jsonl(&exported, &plain)
        .unwrap_or_else(|e| panic!("the repaired session does not import again: {e}"));
    assert_eq!(again.session.events(), repaired.session.events());
}

/// The same through the store: importing, then opening the session (which appends the
/// closers) must leave a session that still loads.
#[test]

fn a_session_whose_turn_zero_was_closed_by_repair_still_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open");
    store
        .import_dsh(TURN_ZERO_LEFT_OPEN, Some("s"))
        .expect("import");
    // Either opening refuses to write a closer it cannot load back, or what it writes loads.
    if let Ok((handle, _closers)) = store.open_session("s") {
        drop(handle);
        store
            .session_state("s")
            .unwrap_or_else(|e| panic!("the session no longer loads after repair: {e}"));
    }
}

/// Found by the `dsh_import` smoke run: a `turn/start` whose turn is a string is accepted, and
/// the `turn/end` that restart repair writes for it (same turn value) must load again.
#[test]
fn a_turn_closed_by_repair_loads_again_whatever_its_turn_value() {
    let file = b"{\"type\":\"session\",\"id\":\"c\"}\n\
{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":\"next-turn\"}}\n";
    let repaired = import_jsonl(file, &ImportOptions::default()).expect("imports with repair");
    assert!(!repaired.closers.is_empty(), "the open turn got closers");
    let plain = ImportOptions::default().with_repair(false);
    let again = import_jsonl(&export_jsonl(&repaired.session), &plain)
        .unwrap_or_else(|e| panic!("the repaired session does not import again: {e}"));
    assert_eq!(again.session.events(), repaired.session.events());
}
