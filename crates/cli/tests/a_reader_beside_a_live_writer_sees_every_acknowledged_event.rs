//! A writer process appends events durably and keeps going; reader processes started one
//! after another beside it each see every event the writer acknowledged before the reader
//! started, and only a gap-free prefix of what was written, byte for byte; `verify` beside it
//! finds the store intact.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bin, event_line, run};

const EVENTS: u64 = 400;
const READERS: usize = 12;

#[test]
fn a_reader_beside_a_live_writer_sees_every_acknowledged_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path").to_owned();
    let mut writer = Command::new(bin())
        .args(["append", "--store", &s, "--session", "w", "--create"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn writer");
    let mut stdin = writer.stdin.take().expect("stdin");
    let stdout = writer.stdout.take().expect("stdout");
    let acked = Arc::new(AtomicU64::new(0));
    let acks = {
        let acked = acked.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let v: serde_json::Value =
                    serde_json::from_str(&line.expect("ack line")).expect("ack is JSON");
                let seq = v["seq"].as_u64().expect("seq");
                assert_eq!(seq, acked.load(Ordering::SeqCst), "acks out of order");
                acked.store(seq + 1, Ordering::SeqCst);
            }
        })
    };
    let feeder = std::thread::spawn(move || {
        for i in 0..EVENTS {
            writeln!(stdin, "{}", event_line(i)).expect("feed the writer");
            if i % 8 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // Dropping stdin lets the writer finish.
    });

    let mut seen_while_writing = 0;
    for _ in 0..READERS {
        while acked.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let before = acked.load(Ordering::SeqCst);
        let r = run(&["events", "--store", &s, "--session", "w"], "");
        assert_eq!(r.code, 0, "reader beside the writer failed: {r:?}");
        let mut n = 0u64;
        for line in r.stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("event is JSON");
            assert_eq!(v["seq"].as_u64(), Some(n), "not a gap-free prefix: {line}");
            let sent: serde_json::Value =
                serde_json::from_str(&event_line(n)).expect("sent line is JSON");
            assert_eq!(
                v["type"], sent["type"],
                "event {n} differs from what was sent"
            );
            assert_eq!(
                v["data"], sent["data"],
                "event {n} differs from what was sent"
            );
            n += 1;
        }
        assert!(
            n >= before,
            "the reader saw {n} events, but {before} were acknowledged before it started"
        );
        if n < EVENTS {
            seen_while_writing += 1;
        }
        let verify = run(&["verify", "--store", &s], "");
        assert_eq!(verify.code, 0, "verify beside the writer: {verify:?}");
        std::thread::sleep(Duration::from_millis(15));
    }
    feeder.join().expect("feeder");
    let status = writer.wait().expect("writer exits");
    acks.join().expect("acks");
    assert!(status.success(), "writer failed");
    assert_eq!(acked.load(Ordering::SeqCst), EVENTS);
    assert!(
        seen_while_writing > 0,
        "no reader ran while the writer was still writing; the test proved nothing"
    );
    let last = run(&["events", "--store", &s, "--session", "w"], "");
    assert_eq!(common::gap_free_seqs(&last.stdout), EVENTS);
}
