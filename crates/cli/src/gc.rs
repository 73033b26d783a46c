//! `delete` and `gc`: deleting a session, and giving the space of deleted sessions back.

use std::io::{self, Write};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use sessionlog_log::Access;

use crate::{open_store, out, Failure};

/// Deletes one session: its name is free at once, its events stay on disk until `gc`.
pub(crate) fn delete(dir: &Path, session: &str) -> Result<u8, Failure> {
    let store = open_store(dir, Access::Existing)?;
    store.delete_session(session)?;
    store.close()?;
    let stdout = io::stdout();
    out(
        &mut stdout.lock(),
        format!("deleted {session}; run `sessionlog gc` to free its space\n").as_bytes(),
    )?;
    Ok(0)
}

/// Bytes of the segment files in `dir`.
fn segment_bytes(dir: &Path) -> Result<u64, Failure> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if sessionlog_format::parse_segment_file_name(&name.to_string_lossy()).is_some() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// Removes the segments nothing live needs and rewrites the mostly dead ones, with a progress
/// bar while it works.
pub(crate) fn gc(dir: &Path, json: bool) -> Result<u8, Failure> {
    let store = open_store(dir, Access::Existing)?;
    let segments_before = store.log_reader().stats().segments;
    let bytes_before = segment_bytes(dir)?;
    // Hidden when stderr is not a terminal.
    let bar = ProgressBar::new(segments_before as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} segments") {
        bar.set_style(style);
    }
    bar.set_message("gc");
    let report = store.reclaim_with_progress(&mut |r| {
        bar.set_position((r.segments_removed.len() + r.segments_rewritten.len()) as u64)
    })?;
    bar.finish_and_clear();
    store.close()?;
    let bytes_after = segment_bytes(dir)?;
    let removed = report.segments_removed.len();
    let rewritten = report.segments_rewritten.len();
    let stdout = io::stdout();
    let mut w = stdout.lock();
    if json {
        let stopped = report
            .stopped_at
            .map(|(id, why)| serde_json::json!({ "segment": id.0, "reason": why }));
        let v = serde_json::json!({
            "segmentsRemoved": removed,
            "segmentsRewritten": rewritten,
            "liveBytesCopied": report.live_bytes_copied,
            "bytesBefore": bytes_before,
            "bytesAfter": bytes_after,
            "keptFrom": stopped,
        });
        out(&mut w, format!("{v}\n").as_bytes())?;
    } else {
        let mut text = format!(
            "segments removed: {removed}\nsegments rewritten: {rewritten}\nbytes before: {bytes_before}\nbytes after: {bytes_after}\n"
        );
        if let Some((id, why)) = report.stopped_at {
            text.push_str(&format!("kept from segment {}: {why}\n", id.0));
        }
        out(&mut w, text.as_bytes())?;
    }
    w.flush()?;
    Ok(0)
}
