//! Every event of every accepted fixture log yields its typed view: the typed model
//! covers what DSH actually writes.

mod common;

use common::{dsh_fixture_dir, files_under};
use sessionlog_session::typed::EventView;
use sessionlog_session::{import_jsonl, kind_tag, ImportOptions};

#[test]
fn every_fixture_event_has_a_typed_view() {
    let Some(root) = dsh_fixture_dir("every_fixture_event_has_a_typed_view") else {
        return;
    };
    let mut typed = 0usize;
    let mut opaque = 0usize;
    for log in files_under(&root.join("logs"), ".jsonl") {
        let Ok(import) = import_jsonl(
            &std::fs::read(&log).expect("readable"),
            &ImportOptions::default(),
        ) else {
            continue;
        };
        for event in import.session.events() {
            let view = event
                .view()
                .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
            let is_opaque = matches!(view, EventView::Opaque { .. });
            assert_eq!(
                is_opaque,
                kind_tag(event) == 0,
                "{}: {} tag vs view",
                log.display(),
                event.event_type()
            );
            if is_opaque {
                opaque += 1;
            } else {
                typed += 1;
            }
        }
    }
    assert!(
        typed > 1000 && opaque > 100,
        "typed {typed}, opaque {opaque}"
    );
}
