//! A reader following a writer reads each stream's newest records after every commit. Such
//! a read is anchored at the stream's last record, and reads only a little past it: the
//! bytes after the last record are other streams' records or nothing written yet. A last
//! record longer than that read is read again by itself. Every record comes back whole,
//! whatever its size, whether it is in the file or still in the write buffer, and whatever
//! other streams wrote after it.

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq, StreamId};

/// Payload `seq` of stream `s`: from a few bytes to about 20 KiB, so that last records fall
/// short of the read past the anchor, cross it, and exceed the whole span read around it.
fn payload(s: usize, seq: u64) -> Vec<u8> {
    let sizes = [9usize, 700, 3_000, 4_100, 5_000, 13_000, 20_000, 64];
    let len = sizes[(seq as usize + s) % sizes.len()];
    let unit = format!("s{s}r{seq};");
    unit.repeat(len / unit.len() + 1).into_bytes()[..len].to_vec()
}

fn check_newest(log: &Log, streams: &[StreamId], next: &[u64]) {
    for (s, (&stream, &n)) in streams.iter().zip(next).enumerate() {
        if n == 0 {
            continue;
        }
        check_read(log, s, stream, n - 1, n.saturating_sub(5), n);
    }
}

/// Reads record `point` of stream `s` (`stream`) alone, then records `from..to` as one
/// iteration, and checks each against the payload written.
fn check_read(log: &Log, s: usize, stream: StreamId, point: u64, from: u64, to: u64) {
    let record = log.read(stream, Seq(point)).expect("point read");
    assert_eq!(record.seq, Seq(point));
    assert_eq!(
        &record.payload[..],
        &payload(s, point)[..],
        "stream {s} seq {point}"
    );
    let mut seq = from;
    for record in log.iter(stream, Seq(from), Seq(to)) {
        let record = record.expect("record");
        assert_eq!(record.seq, Seq(seq));
        assert_eq!(
            &record.payload[..],
            &payload(s, seq)[..],
            "stream {s} seq {seq}"
        );
        seq += 1;
    }
    assert_eq!(seq, to, "stream {s}: the iteration returned {from}..{to}");
}

/// A log in `dir` with `n` streams, `s0` to `s{n-1}`.
fn open_with_streams(dir: &std::path::Path, n: usize) -> (Log, Vec<StreamId>) {
    let log = Log::open(dir, LogOptions::default()).expect("open");
    let streams = (0..n)
        .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
        .collect();
    (log, streams)
}

/// Commits the next `count` records of stream `s` as one batch.
fn commit(
    log: &Log,
    streams: &[StreamId],
    next: &mut [u64],
    s: usize,
    count: u64,
    durability: Durability,
) {
    let payloads: Vec<Vec<u8>> = (0..count).map(|k| payload(s, next[s] + k)).collect();
    let batch: Vec<Append<'_>> = payloads
        .iter()
        .map(|p| Append::new(streams[s], 1, p))
        .collect();
    log.commit(&batch, durability).expect("commit");
    next[s] += count;
}

#[test]
fn a_reader_of_the_newest_records_gets_them_whole_whatever_their_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, streams) = open_with_streams(dir.path(), 3);
    let mut next = vec![0u64; streams.len()];
    for round in 0..240u64 {
        let s = (round * 7 % 3) as usize;
        // One stream commits one record or several; buffered commits stay in the buffer
        // until a synced one (or a full buffer) writes them.
        let durability = match round % 4 {
            0 => Durability::Buffered,
            _ => Durability::Sync,
        };
        commit(&log, &streams, &mut next, s, 1 + (round % 3), durability);
        check_newest(&log, &streams, &next);
    }
    log.close().expect("close");
    let log = Log::open(dir.path(), LogOptions::default()).expect("reopen");
    check_newest(&log, &streams, &next);
    log.close().expect("close");
}

/// A read anywhere in the active segment takes the stretch from the index entry before the
/// record wanted to its anchor as one span when it is short (a stream writing often, or in
/// batches), and else reads only at the records its walk reaches (a stream with other
/// streams' records far between its own). Point reads and iterations of every kind of
/// stream, at every place, return every record whole.
#[test]
fn reads_of_sparse_and_dense_streams_return_every_record_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, streams) = open_with_streams(dir.path(), 24);
    let mut next = vec![0u64; streams.len()];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..3_000u64 {
        // Stream 0 writes batches of many records (dense within the batch); streams 1 and 2
        // write most rounds (dense); the rest now and then (sparse).
        let s = match rand() % 10 {
            0 => 0,
            1..=5 => 1 + (round % 2) as usize,
            _ => 3 + (rand() % 21) as usize,
        };
        let count = if s == 0 { 20 } else { 1 + rand() % 2 };
        let durability = if round % 50 == 0 {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        commit(&log, &streams, &mut next, s, count, durability);
    }
    log.flush().expect("flush");
    assert_eq!(
        log.stats().segments,
        1,
        "every record is in the active segment"
    );
    for _ in 0..3_000 {
        let s = (rand() % streams.len() as u64) as usize;
        if next[s] == 0 {
            continue;
        }
        let seq = rand() % next[s];
        let to = (seq + 1 + rand() % 40).min(next[s]);
        check_read(&log, s, streams[s], seq, seq, to);
    }
    log.close().expect("close");
}
