//! Compares sessionlog's V4 export of each V0 file in `DIR/in` with DeepSeek Harness's own
//! migration of it in `DIR/out` (`NAME.v4.jsonl`, or `NAME.refused` with DSH's reason), as
//! `interop/dsh-conformance/dsh_migrations.py` records them.
//!
//! `cargo run -p sessionlog-session --example migrate_compare -- DIR`
use sessionlog_session::{export_dsh, import_jsonl, DshFormat, ExportOptions, ImportOptions};

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: migrate_compare DIR");
        std::process::exit(2);
    };
    let (mut equal, mut refusals, mut differ) = (0, 0, 0);
    let mut paths: Vec<_> = std::fs::read_dir(format!("{dir}/in"))
        .expect("DIR/in")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let name = name.strip_suffix(".jsonl").unwrap_or(&name).to_owned();
        let bytes = std::fs::read(&path).expect("readable");
        let Ok(imported) = import_jsonl(&bytes, &ImportOptions::default()) else {
            continue;
        };
        let ours = export_dsh(
            &imported.session,
            &ExportOptions::default().with_format(Some(DshFormat::V4)),
        );
        let expected = std::fs::read_to_string(format!("{dir}/out/{name}.v4.jsonl")).ok();
        let refused = std::fs::read_to_string(format!("{dir}/out/{name}.refused")).ok();
        match (ours, expected, refused) {
            (Ok(ours), Some(dsh), _) => {
                let ours = String::from_utf8_lossy(&ours).into_owned();
                if ours == dsh {
                    equal += 1;
                    continue;
                }
                differ += 1;
                let (o, d): (Vec<_>, Vec<_>) = (ours.lines().collect(), dsh.lines().collect());
                let at = (0..o.len().max(d.len()))
                    .find(|i| o.get(*i) != d.get(*i))
                    .unwrap_or(0);
                let cut = |l: Option<&&str>| {
                    l.map_or("(end)".to_owned(), |l| l.chars().take(700).collect())
                };
                println!(
                    "DIFF {name} line {}:\n  dsh {}\n  our {}",
                    at + 1,
                    cut(d.get(at)),
                    cut(o.get(at))
                );
            }
            (Err(error), _, Some(reason)) => {
                let reason = reason
                    .trim()
                    .trim_end_matches("; source v0 artifact remains unchanged");
                if error.to_string().contains(reason) {
                    refusals += 1;
                } else {
                    differ += 1;
                    println!("REFUSAL {name}:\n  dsh {reason}\n  our {error}");
                }
            }
            (Ok(_), _, Some(reason)) => {
                differ += 1;
                println!("ACCEPTED {name}; DSH refuses: {}", reason.trim());
            }
            (Ok(_), None, None) => println!("NO DSH RESULT {name}"),
            (Err(error), _, None) => {
                differ += 1;
                println!("REFUSED {name}: {error}");
            }
        }
    }
    println!("equal {equal}, same refusals {refusals}, differ {differ}");
}
