//! Where the DeepSeek Harness fixture corpus is, for the tests that need it.
//!
//! The corpus is not part of the repository: it lives in `shared/` beside it
//! (`<repo>/../shared/fixtures/dsh`), or wherever `SESSIONLOG_SHARED_DIR` points. A clone
//! without it still runs the rest of the suite: each corpus test calls [`dsh_corpus`], which
//! prints one line naming the skipped test and why, and the test returns early. CI sets
//! `SESSIONLOG_REQUIRE_SHARED=1`, under which a missing corpus fails the test instead, so a
//! skip can never pass unnoticed there.
//!
//! This file has no dependencies, so crates that `sessionlog-testkit` itself depends on can
//! include it with `#[path]` instead of depending on the testkit.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the `shared/` directory.
pub const SHARED_DIR_VAR: &str = "SESSIONLOG_SHARED_DIR";

/// The environment variable under which a missing corpus is a test failure, not a skip.
pub const REQUIRE_SHARED_VAR: &str = "SESSIONLOG_REQUIRE_SHARED";

/// The `shared/` directory: `SESSIONLOG_SHARED_DIR`, else the `shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os(SHARED_DIR_VAR) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        // Every crate that compiles this file has its manifest two levels below the
        // repository root (crates/NAME), so `shared` sits beside the directory three up.
        _ => {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .nth(3)
                .unwrap_or(manifest)
                .join("shared")
        }
    }
}

/// Whether a missing corpus must fail (`SESSIONLOG_REQUIRE_SHARED` set to anything but
/// empty or `0`).
pub fn corpus_required() -> bool {
    std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The DSH fixture corpus (`shared/fixtures/dsh`, holding `logs/` and `golden/`), or `None`
/// after printing one line saying that `test` is skipped and why.
///
/// # Panics
/// When the corpus is missing and [`corpus_required`] holds: under CI a skipped corpus test
/// is a failure.
pub fn dsh_corpus(test: &str) -> Option<PathBuf> {
    let dir = shared_dir().join("fixtures/dsh");
    if dir.join("logs").is_dir() {
        return Some(dir);
    }
    let why = format!(
        "the DSH fixture corpus is not at {} (set {SHARED_DIR_VAR} to the shared/ directory \
         that holds fixtures/dsh)",
        dir.display()
    );
    assert!(
        !corpus_required(),
        "{test}: {why}; {REQUIRE_SHARED_VAR} is set, so this fails"
    );
    // Straight to the process's stderr, past the test harness's capture, so the skip is
    // seen in a normal `cargo test` run.
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
    None
}
