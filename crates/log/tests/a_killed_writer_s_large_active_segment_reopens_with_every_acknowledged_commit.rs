//! Real crashes of a writer whose active segment holds megabytes: several threads commit
//! records durably, each printing what was acknowledged, and the process is killed (SIGKILL)
//! once a random amount of data, 6 to 20 MiB, was acknowledged. An open then scans that
//! segment on every CPU (a segment this large is cut into parts checked ahead of the scan),
//! and must find every acknowledged record byte for byte in gap-free streams, nothing that
//! was never sent, and the same streams through a read-only open beside it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

const THREADS: u64 = 4;
const KILLS: u64 = 4;

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(32 << 20)
}

/// The payload of record `seq` of stream `stream`: 200 B to 8 KiB, its bytes telling both.
fn payload(stream: u64, seq: u64) -> Vec<u8> {
    let len = 200 + ((stream * 7919 + seq * 104_729) % 8000) as usize;
    let mut p = vec![(seq % 251) as u8; len];
    p[..16].copy_from_slice(&[stream.to_le_bytes(), seq.to_le_bytes()].concat());
    p
}

/// Run by the test below in a process of its own, which it kills.
#[test]
#[ignore = "a child process of the test below"]
fn child_commits_from_several_threads_until_killed() {
    let Some(dir) = std::env::var_os("SESSIONLOG_KILL_CHILD_DIR") else {
        return;
    };
    let log = Log::open(&dir, options()).expect("open");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let log = &log;
            s.spawn(move || {
                let stream = log.create_stream(&format!("s{t}")).expect("create");
                for seq in 0.. {
                    let p = payload(t, seq);
                    log.commit(&[Append::new(stream, 1, &p)], Durability::Sync)
                        .expect("commit");
                    println!("ack {t} {seq} {}", p.len());
                }
            });
        }
    });
}

/// Kills a child once `bytes` were acknowledged; returns the highest seq acknowledged per
/// stream.
fn run_child_until(dir: &std::path::Path, bytes: u64) -> BTreeMap<u64, u64> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_commits_from_several_threads_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SESSIONLOG_KILL_CHILD_DIR", dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut acked = BTreeMap::new();
    let mut total = 0u64;
    let mut note = |line: &str, total: &mut u64| {
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().expect("a number"))
            .collect();
        if let [stream, seq, len] = fields[..] {
            let top = acked.entry(stream).or_insert(seq);
            *top = (*top).max(seq);
            *total += len;
        }
    };
    for line in lines.by_ref() {
        let line = line.expect("a line");
        if line.starts_with("ack ") {
            note(&line, &mut total);
            if total >= bytes {
                break;
            }
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // Acknowledgements printed before the kill count too.
    for line in lines.map_while(Result::ok) {
        if line.starts_with("ack ") && line.split_whitespace().count() == 4 {
            note(&line, &mut total);
        }
    }
    assert!(
        total >= bytes,
        "the child acknowledged {total} bytes before it stopped"
    );
    acked
}

/// Every stream of `log`, read whole: name -> payloads in seq order.
fn read_all(log: &Log) -> BTreeMap<String, Vec<Vec<u8>>> {
    log.streams()
        .into_iter()
        .map(|info| {
            let records: Vec<Vec<u8>> = log
                .iter(info.id, Seq(0), Seq(u64::MAX))
                .enumerate()
                .map(|(i, r)| {
                    let r = r.expect("record");
                    assert_eq!(r.seq.0, i as u64, "{} has a gap", info.name);
                    r.payload.to_vec()
                })
                .collect();
            assert_eq!(records.len() as u64, info.next_seq.0);
            (info.name, records)
        })
        .collect()
}

#[test]
fn every_acknowledged_commit_survives_a_kill_of_a_writer_with_a_large_active_segment() {
    let mut x = 0x5EED_5CA1u64;
    for kill in 0..KILLS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = (6 << 20) + x % (14 << 20);
        let dir = tempfile::tempdir().expect("tempdir");
        let acked = run_child_until(dir.path(), bytes);

        let reader = Log::open_read_only(dir.path(), options())
            .expect("a read-only open of the killed store");
        let seen = read_all(&reader);
        let log = Log::open(dir.path(), options()).expect("open after the kill");
        assert!(!log.recovery_report().clean_close);
        let found = read_all(&log);
        assert_eq!(
            seen.keys().collect::<Vec<_>>(),
            found.keys().collect::<Vec<_>>(),
            "kill {kill}: the read-only open saw other streams"
        );
        for (t, &top) in &acked {
            let name = format!("s{t}");
            let records = &found[&name];
            assert!(
                records.len() as u64 > top,
                "kill {kill}: {name} lost acknowledged seq {top} (found {})",
                records.len()
            );
            for (seq, p) in records.iter().enumerate() {
                assert_eq!(p, &payload(*t, seq as u64), "kill {kill}: {name} seq {seq}");
            }
            // A read-only open recovers the same records (the copy it scans holds the
            // reserved rest of the segment as zeros, so it is scanned in parts too).
            assert_eq!(seen[&name], *records, "kill {kill}: {name} read-only");
        }
        drop(reader);
        drop(log);
    }
}
