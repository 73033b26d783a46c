//! A writer appends durably and rolls to new segments while read-only logs are opened
//! beside it over and over: each sees every record acknowledged before it opened, exactly
//! as written, as a gap-free prefix; it refuses writes; and it never changes a file.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq};

fn payload(seq: u64) -> Vec<u8> {
    format!("record {seq} {}", "x".repeat((seq % 300) as usize)).into_bytes()
}

#[test]
fn a_read_only_log_beside_a_rolling_writer_reads_an_acknowledged_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = LogOptions::default().with_segment_size_bytes(64 << 10);
    let log = Log::open(dir.path(), options.clone()).expect("open");
    let s = log.create_stream("s").expect("stream");
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, acked, stop) = (log.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::SeqCst) && seq < 20_000 {
                log.commit(&[Append::new(s, 1, &payload(seq))], Durability::Sync)
                    .expect("commit");
                seq += 1;
                acked.store(seq, Ordering::SeqCst);
            }
        })
    };
    let mut opens = 0;
    let mut max_segments = 0;
    while opens < 40 || max_segments < 3 {
        let before = acked.load(Ordering::SeqCst);
        let reader = Log::open_read_only(dir.path(), options.clone()).expect("read-only open");
        assert!(reader.is_read_only());
        let Some(id) = reader.stream_id("s") else {
            assert_eq!(before, 0);
            continue;
        };
        let n = reader.stream_info(id).expect("info").next_seq.0;
        assert!(
            n >= before,
            "saw {n} records, {before} were acknowledged before the open"
        );
        for (i, r) in reader.iter(id, Seq(0), Seq(n)).enumerate() {
            let r = r.expect("read");
            assert_eq!(r.seq, Seq(i as u64));
            assert_eq!(&r.payload[..], &payload(i as u64)[..], "record {i} differs");
        }
        assert!(matches!(
            reader.commit(&[Append::new(id, 1, b"no")], Durability::Sync),
            Err(Error::ReadOnly { .. })
        ));
        assert!(matches!(
            reader.create_stream("t"),
            Err(Error::ReadOnly { .. })
        ));
        max_segments = max_segments.max(reader.stats().segments);
        reader.close().expect("close a read-only log");
        opens += 1;
        // Bounded by the writer's work, not by a count of opens: on a slow disk 2,000 opens
        // could pass before the writer had rolled twice.
        if writer.is_finished() {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("writer");
    assert!(max_segments >= 3, "the writer never rolled under a reader");
    let clean: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".clean"))
        .collect();
    assert!(clean.is_empty(), "a read-only close wrote {clean:?}");
    log.close().expect("close");
}
