//! DSH format V0 -> V4 migration of the 1,000,008-event benchmark session (the seeded workload
//! generator's agent traffic, as `benches/compare` builds it for its replay table), by
//! sessionlog and by DeepSeek Harness itself, in the same run, with the disk probe.
//!
//! Every path runs once in each of `ROUNDS` rounds, DSH last, and each round's ratios are
//! DSH's time over that round's sessionlog times, so a change of the machine's load between
//! rounds moves both sides of a ratio; the median of the rounds is printed last.
//!
//! - sessionlog: the session it holds exported at V4 from its store into
//!   `session.v4.jsonl` with `fdatasync` (open, read the log, migrate, write: what `export
//!   --format-version 4` does); the V0 file read, imported (parse, validate, fold), migrated
//!   beside the fold and written into its file as it is made (`import_and_export_to`), with
//!   `fdatasync`; and the migration alone (`export_dsh` at V4 of the imported session).
//! - DSH: the real runtime (`deepseek-harness-sdk==0.2.1rc2`, installed as the conformance job
//!   installs it) resumes the V0 file from a fresh DSH home; timed from `resume_session` until
//!   it returns, when the migrated `session.v4.jsonl` is written (the runtime's start is not
//!   timed). DSH's file must be sessionlog's plus the `session/end-seed` a resume appends,
//!   checked in every round.
//!
//! `cargo bench -p sessionlog-benches --bench migrate` runs sessionlog's paths with the system
//! allocator, `--features jemalloc` with the allocator the CLI ships. `SESSIONLOG_MIGRATE_BENCH_EVENTS`
//! sets a smaller session for a quick look, `SESSIONLOG_MIGRATE_BENCH_ROUNDS` more rounds.
//! Every file is removed at the end.
//!
//! For profiling one path: `SESSIONLOG_MIGRATE_BENCH_BUILD=DIR` only builds the store and
//! the V0 file into `DIR` (kept); `SESSIONLOG_MIGRATE_BENCH_PROFILE=file:DIR` (or
//! `store:DIR`) then runs that one sessionlog path once over them and prints its time.

use std::path::{Path, PathBuf};
use std::process::Command;

// With `--features jemalloc`, the allocator the CLI ships; without, the system's.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The allocator sessionlog's paths run with in this build of the bench.
const ALLOCATOR_NAME: &str = if cfg!(feature = "jemalloc") {
    "jemalloc (--features jemalloc, as the CLI ships)"
} else {
    "the system's (--features jemalloc runs them with the CLI's jemalloc)"
};
use std::time::{Duration, Instant};

use sessionlog::session::SessionHeader;
use sessionlog::{Store, StoreOptions};
use sessionlog_benches::{fill_compare_session, fresh_dir, human_ns, ns, probe};
use sessionlog_session::{
    export_dsh, import_and_export_to, import_jsonl, DshFormat, ExportOptions, ImportOptions,
};

/// Rounds by default; `SESSIONLOG_MIGRATE_BENCH_ROUNDS` sets another number.
const ROUNDS: usize = 3;

/// One round's times: each sessionlog path once, then DSH once.
struct Round {
    file_to_file: Duration,
    from_store: Duration,
    alone: Duration,
    dsh: Option<Duration>,
}

impl Round {
    /// DSH's time over each sessionlog path's: file to file, from the store, migration alone.
    fn ratios(&self) -> Option<[f64; 3]> {
        let dsh = self.dsh?.as_secs_f64();
        Some([self.file_to_file, self.from_store, self.alone].map(|t| dsh / t.as_secs_f64()))
    }

