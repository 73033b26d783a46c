//! Every real DSH log imports with the golden surface, messages, closers and refusals,
//! and exports back byte for byte.

mod common;

use common::{canon, dsh_fixture_dir, files_under, golden_for, value, without_closer_text};
use sessionlog_session::{export_jsonl, import_jsonl, Error, ImportOptions, Rule};

/// Checks one log; returns a description of every mismatch.
fn check_log(root: &std::path::Path, log: &std::path::Path) -> Vec<String> {
    let golden = golden_for(root, log);
    let bytes = std::fs::read(log).expect("fixture readable");
    let mut problems = Vec::new();
    let result = import_jsonl(&bytes, &ImportOptions::default());
    if let Some(expected) = golden["error"].as_str() {
        match result {
            Ok(_) => problems.push(format!("accepted, but DSH refuses it: {expected}")),
            Err(err) => {
                let same_class = if expected.contains("corrupt session log") {
                    matches!(err, Error::Corrupt { .. }) && err.to_string().contains(expected)
                } else if expected.contains("lacks provider/model") {
                    matches!(
                        err,
                        Error::Invalid {
                            rule: Rule::RequestHeader,
                            ..
                        }
                    )
                } else {
                    true
                };
                if !same_class {
                    problems.push(format!("refused as {err}, DSH refuses as {expected}"));
                }
            }
        }
        return problems;
    }
    let import = match result {
        Ok(import) => import,
        Err(err) => return vec![format!("refused: {err}")],
    };
    let session = &import.session;
    let surface: Vec<u64> =
        serde_json::from_value(golden["surfaceSeqs"].clone()).expect("surfaceSeqs");
    if session.surface() != surface {
        problems.push(format!(
            "surface {:?} != golden {:?}",
            session.surface(),
            surface
        ));
    }
    let messages: Vec<String> = session
        .derive_messages()
        .iter()
        .map(|m| canon(&value(m)))
        .collect();
    let golden_messages: Vec<String> = golden["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(canon)
        .collect();
    if messages != golden_messages {
        let first = messages
            .iter()
            .zip(&golden_messages)
            .position(|(a, b)| a != b);
        problems.push(format!(
            "messages differ ({} vs {} golden), first at {first:?}: {:?} vs {:?}",
            messages.len(),
            golden_messages.len(),
            first.and_then(|i| messages.get(i)),
            first.and_then(|i| golden_messages.get(i)),
        ));
    }
    let closers: Vec<String> = import
        .closers
        .iter()
        .map(|seq| {
            canon(&without_closer_text(value(
                session.event(*seq).expect("closer").raw(),
            )))
        })
        .collect();
    let golden_closers: Vec<String> = golden["repairClosers"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| canon(&without_closer_text(c.clone())))
                .collect()
        })
        .unwrap_or_default();
    if closers != golden_closers {
        problems.push(format!("closers {closers:?} != golden {golden_closers:?}"));
    }
    let event_count = session.events().len() - import.closers.len();
    if golden["eventCount"].as_u64() != Some(event_count as u64) {
        problems.push(format!(
            "{event_count} events, golden {}",
            golden["eventCount"]
        ));
    }
    let tail_discarded = import.tail.is_some();
    if golden["tailDiscarded"].as_bool() != Some(tail_discarded) {
        problems.push(format!(
            "tail discarded {tail_discarded}, golden {}",
            golden["tailDiscarded"]
        ));
    }
    let committed = import
        .tail
        .as_ref()
        .map_or(bytes.len(), |t| t.committed_bytes);
    if golden["committedBytes"].as_u64() != Some(committed as u64) {
        problems.push(format!(
            "committed {committed} bytes, golden {}",
            golden["committedBytes"]
        ));
    }
    if !tail_discarded {
        let plain = import_jsonl(&bytes, &ImportOptions::default().with_repair(false))
            .expect("imports without repair too");
        let exported = export_jsonl(&plain.session);
        if exported != bytes {
            let at = exported
                .iter()
                .zip(&bytes)
                .position(|(a, b)| a != b)
                .unwrap_or(exported.len().min(bytes.len()));
            let context = |b: &[u8]| {
                String::from_utf8_lossy(&b[at.saturating_sub(60)..(at + 60).min(b.len())])
                    .into_owned()
            };
            problems.push(format!(
                "export differs at byte {at} ({} vs {} bytes): ours …{}… file …{}…",
                exported.len(),
                bytes.len(),
                context(&exported),
                context(&bytes)
            ));
        }
    }
    problems
}

#[test]
fn every_dsh_fixture_log_matches_its_golden() {
    let Some(root) = dsh_fixture_dir("every_dsh_fixture_log_matches_its_golden") else {
        return;
    };
    let logs = files_under(&root.join("logs"), ".jsonl");
    assert!(
        logs.len() >= 100,
        "expected the full corpus, found {} logs",
        logs.len()
    );
    let mut failures = Vec::new();
    for log in &logs {
        let problems = check_log(&root, log);
        if !problems.is_empty() {
            failures.push(format!(
                "{}:\n  {}",
                log.strip_prefix(&root).unwrap_or(log).display(),
                problems.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} logs fail:\n{}",
        failures.len(),
        logs.len(),
        failures.join("\n")
    );
}
