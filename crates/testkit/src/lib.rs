//! Test support for sessionlog: a simulated storage that models power loss and injects faults,
//! and a reference model that checks a recovered log against what was acknowledged.
//!
//! [`SimStorage`] implements the log's [`sessionlog_log::Storage`] trait in memory. It keeps a
//! durable and a written image of every file, loses or tears unsynced writes at a crash
//! ([`SimStorage::crash`]), reverts unsynced directory changes, and fails chosen operations
//! ([`Fault`]). [`ReferenceModel`] knows what a recovered log must hold, given what the log
//! acknowledged. Everything is driven by seeds, so a failing schedule reproduces from its seed.

#![forbid(unsafe_code)]

pub mod adapter;
pub mod conformance;
pub mod corpus;
pub mod crash;
pub mod fault;
pub mod model;
#[cfg(test)]
mod model_tests;
pub mod resume;
mod sim;
#[cfg(test)]
mod sim_tests;

pub use corpus::dsh_corpus;
pub use crash::{CrashPolicy, CrashReport, FileOutcome, Survival, Tear};
pub use fault::{Fault, FaultError, OpKind, Persistence};
pub use model::{
    CheckSummary, LogSnapshot, ModelAppend, ModelRecord, ReferenceModel, Restart, SnapshotStream,
    Violation,
};
pub use sim::{SimConfig, SimFile, SimStats, SimStorage};

/// Log options for a test store: 256 KiB segments, so a few thousand events roll through
/// several, and no preallocation, so a test's stores take only what they hold.
pub fn small_segments() -> sessionlog_log::LogOptions {
    sessionlog_log::LogOptions::default()
        .with_preallocate(false)
        .with_segment_size_bytes(256 << 10)
}
