//! Buffered append: 200-byte records, one record per commit, one thread.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::json;
use sessionlog_benches::{fresh_dir, payload, probe, write_json, Calls, Probe, SAMPLE_SIZE};
use sessionlog_log::{Append, Durability, Log, LogOptions, StreamId};

const RECORD_BYTES: usize = 200;

fn bench(c: &mut Criterion, probe: &Probe) {
    let mut results = Vec::new();
    let mut group = c.benchmark_group("append_buffered");
    group.throughput(Throughput::Elements(1));
    for streams in [1usize, 1000] {
        let dir = fresh_dir(&format!("append-{streams}"));
        let log = Log::open(&dir, LogOptions::default()).expect("open");
        let ids: Vec<StreamId> = (0..streams)
            .map(|i| log.create_stream(&format!("s{i}")).expect("create"))
            .collect();
        let data = payload(1, RECORD_BYTES);
        let calls = RefCell::new(Calls::default());
        let mut next = 0usize;
        let name = format!("200B_1_per_commit/{streams}_streams");
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    let s = ids[next % ids.len()];
                    next += 1;
                    log.commit(&[Append::new(s, 1, &data)], Durability::Buffered)
                        .expect("commit");
                }
                let e = t.elapsed();
                calls.borrow_mut().push(iters, e);
                e
            })
        });
        log.flush().expect("flush");
        let stats = log.stats();
        log.close().expect("close");
        let _ = std::fs::remove_dir_all(&dir);
        if calls.borrow().is_empty() {
            continue; // filtered out on the command line
        }
        let rate = calls.borrow().rate_last(SAMPLE_SIZE);
        let disk_per_record = stats.bytes as f64 / stats.records.max(1) as f64;
        let equiv = probe.records_equivalent(disk_per_record);
        println!(
            "append {name}: {rate:.0} records/s ({:.2} MB/s payload); {disk_per_record:.0} B \
             on disk per record; = {:.1}% of the sequential durable bandwidth in records \
             ({equiv:.0} records/s); target >= 1,000,000 records/s: {}",
            rate * RECORD_BYTES as f64 / 1e6,
            100.0 * rate / equiv,
            if rate >= 1e6 {
                "reached"
            } else {
                "not reached"
            },
        );
        let cache_pct = 100.0 * rate * disk_per_record / (probe.page_cache_write_mb_s * 1e6);
        println!(
            "  = {cache_pct:.1}% of the buffered page-cache write bandwidth ({:.1} MB/s) in bytes",
            probe.page_cache_write_mb_s
        );
        results.push(json!({
            "name": name,
            "streams": streams,
            "record_bytes": RECORD_BYTES,
            "records_per_s": rate,
            "disk_bytes_per_record": disk_per_record,
            "pct_of_seq_durable_bandwidth_records": 100.0 * rate / equiv,
            "pct_of_page_cache_write_bandwidth": cache_pct,
            "target_records_per_s": 1_000_000,
            "reached": rate >= 1e6,
            "segments": stats.segments,
            "syncs": stats.syncs,
        }));
    }
    group.finish();
    write_json(
        "append.json",
        &json!({ "probe": probe, "results": results }),
    );
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
