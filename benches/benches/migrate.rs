//! DSH format V0 -> V4 migration of the 1,000,008-event benchmark session (the seeded workload
//! generator's agent traffic, as `benches/compare` builds it for its replay table), by
//! sessionlog and by DeepSeek Harness itself, in the same run, with the disk probe.
//!
//! - sessionlog, best of `RUNS` each: the session it holds exported at V4 from its store into
//!   `session.v4.jsonl` with `fdatasync` (open, read the log, migrate, write: what `export
//!   --format-version 4` does); the V0 file read, imported (parse, validate, fold), migrated
//!   beside the fold and written into its file as it is made (`import_and_export_to`), with
//!   `fdatasync`; and the migration alone (`export_dsh` at V4 of the imported session).
//! - DSH: the real runtime (`deepseek-harness-sdk==0.2.1rc2`, installed as the conformance job
//!   installs it) resumes the V0 file from a fresh DSH home; timed from `resume_session` until
//!   it returns, when the migrated `session.v4.jsonl` is written (the runtime's start is not
//!   timed). DSH's file must be sessionlog's plus the `session/end-seed` a resume appends.
//!
//! `cargo bench -p sessionlog-benches --bench migrate`; `SESSIONLOG_MIGRATE_BENCH_EVENTS`
//! sets a smaller session for a quick look. Every file is removed at the end.
//!
//! For profiling one path: `SESSIONLOG_MIGRATE_BENCH_BUILD=DIR` only builds the store and
//! the V0 file into `DIR` (kept); `SESSIONLOG_MIGRATE_BENCH_PROFILE=file:DIR` (or
//! `store:DIR`) then runs that one sessionlog path once over them and prints its time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sessionlog::session::SessionHeader;
use sessionlog::{Store, StoreOptions};
use sessionlog_benches::{fill_compare_session, fresh_dir, human_ns, ns, probe};
use sessionlog_session::{
    export_dsh, import_and_export_to, import_jsonl, DshFormat, ExportOptions, ImportOptions,
};

const RUNS: usize = 3;

/// The benchmark session of `benches/compare` (its replay table): seed 42, the default
/// workload, a turn every second from 1,700,000,000,000 ms, compactions as the workload asks.
fn build_v0_file(dir: &Path, events: u64) -> (PathBuf, u64) {
    let store = Store::open(dir.join("store"), StoreOptions::default()).expect("store");
    let header = SessionHeader::new("long-session", 1_700_000_000, Some("/work"));
    let mut h = store
        .create_session("long-session", header)
        .expect("create");
    fill_compare_session(&mut h, events, None);
    let stored = h.next_seq().get();
    drop(h);
    let path = dir.join("session.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("jsonl"));
    store
        .write_dsh("long-session", &mut out)
        .expect("V0 export");
    out.into_inner().expect("flush").sync_all().expect("sync");
    store.close().expect("close");
    (path, stored)
}

/// sessionlog's migration of the session it holds: open the store and export the session at
/// V4 (what `sessionlog export --format-version 4` and `migrate --to dsh:` do) into a file,
/// with `fdatasync`.
fn sessionlog_store_export(store_dir: &Path, v4: &Path) -> (Duration, u64) {
    let started = Instant::now();
    let store = Store::open(store_dir, StoreOptions::default()).expect("open");
    let mut file =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(v4).expect("V4 file"));
    let options = ExportOptions::default().with_format(Some(DshFormat::V4));
    store
        .write_dsh_as("long-session", &options, &mut file)
        .expect("V4 export");
    let file = file.into_inner().expect("flush");
    file.sync_data().expect("fdatasync");
    let elapsed = started.elapsed();
    store.close().expect("close");
    (elapsed, std::fs::metadata(v4).map_or(0, |m| m.len()))
}

/// sessionlog's migration, file to file, the V4 text written into its file as it is made:
/// returns the time and the V4 bytes (read back after the timing).
fn sessionlog_file_to_file(v0: &Path, v4: &Path) -> (Duration, Vec<u8>) {
    let started = Instant::now();
    let bytes = std::fs::read(v0).expect("V0 file");
    let mut file = std::fs::File::create(v4).expect("V4 file");
    let imported = import_and_export_to(
        &bytes,
        &ImportOptions::default(),
        &ExportOptions::default().with_format(Some(DshFormat::V4)),
        &mut file,
    )
    .expect("import and V4 export");
    drop((bytes, imported));
    file.sync_data().expect("fdatasync");
    let elapsed = started.elapsed();
    (elapsed, std::fs::read(v4).expect("V4 file"))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ is in the workspace")
        .to_path_buf()
}

fn dsh_python() -> Option<PathBuf> {
    let venv = std::env::var_os("DSH_CONFORMANCE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace_root().join("target"));
            target.join("dsh-conformance/venv")
        });
    let python = venv.join("bin/python");
    python.is_file().then_some(python)
}

