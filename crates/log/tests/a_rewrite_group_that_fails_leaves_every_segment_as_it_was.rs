//! A foreground reclaim builds and writes the rewrites of a group on several threads. When
//! one of them fails, slowly, while the other threads go on staging later segments of the
//! group, the whole group is given up: reclaim reports that failure, every staged rewrite is
//! removed (no `.rewrite` file is left), every segment file is byte for byte what it was,
//! and every record reads back; the next reclaim, with the failure gone, rewrites them all.

mod common;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Hooked, Hooks};
use sessionlog_log::{Append, Durability, Error, Log, LogOptions, OpenMode, Seq, StreamId};

const SEGMENT_BYTES: u64 = 64 << 10;
const STREAMS: usize = 20;
const RECORDS: u32 = 40;
const KEPT: [usize; 2] = [3, 11];

/// The real file system, but creating the rewrite of segment 1 (the first of the group)
/// fails after a pause while `failing` is set.
#[derive(Debug)]
struct FirstRewriteFails {
    failing: AtomicBool,
}

impl Hooks for FirstRewriteFails {
    fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<()> {
        let first_rewrite = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == format!("{:020}.rewrite", 1));
        if first_rewrite && mode == OpenMode::CreateNew && self.failing.load(Ordering::SeqCst) {
            // Long enough for the other threads to stage the rest of the group.
            std::thread::sleep(std::time::Duration::from_millis(200));
            return Err(io::Error::other("injected: no room for the rewrite"));
        }
        Ok(())
    }
}

fn payload(stream: usize, i: u32) -> Vec<u8> {
    let mut p = format!("stream {stream} record {i};").into_bytes();
    p.resize(700 + (i as usize * 37 + stream * 11) % 400, b'a');
    p
}

fn segment_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

fn rewrites_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rewrite"))
        .collect()
}

fn read_all(log: &Log, id: StreamId) -> Vec<Vec<u8>> {
    log.iter(id, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect()
}

#[test]
fn a_failed_rewrite_gives_up_its_group_and_removes_every_staged_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Hooked::new(FirstRewriteFails {
        failing: AtomicBool::new(true),
    });
    let options = LogOptions::default().with_segment_size_bytes(SEGMENT_BYTES);
    let log = Log::open_with(storage.clone(), dir.path(), options).expect("open");
    let ids: Vec<StreamId> = (0..STREAMS)
        .map(|s| log.create_stream(&format!("s{s}")).expect("create"))
        .collect();
    for i in 0..RECORDS {
        for (s, id) in ids.iter().enumerate() {
            log.commit(&[Append::new(*id, 1, &payload(s, i))], Durability::Buffered)
                .expect("commit");
        }
    }
    for (s, id) in ids.iter().enumerate() {
        if !KEPT.contains(&s) {
            log.delete_stream(*id, Durability::Buffered)
                .expect("delete");
        }
    }
    log.flush().expect("flush");
    let before = segment_files(dir.path());
    assert!(
        before.len() >= 6,
        "a group of several segments: {}",
        before.len()
    );

    match log.reclaim() {
        Err(Error::Io { .. }) => {}
        other => panic!("reclaim must report the failed rewrite, got {other:?}"),
    }
    assert_eq!(rewrites_left(dir.path()), Vec::<String>::new());
    let after = segment_files(dir.path());
    assert!(after == before, "every segment file is as it was");
    for &s in &KEPT {
        let want: Vec<Vec<u8>> = (0..RECORDS).map(|i| payload(s, i)).collect();
        assert!(read_all(&log, ids[s]) == want, "stream {s} reads back");
    }

    storage.hooks.failing.store(false, Ordering::SeqCst);
    let report = log.reclaim().expect("reclaim once the failure is gone");
    assert!(
        report.segments_rewritten.len() >= before.len() - 2,
        "{report:?}"
    );
    assert_eq!(rewrites_left(dir.path()), Vec::<String>::new());
    for &s in &KEPT {
        let want: Vec<Vec<u8>> = (0..RECORDS).map(|i| payload(s, i)).collect();
        assert!(
            read_all(&log, ids[s]) == want,
            "stream {s} reads back after the rewrite"
        );
    }
    log.close().expect("close");
}
