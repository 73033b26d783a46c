//! Real crashes: `sessionlog log append --durability sync` is killed with SIGKILL at random
//! moments, over and over on the same store; after every kill the store reopens and every
//! record whose commit was acknowledged on stdout is there, byte for byte, in a gap-free
//! stream, and nothing appears that was never sent.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sessionlog_log::{Log, LogOptions, Seq};

const KILLS: usize = 50;

fn line(seq: u64) -> String {
    format!("record {seq} {}", "p".repeat((seq % 97) as usize))
}

#[test]
fn acknowledged_records_survive_sigkill() {
    let seed: u64 = std::env::var("SESSIONLOG_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0001);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let mut acked_total = 0u64;
    let mut next = 0u64; // seq the next line sent will get
    for round in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sessionlog"))
            .args(["log", "append", "--store"])
            .arg(&store)
            .args(["--stream", "killed", "--durability", "sync"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sessionlog");
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel::<u64>();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                let v: serde_json::Value = serde_json::from_str(&l).expect("ack is JSON");
                assert_eq!(v["stream"], "killed");
                if tx.send(v["seq"].as_u64().expect("seq")).is_err() {
                    break;
                }
            }
        });
        let first = next;
        let writer = std::thread::spawn(move || {
            let mut seq = first;
            loop {
                if writeln!(stdin, "{}", line(seq)).is_err() {
                    break;
                }
                seq += 1;
                if seq - first > 20_000 {
                    break;
                }
            }
        });
        // Kill at a random moment once appending is under way (opening the store, which
        // the first acknowledgement follows, takes a variable time).
        let first_ack = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the first record is acknowledged");
        let kill_after = Duration::from_micros(rng.gen_range(0..30_000));
        let started = Instant::now();
        std::thread::sleep(kill_after);
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let _ = writer.join();
        let _ = reader.join();
        let acks: Vec<u64> = std::iter::once(first_ack).chain(rx.try_iter()).collect();
        for (i, &a) in acks.iter().enumerate() {
            assert_eq!(
                a,
                first + i as u64,
                "round {round}: acknowledgements come in seq order (seed {seed})"
            );
        }
        acked_total += acks.len() as u64;
        let log = Log::open(&store, LogOptions::default()).unwrap_or_else(|e| {
            panic!("round {round}: reopen after SIGKILL failed: {e} (seed {seed})")
        });
        let n = match log.stream_id(&format!("{}killed", sessionlog::RAW_STREAM_PREFIX)) {
            Some(id) => {
                let n = log.stream_info(id).expect("info").next_seq.0;
                let acked_end = first + acks.len() as u64;
                assert!(n >= acked_end, "round {round}: {n} records, but {acked_end} were acknowledged (seed {seed}, killed after {:?})", started.elapsed());
                for (i, r) in log.iter(id, Seq(0), Seq(n)).enumerate() {
                    let r = r.unwrap_or_else(|e| panic!("round {round}: read {i}: {e}"));
                    assert_eq!(r.seq.0, i as u64);
                    assert_eq!(
                        &r.payload[..],
                        line(i as u64).as_bytes(),
                        "round {round}: seq {i} holds what was sent (seed {seed})"
                    );
                }
                n
            }
            None => {
                assert_eq!(
                    first + acks.len() as u64,
                    0,
                    "round {round}: acknowledged records but no stream"
                );
                0
            }
        };
        log.close().expect("close");
        next = n;
    }
    assert!(
        acked_total > KILLS as u64,
        "the kills must land while records are being acknowledged: only {acked_total} acks"
    );
}
