//! A writer reserved its active segment whole and was killed (SIGKILL) with most of it
//! unwritten. The open that recovers the store looks at the segment's data only: the
//! unwritten rest reads as zeros by definition, so nothing of it is read. Reading any of it
//! (the last 32 bytes, where a sealed segment keeps its footer trailer, say) would fault in
//! pages of zeros around it, which the file system then reports as data, and the scan would
//! compare tens of megabytes of zeros that were never written. The test checks where the
//! file system says the segment's data ends, before and after the open.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use sessionlog_log::{Append, Durability, Log, LogOptions, OpenMode, RealStorage, Seq, Storage};

const SEGMENT_BYTES: u64 = 16 << 20;
const RECORDS: u64 = 400;
const PAYLOAD: usize = 4096;

/// Reserved whole, so that the active segment has an unwritten rest.
fn options() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(SEGMENT_BYTES)
        .with_first_preallocation_bytes(SEGMENT_BYTES)
}

fn payload(i: u64) -> Vec<u8> {
    let mut p = vec![(i % 251) as u8 + 1; PAYLOAD];
    p[..8].copy_from_slice(&i.to_le_bytes());
    p
}

/// Where the file system says the file's data ends (the storage's own answer, which the
/// open asks too).
fn data_end(path: &Path) -> u64 {
    RealStorage
        .open_file(path, OpenMode::ReadOnly)
        .and_then(|file| file.data_end())
        .expect("the segment's data end")
}

/// Run by the test below in a process of its own, which it kills.
#[test]
#[ignore = "a child process of the test below"]
fn child_appends_durably_then_waits_to_be_killed() {
    let Some(dir) = std::env::var_os("SESSIONLOG_CRASH_CHILD_DIR") else {
        return;
    };
    let log = Log::open(&dir, options()).expect("open");
    let s = log.create_stream("s").expect("create");
    for i in 0..RECORDS {
        log.commit(&[Append::new(s, 1, &payload(i))], Durability::Sync)
            .expect("commit");
    }
    println!("child ready");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

#[test]
fn an_open_after_a_crash_reads_no_byte_of_the_unwritten_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_appends_durably_then_waits_to_be_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SESSIONLOG_CRASH_CHILD_DIR", dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.ends_with("child ready"));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    assert!(ready, "the child appended its records");

    let segment = dir.path().join("00000000000000000001.seg");
    let len = std::fs::metadata(&segment).expect("segment").len();
    let before = data_end(&segment);
    assert_eq!(len, SEGMENT_BYTES, "the segment was reserved whole");
    let written = RECORDS * PAYLOAD as u64;
    assert!(
        before >= written && before < len / 2,
        "data ends at {before} of {len}: the rest of the segment should be unwritten (a file \
         system that reports reserved space as data, unlike ext4 and XFS, cannot run this test)"
    );

    let log = Log::open(dir.path(), options()).expect("open after the crash");
    assert!(!log.recovery_report().clean_close);
    assert_eq!(log.recovery_report().active_records, RECORDS + 1);
    let s = log.stream_id("s").expect("stream");
    let read: Vec<Vec<u8>> = log
        .iter(s, Seq(0), Seq(u64::MAX))
        .map(|r| r.expect("record").payload.to_vec())
        .collect();
    assert_eq!(read, (0..RECORDS).map(payload).collect::<Vec<_>>());
    assert_eq!(
        data_end(&segment),
        before,
        "the open read some of the unwritten rest, which now reads as data"
    );
    drop(log);
}