/// DSH's migration of the same file: its time, and the V4 file it wrote.
fn dsh_resume(python: &Path, v0: &Path, work: &Path) -> Result<(Duration, PathBuf), String> {
    let script = workspace_root().join("interop/dsh-conformance/time_dsh_migration.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(v0)
        .arg(work)
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(text.trim()).map_err(|_| {
        format!(
            "DSH timing printed {text:?}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let seconds = result["seconds"]
        .as_f64()
        .ok_or_else(|| format!("DSH refused the session: {}", result["error"]))?;
    let migrated = std::fs::read_dir(work.join("home/sessions"))
        .ok()
        .and_then(|mut projects| projects.next()?.ok())
        .map(|project| project.path().join("long-session/session.v4.jsonl"))
        .filter(|p| p.is_file())
        .ok_or("DSH wrote no session.v4.jsonl")?;
    Ok((Duration::from_secs_f64(seconds), migrated))
}

/// One sessionlog path, once, over a directory `SESSIONLOG_MIGRATE_BENCH_BUILD` made.
fn profile_one(which: &str) {
    let (path, dir) = which.split_once(':').unwrap_or((which, "."));
    let dir = Path::new(dir);
    let v4 = dir.join("session.v4.jsonl");
    let time = match path {
        "file" => sessionlog_file_to_file(&dir.join("session.jsonl"), &v4).0,
        "store" => sessionlog_store_export(&dir.join("store"), &v4).0,
        other => panic!("SESSIONLOG_MIGRATE_BENCH_PROFILE: {other:?} is neither file nor store"),
    };
    let _ = std::fs::remove_file(&v4);
    println!("{path}: {}", human_ns(ns(time)));
}

fn main() {
    let events: u64 = std::env::var("SESSIONLOG_MIGRATE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    if let Some(dir) = std::env::var_os("SESSIONLOG_MIGRATE_BENCH_BUILD") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).expect("build dir");
        let (v0, stored) = build_v0_file(dir, events);
        println!("built the {stored}-event V0 session {}", v0.display());
        return;
    }
    if let Ok(which) = std::env::var("SESSIONLOG_MIGRATE_BENCH_PROFILE") {
        profile_one(&which);
        return;
    }
    let probe = probe();
    let dir = fresh_dir("migrate");
    let started = Instant::now();
    let (v0, stored) = build_v0_file(&dir, events);
    let v0_bytes = std::fs::metadata(&v0).map_or(0, |m| m.len());
    println!(
        "built the {stored}-event V0 session ({:.0} MB) in {:.1?}",
        v0_bytes as f64 / 1e6,
        started.elapsed()
    );

    let v4 = dir.join("session.v4.jsonl");
    let mut best = Duration::MAX;
    let mut ours = Vec::new();
    for _ in 0..RUNS {
        let (time, out) = sessionlog_file_to_file(&v0, &v4);
        best = best.min(time);
        ours = out;
    }
    let mut from_store = Duration::MAX;
    for _ in 0..RUNS {
        let (time, bytes) = sessionlog_store_export(&dir.join("store"), &v4);
        assert_eq!(
            bytes,
            ours.len() as u64,
            "the store's V4 export has the file-to-file size"
        );
        from_store = from_store.min(time);
    }
    assert_eq!(
        std::fs::read(&v4).expect("V4"),
        ours,
        "the store's V4 export is the same file"
    );
    let _ = std::fs::remove_dir_all(dir.join("store"));
    let imported =
        import_jsonl(&std::fs::read(&v0).expect("V0"), &ImportOptions::default()).expect("import");
    let mut alone = Duration::MAX;
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = export_dsh(
            &imported.session,
            &ExportOptions::default().with_format(Some(DshFormat::V4)),
        )
        .expect("V4 export");
        alone = alone.min(started.elapsed());
        std::hint::black_box(out.len());
    }
    drop(imported);

    println!("{}", probe.summary());
    println!("V0 -> V4 migration of a {stored}-event session ({v0_bytes} bytes of V0 JSONL):");
    println!(
        "  sessionlog from its store {:>10}  (open, read the log, migrate, write + fdatasync; best of {RUNS})",
        human_ns(ns(from_store))
    );
    println!(
        "  sessionlog file to file   {:>10}  (read, import, migrate, write + fdatasync; best of {RUNS})",
        human_ns(ns(best))
    );
    println!(
        "  sessionlog migration      {:>10}  (export_dsh at V4 of the imported session; best of {RUNS})",
        human_ns(ns(alone))
    );
    match dsh_python() {
        None => println!(
            "  DSH: skipped (no runtime venv; run `bash interop/dsh-conformance/run.sh` once to install it)"
        ),
        Some(python) => match dsh_resume(&python, &v0, &dir.join("dsh")) {
            Err(why) => println!("  DSH: {why}"),
            Ok((time, migrated)) => {
                let theirs = std::fs::read(&migrated).expect("DSH's V4 file");
                let same = theirs.starts_with(&ours)
                    && theirs[ours.len()..].iter().filter(|b| **b == b'\n').count() == 1;
                println!(
                    "  DSH resume (migration)    {:>10}  (one run; its file {} sessionlog's plus the resume's end-seed)",
                    human_ns(ns(time)),
                    if same { "is" } else { "is NOT" }
                );
                println!(
                    "  ratio DSH / sessionlog: {:.2}x from the store, {:.2}x file to file, {:.2}x migration alone",
                    time.as_secs_f64() / from_store.as_secs_f64(),
                    time.as_secs_f64() / best.as_secs_f64(),
                    time.as_secs_f64() / alone.as_secs_f64()
                );
            }
        },
    }
    let _ = std::fs::remove_dir_all(&dir);
}
