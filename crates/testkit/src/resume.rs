//! The checkpoint proof: for a session's events and a set of cut points `k`, the state
//! folded over events `0..k`, checkpointed, decoded and folded over `k..n` equals the state
//! folded over all `n` events, token measurement and pressure included.
//!
//! This file depends only on `sessionlog-session`, so that crate's own tests include it
//! with `#[path]` instead of depending on the testkit.

use std::sync::Arc;

use sessionlog_session::tokens::TokenCounter;
use sessionlog_session::{Event, FormatVersion, RuleSet, SessionHeader, SessionState};

/// Up to `samples` cut points of a session of `n` events: every one when `n` is small,
/// else both ends and evenly spaced ones between.
pub fn cut_points(n: usize, samples: usize) -> Vec<usize> {
    if n <= samples {
        return (0..=n).collect();
    }
    let mut cuts: Vec<usize> = (0..samples).map(|i| i * n / samples).collect();
    cuts.extend([1, n - 1, n]);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Folds `events[from..]` (already upgraded, seq = index) into `state` under DSH's rules.
pub fn fold(state: &mut SessionState, events: &[Event], from: usize) -> Result<(), String> {
    for (i, event) in events.iter().enumerate().skip(from) {
        let past = events.get(..i).unwrap_or_default();
        state
            .append(event, RuleSet::Dsh, &past)
            .map_err(|e| format!("event {i} refused: {e}"))?;
    }
    Ok(())
}

fn fresh(
    header: &SessionHeader,
    version: &FormatVersion,
    counter: Option<&Arc<dyn TokenCounter>>,
) -> SessionState {
    match counter {
        Some(c) => SessionState::with_tokens(header.clone(), version.clone(), Arc::clone(c)),
        None => SessionState::new(header.clone(), version.clone()),
    }
}

/// Checks the proof at every cut of `cuts`; returns a description of every mismatch.
pub fn check_resume_at_cuts(
    header: &SessionHeader,
    version: &FormatVersion,
    counter: Option<&Arc<dyn TokenCounter>>,
    events: &[Event],
    cuts: &[usize],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut full = fresh(header, version, counter);
    if let Err(e) = fold(&mut full, events, 0) {
        return vec![format!("full fold: {e}")];
    }
    let mut prefix = fresh(header, version, counter);
    let mut folded = 0;
    for &k in cuts {
        // Cuts are increasing: extend the prefix state instead of refolding it.
        if let Err(e) = fold(&mut prefix, events.get(..k).unwrap_or(events), folded) {
            return vec![format!("prefix fold to {k}: {e}")];
        }
        folded = k;
        let mut bytes = Vec::new();
        prefix.encode_checkpoint(&mut bytes);
        let mut resumed =
            match SessionState::decode_checkpoint(&bytes, version.clone(), counter.cloned()) {
                Ok(state) => state,
                Err(e) => {
                    problems.push(format!("cut {k}: checkpoint refused: {e}"));
                    continue;
                }
            };
        if resumed != prefix {
            problems.push(format!(
                "cut {k}: decoded state differs from the folded one"
            ));
        }
        let mut again = Vec::new();
        resumed.encode_checkpoint(&mut again);
        if again != bytes {
            problems.push(format!("cut {k}: re-encoding is not byte-identical"));
        }
        if let Err(e) = fold(&mut resumed, events, k) {
            problems.push(format!("cut {k}: resumed fold: {e}"));
            continue;
        }
        if resumed != full {
            problems.push(format!("cut {k}: resumed state differs from the full fold"));
        }
        if resumed.token_view() != full.token_view() || resumed.pressure() != full.pressure() {
            problems.push(format!("cut {k}: token view or pressure differs"));
        }
        if resumed.repair_closers().ok() != full.repair_closers().ok() {
            problems.push(format!("cut {k}: restart closers differ"));
        }
    }
    problems
}
