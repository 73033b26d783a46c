//! Raw bytes as the whole (active) segment file of a store, opened with `Log::open_with` on
//! simulated storage. Recovery must return a log holding a valid prefix or a typed error,
//! never panic. A log that opens must read back consistently (every read path agrees), and
//! opening it again must recover exactly the same contents (recovery is idempotent).
//!
//! The first input byte picks fix-ups so the fuzzer gets past the checksums: bit 0 writes a
//! valid segment header, bit 1 fixes the checksums of the batches laid end to end after it.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sessionlog_format::{segment_file_name, SegmentHeader};
use sessionlog_fuzz::{fix_all_batches, fix_segment_header};
use sessionlog_log::{Error, Log, LogOptions, RecoveryMode, Seq};
use sessionlog_testkit::SimStorage;

/// Every record of every stream, in order. A sealed segment is used through its footer, so
/// damage in its batches shows only when read: such a read must fail as corruption (it may
/// never return other bytes, nor any other error).
fn read_everything(log: &Log) -> Vec<(String, Vec<Result<(u64, Vec<u8>), String>>)> {
    let mut out = Vec::new();
    for info in log.streams() {
        let mut records = Vec::new();
        for item in log.iter(info.id, Seq(0), Seq(u64::MAX)) {
            match item {
                Ok(r) => {
                    assert_eq!(r.stream, info.id, "iteration crossed into another stream");
                    records.push(Ok((r.seq.0, r.payload.to_vec())));
                }
                Err(e @ Error::Corrupted { .. }) => {
                    records.push(Err(e.to_string()));
                    break;
                }
                Err(e) => panic!("reading {:?} failed with {e:?}", info.name),
            }
        }
        if records.iter().all(Result::is_ok) {
            assert_eq!(records.len() as u64, info.next_seq.0, "{:?}", info.name);
            for (i, r) in records.iter().enumerate() {
                assert_eq!(r.as_ref().map(|r| r.0), Ok(i as u64), "seqs have a gap");
            }
        }
        out.push((info.name, records));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let mut seg = bytes.to_vec();
    // The file is named after the segment its header claims (small numbers only), so golden
    // segments of any number make useful seeds.
    let segment_id = SegmentHeader::decode(&seg)
        .ok()
        .map(|h| h.segment_id)
        .filter(|id| (1..1 << 16).contains(id))
        .unwrap_or(1);
    if mode & 1 != 0 {
        fix_segment_header(&mut seg, segment_id);
    }
    if mode & 2 != 0 {
        fix_all_batches(&mut seg, segment_id);
    }
    let recovery_mode = if mode & 4 != 0 {
        RecoveryMode::AbsoluteConsistency
    } else {
        RecoveryMode::TolerateTornTail
    };
    let options = LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_index_interval_bytes(64)
        .with_preallocate(mode & 8 != 0)
        .with_recovery_mode(recovery_mode);
    let dir = Path::new("/store");
    let sim = SimStorage::new(u64::from(mode));
    sim.put_file(&dir.join(segment_file_name(segment_id)), seg);
    let first = match Log::open_with(sim.as_storage(), dir, options.clone()) {
        Ok(log) => log,
        Err(Error::Corrupted { .. }) | Err(Error::InvalidInput(_)) => return,
        Err(e) => panic!("recovery failed with an unexpected error: {e:?}"),
    };
    let recovered = read_everything(&first);
    drop(first);
    let again = Log::open_with(sim.as_storage(), dir, options)
        .unwrap_or_else(|e| panic!("a recovered store opens again: {e:?}"));
    let second = read_everything(&again);
    assert_eq!(recovered, second, "reopening changed what was recovered");
    assert!(
        again.recovery_report().tail_cut.is_none(),
        "the second open cut a tail: {:?}",
        again.recovery_report().tail_cut
    );
});
