//! Every synthetic crash point over the real logs: the log cut after `cutAfterSeq` and
//! opened gets exactly DSH's closers, surface and message count.

mod common;

use common::{canon, dsh_fixture_dir, files_under, value, without_closer_text};
use sessionlog_session::{
    dsh, export_jsonl, import_jsonl, Event, FormatVersion, ImportOptions, Session,
};

#[test]
fn every_prefix_repair_case_gets_golden_closers() {
    let Some(root) = dsh_fixture_dir("every_prefix_repair_case_gets_golden_closers") else {
        return;
    };
    let cases_files = files_under(&root.join("prefix-repair"), ".prefix-repair.json");
    assert!(
        cases_files.len() >= 100,
        "expected the full prefix corpus, found {}",
        cases_files.len()
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &cases_files {
        let doc = value(&std::fs::read_to_string(file).expect("readable"));
        let log = root
            .join("logs")
            .join(doc["fixture"].as_str().expect("fixture path"));
        let scanned = dsh::scan(&std::fs::read(&log).expect("log readable")).expect("log scans");
        for case in doc["cases"].as_array().expect("cases") {
            checked += 1;
            let cut = case["cutAfterSeq"].as_u64().expect("cutAfterSeq") as usize;
            let events: Vec<Event> = scanned.events[..=cut]
                .iter()
                .enumerate()
                .map(|(i, raw)| Event::parse(raw, i as u64).expect("event parses"))
                .collect();
            // Build the cut file through the exporter, then open it as a cold load would.
            let prefix =
                Session::from_events(scanned.header.clone(), FormatVersion::dsh_v0(), events);
            let opened =
                prefix.and_then(|s| import_jsonl(&export_jsonl(&s), &ImportOptions::default()));
            let name = format!("{} cut after {cut}", doc["fixture"].as_str().unwrap_or("?"));
            let import = match (opened, case["error"].as_str()) {
                (Ok(import), None) => import,
                (Err(_), Some(_)) => continue,
                (Ok(_), Some(expected)) => {
                    failures.push(format!("{name}: accepted, DSH refuses: {expected}"));
                    continue;
                }
                (Err(err), None) => {
                    failures.push(format!("{name}: refused: {err}"));
                    continue;
                }
            };
            let session = &import.session;
            let closers: Vec<String> = import
                .closers
                .iter()
                .map(|seq| {
                    canon(&without_closer_text(value(
                        session.event(*seq).expect("closer").raw(),
                    )))
                })
                .collect();
            let golden: Vec<String> = case["repairClosers"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| canon(&without_closer_text(c.clone())))
                        .collect()
                })
                .unwrap_or_default();
            if closers != golden {
                failures.push(format!(
                    "{name}: closers\n    {closers:?}\n  golden\n    {golden:?}"
                ));
            }
            let surface: Vec<u64> =
                serde_json::from_value(case["surfaceSeqs"].clone()).expect("surfaceSeqs");
            if session.surface() != surface {
                failures.push(format!(
                    "{name}: surface {:?} != {surface:?}",
                    session.surface()
                ));
            }
            if Some(session.derive_messages().len() as u64) != case["messageCount"].as_u64() {
                failures.push(format!(
                    "{name}: {} messages != {}",
                    session.derive_messages().len(),
                    case["messageCount"]
                ));
            }
        }
    }
    assert!(checked > 1000, "only {checked} cases found");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
