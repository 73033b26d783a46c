//! A failed write or fsync leaves the disk in an unknown state, so the log must refuse every
//! later operation (and never retry the fsync, whose failure may have dropped the dirty pages)
//! until it is reopened; reopening recovers from what is durable.

use std::path::Path;

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq};
use sessionlog_testkit::{Fault, FaultError, OpKind, SimStorage};

fn options() -> LogOptions {
    LogOptions::default().with_segment_size_bytes(64 << 10)
}

fn open(sim: &SimStorage) -> Log {
    Log::open_with(sim.as_storage(), Path::new("/store"), options()).expect("open")
}

#[test]
fn failed_fsync_poisons_the_log_and_is_never_retried() {
    let sim = SimStorage::new(1);
    let log = open(&sim);
    let stream = log.create_stream("s").unwrap();
    log.commit(&[Append::new(stream, 1, b"durable")], Durability::Sync)
        .unwrap();

    sim.inject(Fault::on(OpKind::SyncData));
    let failed = log.commit(&[Append::new(stream, 1, b"unknown")], Durability::Sync);
    assert!(matches!(failed, Err(Error::Poisoned { .. })), "{failed:?}");
    let syncs_after_failure = sim.stats().file_syncs();

    let later = log.commit(&[Append::new(stream, 1, b"refused")], Durability::Sync);
    assert!(matches!(later, Err(Error::Poisoned { .. })), "{later:?}");
    let later = log.commit(&[Append::new(stream, 1, b"refused")], Durability::Buffered);
    assert!(matches!(later, Err(Error::Poisoned { .. })), "{later:?}");
    assert!(matches!(log.flush(), Err(Error::Poisoned { .. })));
    assert!(matches!(log.close(), Err(Error::Poisoned { .. })));
    assert_eq!(
        sim.stats().file_syncs(),
        syncs_after_failure,
        "the log retried an fsync after one failed"
    );

    let log = open(&sim);
    assert_eq!(&log.read(stream, Seq(0)).unwrap().payload[..], b"durable");
    let next = log.stream_info(stream).unwrap().next_seq;
    assert!(next == Seq(1) || next == Seq(2), "next seq {next}");
    log.commit(&[Append::new(stream, 1, b"after reopen")], Durability::Sync)
        .unwrap();
}

#[test]
fn full_disk_on_write_poisons_the_log_with_a_clear_error() {
    let sim = SimStorage::new(2);
    let log = open(&sim);
    let stream = log.create_stream("s").unwrap();
    sim.inject(
        Fault::on(OpKind::Write)
            .with_error(FaultError::NoSpace)
            .short_write(),
    );
    let failed = log.commit(&[Append::new(stream, 1, &[7; 3000])], Durability::Sync);
    let Err(error) = failed else {
        panic!("a commit whose write failed succeeded");
    };
    assert!(matches!(error, Error::Poisoned { .. }), "{error:?}");
    assert!(
        error.to_string().contains("No space left on device"),
        "the error does not say the disk is full: {error}"
    );
    assert!(matches!(
        log.commit(&[Append::new(stream, 1, b"x")], Durability::Sync),
        Err(Error::Poisoned { .. })
    ));
    drop(log);

    let log = open(&sim);
    let next = log.stream_info(stream).map(|info| info.next_seq);
    assert!(
        next.is_none() || next == Some(Seq(0)),
        "a torn, failed commit came back: {next:?}"
    );
}

#[test]
fn second_open_of_a_store_is_refused_until_the_first_is_dropped() {
    let sim = SimStorage::new(3);
    let first = open(&sim);
    let second = Log::open_with(sim.as_storage(), Path::new("/store"), options());
    assert!(matches!(second, Err(Error::Locked { .. })), "{second:?}");
    first.close().unwrap();
    open(&sim);
}