    fn line(&self) -> String {
        let mut line = format!(
            "file to file {}, from the store {}, migration alone {}",
            human_ns(ns(self.file_to_file)),
            human_ns(ns(self.from_store)),
            human_ns(ns(self.alone))
        );
        if let (Some(dsh), Some([f, s, a])) = (self.dsh, self.ratios()) {
            line.push_str(&format!(
                "; DSH {} = {f:.2}x, {s:.2}x, {a:.2}x",
                human_ns(ns(dsh))
            ));
        }
        line
    }
}

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
    let python = dsh_python();
    let imported =
        import_jsonl(&std::fs::read(&v0).expect("V0"), &ImportOptions::default()).expect("import");
    // Each round runs every path once, DSH's last, so that a change of the machine's load
    // moves a round's paths together; a round's ratios compare its own runs.
    let mut rounds: Vec<Round> = Vec::new();
    let mut ours = Vec::new();
    let rounds_asked: usize = std::env::var("SESSIONLOG_MIGRATE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(ROUNDS);
    for round in 1..=rounds_asked {
        let (file_to_file, out) = sessionlog_file_to_file(&v0, &v4);
        ours = out;
        let (from_store, bytes) = sessionlog_store_export(&dir.join("store"), &v4);
        assert_eq!(
            bytes,
            ours.len() as u64,
            "the store's V4 export has the file-to-file size"
        );
        let started = Instant::now();
        let out = export_dsh(
            &imported.session,
            &ExportOptions::default().with_format(Some(DshFormat::V4)),
        )
        .expect("V4 export");
        let alone = started.elapsed();
        assert_eq!(out, ours, "the migration alone writes the same file");
        drop(out);
        let dsh = match &python {
            None => None,
            Some(python) => {
                let work = dir.join(format!("dsh-{round}"));
                let timed = dsh_resume(python, &v0, &work);
                let dsh = match timed {
                    Err(why) => {
                        println!("  round {round}: DSH: {why}");
                        None
                    }
                    Ok((time, migrated)) => {
                        let theirs = std::fs::read(&migrated).expect("DSH's V4 file");
                        let same = theirs.starts_with(&ours)
                            && theirs[ours.len()..].iter().filter(|b| **b == b'\n').count() == 1;
                        assert!(
                            same,
                            "DSH's V4 file is sessionlog's plus the resume's end-seed"
                        );
                        Some(time)
                    }
                };
                let _ = std::fs::remove_dir_all(&work);
                dsh
            }
        };
        let this = Round {
            file_to_file,
            from_store,
            alone,
            dsh,
        };
        println!("  round {round}: {}", this.line());
        rounds.push(this);
    }
    assert_eq!(
        std::fs::read(&v4).expect("V4"),
        ours,
        "the store's V4 export is the same file"
    );
    drop(imported);

    println!("{}", probe.summary());
    println!("V0 -> V4 migration of a {stored}-event session ({v0_bytes} bytes of V0 JSONL), {rounds_asked} interleaved rounds:");
    println!("  allocator of sessionlog's paths: {ALLOCATOR_NAME}");
    println!("  sessionlog file to file: read, import, migrate, write + fdatasync (import_and_export_to)");
    println!("  sessionlog from its store: open, read the log, migrate, write + fdatasync (write_dsh_as)");
    println!("  sessionlog migration alone: export_dsh at V4 of the imported session");
    match python {
        None => println!(
            "  DSH: skipped (no runtime venv; run `bash interop/dsh-conformance/run.sh` once to install it)"
        ),
        Some(_) => println!(
            "  DSH: resume_session of the V0 file until its session.v4.jsonl is written (sessionlog's file plus the resume's end-seed, checked each round)"
        ),
    }
    for (k, round) in rounds.iter().enumerate() {
        println!("  round {}: {}", k + 1, round.line());
    }
    let ratios: Vec<[f64; 3]> = rounds.iter().filter_map(Round::ratios).collect();
    if !ratios.is_empty() {
        let median = |i: usize| {
            let mut column: Vec<f64> = ratios.iter().map(|r| r[i]).collect();
            column.sort_by(f64::total_cmp);
            column[column.len() / 2]
        };
        println!(
            "  median ratio DSH / sessionlog over {} rounds: {:.2}x file to file, {:.2}x from the store, {:.2}x migration alone",
            ratios.len(),
            median(0),
            median(1),
            median(2)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
