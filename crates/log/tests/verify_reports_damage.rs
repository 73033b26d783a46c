//! `verify_store` finds every damaged place and nothing in an intact store; `open` cuts a torn
//! tail and refuses damage in sealed data.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use sessionlog_log::{
    verify_store, Append, Durability, Error, Log, LogOptions, RealStorage, RecoveryMode, Seq,
};

fn opts() -> LogOptions {
    LogOptions::default()
        .with_segment_size_bytes(64 << 10)
        .with_preallocate(false)
}

fn build(dir: &Path) -> u64 {
    let log = Log::open(dir, opts()).expect("open");
    let a = log.create_stream("a").expect("a");
    let b = log.create_stream("b").expect("b");
    let mut n = 0;
    for i in 0..300u32 {
        let p = format!("record {i} {}", "x".repeat((i % 300) as usize));
        log.commit(
            &[Append::new(if i % 2 == 0 { a } else { b }, 1, p.as_bytes())],
            Durability::Buffered,
        )
        .expect("commit");
        n += 1;
    }
    log.close().expect("close");
    n
}

fn seg(dir: &Path, id: u64) -> std::path::PathBuf {
    dir.join(format!("{id:020}.seg"))
}

fn flip(path: &Path, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open seg");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read");
    b[0] ^= 0x10;
    f.write_all_at(&b, offset).expect("write");
}

#[test]
fn an_intact_store_verifies_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = build(dir.path());
    let report = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(report.is_intact(), "{:?}", report.damages);
    assert!(report.segments.len() > 1);
    let records: u64 = report.segments.iter().map(|s| s.records).sum();
    // One catalog checkpoint starts each segment a roll started.
    let checkpoints = report.segments.len() as u64 - 1;
    assert_eq!(
        records,
        n + 2 + checkpoints,
        "every record, both catalog records and the checkpoints"
    );
    assert!(report
        .segments
        .iter()
        .filter(|s| s.sealed)
        .all(|s| s.index_entries_checked > 0));
}

#[test]
fn a_flipped_bit_in_sealed_data_is_reported_and_refused_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    flip(&seg(dir.path(), 1), 306); // inside the payload of stream a, seq 0
    let report = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(
        report
            .damages
            .iter()
            .any(|d| d.segment.0 == 1 && d.offset <= 306),
        "{:?}",
        report.damages
    );
    // The footer still verifies, so open trusts it; the damaged record is refused when read.
    let log = Log::open(dir.path(), opts()).expect("open uses the footer");
    let a = log.stream_id("a").expect("a");
    let results: Vec<_> = log.iter(a, Seq(0), Seq(150)).collect();
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(Error::Corrupted { .. }))),
        "damaged record must not be returned"
    );
}

#[test]
fn a_damaged_footer_is_rebuilt_from_the_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    let path = seg(dir.path(), 1);
    let len = std::fs::metadata(&path).expect("meta").len();
    flip(&path, len - 40);
    let log = Log::open(dir.path(), opts()).expect("open rebuilds");
    assert_eq!(log.recovery_report().footers_rebuilt.len(), 1);
    let a = log.stream_id("a").expect("a");
    assert_eq!(
        log.iter(a, Seq(0), Seq(150)).filter(|r| r.is_ok()).count(),
        150
    );
    drop(log);
    let report = verify_store(Arc::new(RealStorage), dir.path()).expect("verify");
    assert!(report.is_intact(), "{:?}", report.damages);
}

#[test]
fn garbage_after_the_last_batch_is_cut_as_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = build(dir.path());
    let last = (1..)
        .take_while(|i| seg(dir.path(), *i).exists())
        .last()
        .expect("segments");
    let path = seg(dir.path(), last);
    let len = std::fs::metadata(&path).expect("meta").len();
    let f = OpenOptions::new().write(true).open(&path).expect("open");
    f.write_all_at(&[0xEE; 100], len).expect("append garbage");
    drop(f);
    let strict = opts().with_recovery_mode(RecoveryMode::AbsoluteConsistency);
    assert!(matches!(
        Log::open(dir.path(), strict),
        Err(Error::Corrupted { .. })
    ));
    let log = Log::open(dir.path(), opts()).expect("open");
    let cut = log.recovery_report().tail_cut.clone().expect("a cut");
    assert_eq!(cut.offset, len);
    assert_eq!(cut.nonzero_bytes, 100);
    let total: u64 = log.streams().iter().map(|s| s.next_seq.0).sum();
    assert_eq!(total, n);
}
