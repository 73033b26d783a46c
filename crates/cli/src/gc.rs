//! `delete`, `log delete` and `gc`: deleting a session or a raw stream, deleting the sessions
//! a retention policy names, and giving the space of what was deleted back.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use sessionlog::{Retention, RetentionReport};
use sessionlog_log::Access;

use crate::{open_store, open_store_with, out, store_options, Failure};

/// Deletes one session: its name is free at once, its events stay on disk until `gc`.
pub(crate) fn delete(dir: &Path, session: &str) -> Result<u8, Failure> {
    let store = open_store(dir, Access::Existing)?;
    store.delete_session(session)?;
    store.close()?;
    deleted(session)
}

/// Deletes one raw stream: its name is free at once, its records stay on disk until `gc`.
pub(crate) fn delete_raw(dir: &Path, stream: &str) -> Result<u8, Failure> {
    let store = open_store(dir, Access::Existing)?;
    let found = store.delete_raw_stream(stream)?;
    store.close()?;
    if !found {
        return Err(sessionlog::Error::NoSuchRawStream(stream.to_owned()).into());
    }
    deleted(&format!("raw stream {stream}"))
}

/// Says that `what` was deleted and how to get its space back.
fn deleted(what: &str) -> Result<u8, Failure> {
    let stdout = io::stdout();
    out(
        &mut stdout.lock(),
        format!("deleted {what}; run `sessionlog gc` to free its space\n").as_bytes(),
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

/// The retention policy `gc` was given: by age, by a list, or none.
fn retention(
    older_than: Option<&str>,
    sessions_from: Option<&Path>,
) -> Result<Option<Retention>, Failure> {
    match (older_than, sessions_from) {
        (Some(_), Some(_)) => Err(Failure::new(
            2,
            "give --older-than or --sessions-from, not both".to_owned(),
        )),
        (Some(d), None) => Ok(Some(Retention::older_than(parse_duration(d)?))),
        (None, Some(path)) => {
            let text = if path == Path::new("-") {
                io::read_to_string(io::stdin())
            } else {
                std::fs::read_to_string(path)
            }
            .map_err(|e| Failure::new(2, format!("reading {}: {e}", path.display())))?;
            let names = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            Ok(Some(Retention::Sessions(names)))
        }
        (None, None) => Ok(None),
    }
}

/// `30d`, `12h`, `90m`, `45s`, `2w`: a whole number and one unit.
fn parse_duration(text: &str) -> Result<Duration, Failure> {
    let bad = || {
        Failure::new(
            2,
            format!("cannot read duration {text:?}: write a whole number and a unit, s, m, h, d or w (e.g. 30d)"),
        )
    };
    let unit_at = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(unit_at);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    n.checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
fn bar(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template(&format!("{{msg}} {{bar:30}} {{pos}}/{{len}} {what}"))
    {
        bar.set_style(style);
    }
    bar.set_message("gc");
    bar
}

/// Which sealed segments `gc` rewrites, beyond removing the dead ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rewrites {
    /// The live share under which a segment is rewritten (the store's default when `None`).
    pub below_live_percent: Option<u32>,
    /// Compress every sealed segment not compressed yet, this way.
    pub compress: Option<sessionlog_log::Compression>,
}

/// Deletes what the retention policy names, then removes the segments nothing live needs and
/// rewrites the mostly dead ones, with a progress bar while it works.
pub(crate) fn gc(
    dir: &Path,
    json: bool,
    older_than: Option<&str>,
    sessions_from: Option<&Path>,
    rewrites: Rewrites,
) -> Result<u8, Failure> {
    let policy = retention(older_than, sessions_from)?;
    let mut options = store_options();
    if let Some(percent) = rewrites.below_live_percent {
        options.log = options.log.with_rewrite_below_live_percent(percent);
    }
    if let Some(compression) = rewrites.compress {
        options.log = options.log.with_compression(compression);
    }
    let store = open_store_with(dir, Access::Existing, options)?;
    let retained = match &policy {
        Some(policy) => {
            let bar = bar(0, "sessions");
            let report = store.apply_retention(policy, &mut |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish_and_clear();
            report
        }
        None => RetentionReport::default(),
    };
    let bytes_before = segment_bytes(dir)?;
    // With `--compress` the store is at rest (this process holds it): the active segment is
    // sealed too, so every event ends up compressed, not only those of full segments.
    if rewrites.compress.is_some() {
        store.seal_active_segment()?;
    }
    let segments_before = store.log_reader().stats().segments;
    let bar = bar(segments_before, "segments");
    let report = store.reclaim_with_progress(&mut |r| {
        bar.set_position((r.segments_removed.len() + r.segments_rewritten.len()) as u64)
    })?;
    bar.finish_and_clear();
    store.close()?;
    let bytes_after = segment_bytes(dir)?;
    let removed = report.segments_removed.len();
    let rewritten = report.segments_rewritten.len();
    let compressed = report.segments_compressed.len();
    let deleted = retained.deleted.len();
    let stdout = io::stdout();
    let mut w = stdout.lock();
    if json {
        let stopped = report
            .stopped_at
            .map(|(id, why)| serde_json::json!({ "segment": id.0, "reason": why }));
        let v = serde_json::json!({
            "sessionsDeleted": deleted,
            "sessionsMissing": retained.missing,
            "sessionsBusy": retained.busy,
            "segmentsRemoved": removed,
            "segmentsRewritten": rewritten,
            "segmentsCompressed": compressed,
            "liveBytesCopied": report.live_bytes_copied,
            "bytesBefore": bytes_before,
            "bytesAfter": bytes_after,
            "keptFrom": stopped,
        });
        out(&mut w, format!("{v}\n").as_bytes())?;
    } else {
        let mut text = String::new();
        if policy.is_some() {
            text.push_str(&format!("sessions deleted: {deleted}\n"));
            for name in &retained.missing {
                text.push_str(&format!("not in the store: {name}\n"));
            }
            for name in &retained.busy {
                text.push_str(&format!("kept, a writer has it open: {name}\n"));
            }
        }
        text.push_str(&format!(
            "segments removed: {removed}\nsegments rewritten: {rewritten}\nsegments compressed: {compressed}\nbytes before: {bytes_before}\nbytes after: {bytes_after}\n"
        ));
        if let Some((id, why)) = report.stopped_at {
            text.push_str(&format!("kept from segment {}: {why}\n", id.0));
        }
        out(&mut w, text.as_bytes())?;
    }
    w.flush()?;
    Ok(0)
}
