//! Reads: warm point reads (`read(stream, seq)`) from sealed segments (mapped) and from the
//! active segment (`pread`), reads of each stream's newest records (what a reader following
//! a writer does), and range scans over one stream.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::json;
use sessionlog_benches::{
    fresh_dir, human_ns, ns, payload, point_read_latencies, probe, write_json, Calls, Percentiles,
    Probe, Rng, SAMPLE_SIZE,
};
use sessionlog_log::{Append, Durability, Log, LogOptions, Seq, StreamId};

const STREAMS: usize = 64;
const RECORD_BYTES: usize = 1024;
/// About 2.4 segments of 64 MiB: two sealed ones and a partly filled active one.
const RECORDS: usize = 150_000;
const KEYS: usize = 10_000;
const TIMED_READS: usize = 50_000;
/// Records a tail read takes: the newest of one stream, as a reader catching up with a
/// writer after each commit reads them.
const TAIL_RECORDS: u64 = 4;

struct Store {
    log: Log,
    streams: Vec<StreamId>,
    sealed: Vec<(StreamId, Seq)>,
    active: Vec<(StreamId, Seq)>,
}

fn build() -> Store {
    let dir = fresh_dir("read");
    let log = Log::open(&dir, LogOptions::default()).expect("open");
    let streams: Vec<StreamId> = (0..STREAMS)
        .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
        .collect();
    let data: Vec<Vec<u8>> = (0..16).map(|i| payload(100 + i, RECORD_BYTES)).collect();
    let mut located = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let s = streams[i % STREAMS];
        let r = log
            .commit(
                &[Append::new(s, 1, &data[i % data.len()])],
                Durability::Buffered,
            )
            .expect("commit");
        located.push((s, r.seqs[0], r.lsn.segment()));
    }
    log.flush().expect("flush");
    let last = located.last().expect("records").2;
    let mut rng = Rng::new(7);
    let mut pick = |want_active: bool| -> Vec<(StreamId, Seq)> {
        let pool: Vec<(StreamId, Seq)> = located
            .iter()
            .filter(|l| (l.2 == last) == want_active)
            .map(|l| (l.0, l.1))
            .collect();
        (0..KEYS)
            .map(|_| pool[(rng.next_u64() % pool.len() as u64) as usize])
            .collect()
    };
    let sealed = pick(false);
    let active = pick(true);
    Store {
        log,
        streams,
        sealed,
        active,
    }
}

/// Latencies of reading the [`TAIL_RECORDS`] records ending at each stream's `newest` in
/// turn, as one iteration each.
fn tail_read_latencies(log: &Log, newest: &[(StreamId, Seq)], reads: usize) -> Percentiles {
    let mut lat = Vec::with_capacity(reads);
    for i in 0..reads {
        let (stream, last) = newest[i % newest.len()];
        let t = Instant::now();
        let mut n = 0;
        for r in log.iter(stream, Seq(last.0 + 1 - TAIL_RECORDS), Seq(last.0 + 1)) {
            std::hint::black_box(r.expect("tail read"));
            n += 1;
        }
        let e = t.elapsed();
        assert_eq!(
            n, TAIL_RECORDS,
            "a tail read returns every record asked for"
        );
        lat.push(ns(e));
    }
    Percentiles::of(&mut lat)
}

fn timer_overhead_ns() -> u64 {
    let mut lat: Vec<u64> = (0..10_000)
        .map(|_| {
            let t = Instant::now();
            ns(t.elapsed())
        })
        .collect();
    Percentiles::of(&mut lat).p50_ns
}

