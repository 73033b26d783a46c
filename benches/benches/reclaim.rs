//! Reclaim after deleting 90% of the sessions of a store: bytes of segment files before and
//! after `Log::reclaim`, and how fast it removes them. Scaled down from the 1 GiB target to
//! 128 MiB of generated sessions in 4 MiB segments (`SESSIONLOG_RECLAIM_MIB` sets the size).
//! Sessions are written 16 at a time, interleaved, 1 KiB records, group after group, as agent
//! traffic arrives. Two deletions: the oldest 90% by creation (a retention policy by age) and
//! a random 90% (seeded). Reclaim removes whole segments that hold no live record (what the
//! old sessions filled) and rewrites the sealed segments whose live share is below the default
//! threshold (a random 90% leaves about 10% live in every segment). Printed: the bytes left
//! against the target of 15% plus one segment, and the rewrite's copy throughput (record
//! bytes of live data copied per second of reclaim, target >= 100 MB/s).
//!
//! Then the target as stated, on the session layer: a store (`Store`, default options: 64 MiB
//! segments) filled with 1 GiB of generated agent sessions (`SESSIONLOG_RECLAIM_AGENT_MIB`;
//! 0 skips it), 16 sessions at a time taking turns, each turn committed; a random 90% of the
//! sessions deleted with `Store::delete_session`, then `Store::reclaim` (`sessionlog gc`):
//! the store directory's allocated bytes (`st_blocks`, every file) before and after, against
//! 15% of before plus one segment, and the live bytes copied per second.
//!
//! The random deletion runs twice in the same run: once as the engine does it (the rewritten
//! files of a group synced together, `Storage::sync_all_files` of the real storage), and once
//! through a storage that syncs them one after the other (the trait's default, what the
//! engine did before), the baseline of that choice.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use sessionlog_benches::{fill_interleaved_sessions, fresh_dir, payload, probe, write_json, Rng};
use sessionlog_log::{
    DirLock, Durability, Log, LogOptions, OpenMode, RealStorage, Storage, StorageFile, StreamId,
};

/// The real file system, with the files of a rewrite group synced one after the other (the
/// trait's default `sync_all_files`): the baseline of syncing them together.
#[derive(Debug)]
struct OneSyncAtATime;

impl Storage for OneSyncAtATime {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealStorage.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealStorage.list_dir(dir)
    }
    fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn StorageFile>> {
        RealStorage.open_file(path, mode)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealStorage.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealStorage.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealStorage.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealStorage.try_lock(path)
    }
}

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_SESSION: usize = 100;
const CONCURRENT_SESSIONS: usize = 16;
const SEGMENT_BYTES: u64 = 4 << 20;

