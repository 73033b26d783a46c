//! Every real DeepSeek Harness log goes through the store: imported (or refused exactly when
//! DSH refuses it, leaving the store unchanged), exported byte for byte, and opened with
//! restart repair giving DSH's closers, surface and messages.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sessionlog::{Store, StoreOptions};

fn logs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("fixture dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            logs(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// A closer without its human-readable message text, which is ours to word.
fn without_text(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.contains_key("code") {
                    m.remove("message");
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

#[test]
fn every_fixture_round_trips_through_the_store() {
    let Some(root) = sessionlog_testkit::dsh_corpus("every_fixture_round_trips_through_the_store")
    else {
        return;
    };
    let mut files = Vec::new();
    logs(&root.join("logs"), &mut files);
    files.sort();
    assert!(
        files.len() >= 100,
        "expected the DSH corpus under {}, found {} logs",
        root.display(),
        files.len()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let options =
        StoreOptions::default().with_log(sessionlog::LogOptions::default().with_preallocate(false));
    let store = Store::open(dir.path(), options).expect("store");
    let mut problems = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    for (i, file) in files.iter().enumerate() {
        let rel = file.strip_prefix(root.join("logs")).expect("under logs");
        let golden_path = root
            .join("golden")
            .join(format!("{}.golden.json", rel.display()));
        let golden: Value = serde_json::from_slice(
            &std::fs::read(&golden_path).unwrap_or_else(|_| panic!("golden for {}", rel.display())),
        )
        .expect("golden json");
        let bytes = std::fs::read(file).expect("fixture");
        let name = format!("fixture-{i}");
        let before = store.session_names().len();
        let result = store.import_dsh(&bytes, Some(&name));
        if let Some(err) = golden["error"].as_str() {
            refused += 1;
            match result {
                Ok(_) => problems.push(format!("{}: accepted, DSH refuses: {err}", rel.display())),
                Err(e) if !e.is_refusal() => problems.push(format!(
                    "{}: failed ({e}) instead of a refusal",
                    rel.display()
                )),
                Err(_) => {}
            }
            if store.session_names().len() != before {
                problems.push(format!(
                    "{}: a refused import changed the store",
                    rel.display()
                ));
            }
            continue;
        }
        accepted += 1;
        let summary = match result {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{}: refused: {e}", rel.display()));
                continue;
            }
        };
        let committed = golden["committedBytes"].as_u64().expect("committedBytes") as usize;
        let exported = store.export_dsh(&name).expect("export");
        if summary.tail_discarded != golden["tailDiscarded"].as_bool().unwrap_or(false) {
            problems.push(format!(
                "{}: tailDiscarded {}",
                rel.display(),
                summary.tail_discarded
            ));
        }
        if exported[..] != bytes[..committed] {
            problems.push(format!(
                "{}: export differs from the file's committed bytes",
                rel.display()
            ));
        }
        let (handle, closers) = store.open_session(&name).expect("open");
        let ours: Vec<Value> = closers
            .iter()
            .map(|c| without_text(serde_json::from_str(c.raw()).expect("closer json")))
            .collect();
        let theirs: Vec<Value> = golden["repairClosers"]
            .as_array()
            .map(|a| a.iter().cloned().map(without_text).collect())
            .unwrap_or_default();
        if ours != theirs {
            problems.push(format!(
                "{}: closers {ours:?} != golden {theirs:?}",
                rel.display()
            ));
        }
        if summary.closers as usize != theirs.len() {
            problems.push(format!(
                "{}: import announced {} closers, open appended {}",
                rel.display(),
                summary.closers,
                theirs.len()
            ));
        }
        let surface: Vec<u64> =
            serde_json::from_value(golden["surfaceSeqs"].clone()).expect("surfaceSeqs");
        if handle.state().surface() != surface {
            problems.push(format!(
                "{}: surface {:?} != {:?}",
                rel.display(),
                handle.state().surface(),
                surface
            ));
        }
        let derived = handle.derive_messages().expect("derive from the log");
        let messages: Value =
            serde_json::from_str(&format!("[{}]", derived.join(","))).expect("messages json");
        if messages != golden["messages"] {
            problems.push(format!("{}: derived messages differ", rel.display()));
        }
        drop(handle);
        // The projection fold (which skips structural records) derives the same messages.
        let view = store.view(&name).expect("view");
        let view_messages: Value =
            serde_json::from_str(&view.surface.derive_messages_json()).expect("view json");
        if view_messages != golden["messages"] || view.surface.nodes() != &surface[..] {
            problems.push(format!(
                "{}: the projection view differs from DSH's messages or surface",
                rel.display()
            ));
        }
        // A reopened session (from the log, closers included) still derives the same.
        let reloaded = store.session_state(&name).expect("reload");
        if reloaded.surface() != surface {
            problems.push(format!("{}: surface after reload differs", rel.display()));
        }
    }
    assert!(
        accepted > 90 && refused > 0,
        "accepted {accepted}, refused {refused}"
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