fn bench(c: &mut Criterion, probe: &Probe) {
    let store = build();
    let log = &store.log;
    let stats = log.stats();
    println!(
        "read store: {} streams, {} records of {RECORD_BYTES} B, {} segments, {} sealed keys, \
         {} active keys",
        STREAMS,
        stats.records,
        stats.segments,
        store.sealed.len(),
        store.active.len()
    );

    let mut group = c.benchmark_group("read_point_warm");
    group.throughput(Throughput::Elements(1));
    for (name, keys) in [("sealed", &store.sealed), ("active", &store.active)] {
        for &(s, q) in keys.iter() {
            log.read(s, q).expect("warm");
        }
        let mut next = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                let (s, q) = keys[next % keys.len()];
                next += 1;
                log.read(s, q).expect("read")
            })
        });
    }
    group.finish();

    let overhead = timer_overhead_ns();
    let sealed_p = point_read_latencies(log, &store.sealed, TIMED_READS);
    let active_p = point_read_latencies(log, &store.active, TIMED_READS);
    let newest: Vec<(StreamId, Seq)> = store
        .streams
        .iter()
        .map(|&s| (s, Seq(log.stream_info(s).expect("stream").next_seq.0 - 1)))
        .collect();
    let newest_p = point_read_latencies(log, &newest, TIMED_READS);
    let tail_p = tail_read_latencies(log, &newest, TIMED_READS);
    let floor = probe.fsync_p50_ns() as f64;
    for (name, p) in [("sealed", &sealed_p), ("active", &active_p)] {
        println!(
            "point read warm {name}: p50 {} p99 {} (timer overhead ~{overhead} ns included; \
             p50 = {:.5}x fdatasync p50); target p50 <= 2 µs: {}",
            human_ns(p.p50_ns),
            human_ns(p.p99_ns),
            p.p50_ns as f64 / floor,
            if p.p50_ns <= 2000 {
                "reached"
            } else {
                "not reached"
            }
        );
    }
    println!(
        "newest record of each stream (active): p50 {} p99 {}; newest {TAIL_RECORDS} records \
         as one iteration: p50 {} p99 {}",
        human_ns(newest_p.p50_ns),
        human_ns(newest_p.p99_ns),
        human_ns(tail_p.p50_ns),
        human_ns(tail_p.p99_ns),
    );

    let mut group = c.benchmark_group("read_range_scan");
    let per_stream = stats.records / STREAMS as u64;
    group.throughput(Throughput::Elements(per_stream));
    let mut calls = Calls::default();
    let mut which = 0usize;
    group.bench_function(format!("whole_stream_{per_stream}_records"), |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            let mut n = 0u64;
            for _ in 0..iters {
                let s = store.streams[which % STREAMS];
                which += 1;
                for r in log.iter(s, Seq(0), Seq(per_stream)) {
                    std::hint::black_box(r.expect("scan"));
                    n += 1;
                }
            }
            let e = t.elapsed();
            calls.push(n, e);
            e
        })
    });
    group.finish();
    let scan_rate = calls.rate_last(SAMPLE_SIZE);
    let scan_mb_s = scan_rate * RECORD_BYTES as f64 / 1e6;
    println!(
        "range scan: {scan_rate:.0} records/s, {scan_mb_s:.1} MB/s of payload ({:.1}x the \
         sequential durable bandwidth)",
        scan_mb_s / probe.seq_durable_mb_s
    );

    write_json(
        "read.json",
        &json!({
            "probe": probe,
            "store": { "streams": STREAMS, "records": stats.records, "record_bytes": RECORD_BYTES,
                       "segments": stats.segments },
            "timer_overhead_ns": overhead,
            "point_read_sealed": sealed_p,
            "point_read_active": active_p,
            "point_read_newest": newest_p,
            "tail_read_records": TAIL_RECORDS,
            "tail_read": tail_p,
            "point_read_target_p50_ns": 2000,
            "point_read_sealed_reached": sealed_p.p50_ns <= 2000,
            "point_read_active_reached": active_p.p50_ns <= 2000,
            "range_scan_records_per_s": scan_rate,
            "range_scan_payload_mb_s": scan_mb_s,
        }),
    );
    let dir = log.dir().to_owned();
    store.log.close().expect("close");
    let _ = std::fs::remove_dir_all(dir);
}

fn main() {
    let probe = probe();
    let mut c = Criterion::default()
        .sample_size(SAMPLE_SIZE)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench(&mut c, &probe);
    c.final_summary();
}