fn store_mib() -> u64 {
    std::env::var("SESSIONLOG_RECLAIM_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

fn segment_file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Fills a store; returns the sessions in creation order.
fn fill(log: &Log, sessions: usize) -> Vec<StreamId> {
    let data = payload(3, RECORD_BYTES);
    let ids = fill_interleaved_sessions(
        log,
        sessions,
        RECORDS_PER_SESSION,
        CONCURRENT_SESSIONS,
        &data,
    );
    log.flush().expect("flush");
    ids
}

fn scenario(
    name: &str,
    storage: Arc<dyn Storage>,
    pick: impl Fn(&[StreamId]) -> Vec<StreamId>,
) -> serde_json::Value {
    let dir = fresh_dir(&format!("reclaim-{name}"));
    let options = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    let log = Log::open_with(storage, &dir, options).expect("open");
    let sessions = (store_mib() << 20) as usize / (RECORD_BYTES * RECORDS_PER_SESSION);
    let ids = fill(&log, sessions);
    for s in pick(&ids) {
        log.delete_stream(s, Durability::Buffered).expect("delete");
    }
    log.flush().expect("flush");
    let before = segment_file_bytes(&dir);
    let started = Instant::now();
    let report = log.reclaim().expect("reclaim");
    let secs = started.elapsed().as_secs_f64();
    let after = segment_file_bytes(&dir);
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);
    verdict(
        &format!("reclaim {name}: {sessions} sessions, segment files"),
        (before, after),
        SEGMENT_BYTES,
        &report,
        secs,
        json!({ "scenario": name, "sessions": sessions }),
    )
}

/// Prints what a reclaim did against the targets (bytes left <= 15% of `before` plus one
/// segment of `segment_bytes`; >= 100 MB/s of live data copied) after `what`, and returns it
/// as JSON: `fields` with the figures added.
fn verdict(
    what: &str,
    (before, after): (u64, u64),
    segment_bytes: u64,
    report: &sessionlog_log::ReclaimReport,
    secs: f64,
    mut fields: serde_json::Value,
) -> serde_json::Value {
    let limit = 0.15 * before as f64 + segment_bytes as f64;
    let reached = (after as f64) <= limit;
    let copy_mb_per_s = report.live_bytes_copied as f64 / 1e6 / secs.max(1e-9);
    let verdict = |ok: bool| if ok { "reached" } else { "not reached" };
    println!(
        "{what}: {:.1} MiB before, {:.1} MiB after ({:.1}% of before); {} segments removed, {} \
         rewritten ({:.1} MiB of live records copied) in {:.1} ms: {:.0} MB/s of live data \
         copied; target <= 15% + one segment ({:.1} MiB): {}; target >= 100 MB/s: {}",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        100.0 * after as f64 / before as f64,
        report.segments_removed.len(),
        report.segments_rewritten.len(),
        report.live_bytes_copied as f64 / 1048576.0,
        secs * 1e3,
        copy_mb_per_s,
        limit / 1048576.0,
        verdict(reached),
        verdict(copy_mb_per_s >= 100.0),
    );
    let figures = json!({
        "bytes_before": before,
        "bytes_after": after,
        "ratio_after_to_before": after as f64 / before as f64,
        "segments_removed": report.segments_removed.len(),
        "segments_rewritten": report.segments_rewritten.len(),
        "live_bytes_copied": report.live_bytes_copied,
        "copy_mb_per_s": copy_mb_per_s,
        "reclaim_seconds": secs,
        "target_bytes": limit,
        "reached": reached,
    });
    if let (Some(fields), Some(figures)) = (fields.as_object_mut(), figures.as_object()) {
        fields.extend(figures.clone());
    }
    fields
}

fn agent_mib() -> u64 {
    std::env::var("SESSIONLOG_RECLAIM_AGENT_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

/// Allocated bytes (`st_blocks`) of every file under `dir`.
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => allocated_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Events per generated session: about 0.8 MB of agent traffic each.
const AGENT_SESSION_EVENTS: u64 = 2_000;

/// The target on the session layer; see the module's doc.
fn agent_sessions(mib: u64) -> serde_json::Value {
    use sessionlog::workload::{Workload, WorkloadConfig};
    use sessionlog::{SessionHeader, Store, StoreOptions};

    let dir = fresh_dir("reclaim-agent-sessions");
    let store = Store::open(&dir, StoreOptions::default()).expect("open");
    let segment_bytes = LogOptions::default().segment_size_bytes;
    let wanted = mib << 20;
    let mut names = Vec::new();
    let mut events = 0u64;
    let filling = Instant::now();
    while segment_file_bytes(&dir) < wanted {
        let first = names.len();
        let mut group: Vec<_> = (first..first + CONCURRENT_SESSIONS)
            .map(|i| {
                let name = format!("agent-{i:06}");
                let header = SessionHeader::new(&name, 1_700_000_000_000, Some("/work"));
                let h = store.create_session(&name, header).expect("create");
                names.push(name);
                (h, Workload::new(i as u64, WorkloadConfig::default()))
            })
            .collect();
        let mut time = 1_700_000_000_000i64;
        while group
            .iter()
            .any(|(h, _)| h.next_seq().get() < AGENT_SESSION_EVENTS)
        {
            time += 1000;
            for (h, w) in group.iter_mut() {
                if h.next_seq().get() >= AGENT_SESSION_EVENTS {
                    continue;
                }
                for e in w.turn(h.next_seq().get(), time, None) {
                    h.append(e).expect("append");
                }
                if w.wants_compaction() {
                    let surface = h.state().surface();
                    if let Some(c) = w.compaction(&surface, h.next_seq(), time) {
                        for e in c {
                            h.append(e).expect("append compaction");
                        }
                    }
                }
                h.commit().expect("commit");
            }
        }
        events += group.iter().map(|(h, _)| h.next_seq().get()).sum::<u64>();
    }
    let fill_secs = filling.elapsed().as_secs_f64();
    let mut deleted = names.clone();
    Rng::new(0x5EED).shuffle(&mut deleted);
    deleted.truncate(names.len() * 9 / 10);
    for name in &deleted {
        store.delete_session(name).expect("delete");
    }
    let before = allocated_bytes(&dir);
    let started = Instant::now();
    let report = store.reclaim().expect("reclaim");
    let secs = started.elapsed().as_secs_f64();
    let after = allocated_bytes(&dir);
    // What is left reads back whole.
    let kept: Vec<_> = names.iter().filter(|n| !deleted.contains(n)).collect();
    for name in &kept {
        let h = store.open_session_as_is(name).expect("open a kept session");
        let read = h.events_from(sessionlog::Seq(0)).expect("events").len() as u64;
        assert_eq!(read, h.next_seq().get(), "session {name} reads back whole");
    }
    store.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);
    verdict(
        &format!(
            "reclaim of generated agent sessions (Store, {} MiB segments): {} sessions of {} \
             events ({events} events, filled in {fill_secs:.1} s), {} deleted; allocated bytes",
            segment_bytes >> 20,
            names.len(),
            AGENT_SESSION_EVENTS,
            deleted.len(),
        ),
        (before, after),
        segment_bytes,
        &report,
        secs,
        json!({
            "scenario": "agent_sessions_random_90_percent",
            "sessions": names.len(),
            "events": events,
            "segment_bytes": segment_bytes,
        }),
    )
}

fn main() {
    let probe = probe();
    let oldest = scenario("oldest_90_percent", Arc::new(RealStorage), |ids| {
        ids[..ids.len() * 9 / 10].to_vec()
    });
    let random_90 = |ids: &[StreamId]| {
        let mut picked: Vec<StreamId> = ids.to_vec();
        // Shuffled with the bench's seeded generator, then 90% kept.
        Rng::new(0x5EED).shuffle(&mut picked);
        picked.truncate(ids.len() * 9 / 10);
        picked
    };
    let one_at_a_time = scenario(
        "random_90_percent_one_sync_at_a_time",
        Arc::new(OneSyncAtATime),
        random_90,
    );
    let random = scenario("random_90_percent", Arc::new(RealStorage), random_90);
    let ratio = random["copy_mb_per_s"].as_f64().unwrap_or(0.0)
        / one_at_a_time["copy_mb_per_s"].as_f64().unwrap_or(f64::NAN);
    println!(
        "rewrite copy throughput, syncs together / one after the other: {ratio:.2}x; {}",
        probe.summary()
    );
    let agent = match agent_mib() {
        0 => serde_json::Value::Null,
        mib => agent_sessions(mib),
    };
    println!("{}", probe.summary());
    write_json(
        "reclaim.json",
        &json!({
            "probe": probe,
            "segment_bytes": SEGMENT_BYTES,
            "results": [oldest, one_at_a_time, random],
            "copy_ratio_together_to_one_at_a_time": ratio,
            "agent_sessions": agent,
        }),
    );
}
