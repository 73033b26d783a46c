//! A read-only open reads a cleanly closed active segment in place, up to the data its
//! clean-close file describes. A clean-close file that describes less than the segment
//! holds (left behind from an earlier close) must not make it read less: it sees every
//! record, exactly.

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

fn clean_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "clean"))
        .collect()
}

#[test]
fn a_stale_clean_close_file_never_hides_records_from_a_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = LogOptions::default().with_segment_size_bytes(1 << 20);
    let payload = |i: u64| format!("record {i}").into_bytes();

    let log = Log::open(dir.path(), options.clone()).expect("open");
    let s = log.create_stream("s").expect("stream");
    for i in 0..10 {
        log.commit(&[Append::new(s, 1, &payload(i))], Durability::Sync)
            .expect("commit");
    }
    log.close().expect("close");
    let clean = clean_files(dir.path());
    assert_eq!(clean.len(), 1, "a clean close writes its file");
    let stale = std::fs::read(&clean[0]).expect("read clean file");

    // After a clean close the described data is read in place, and it is all there.
    let reader = Log::open_read_only(dir.path(), options.clone()).expect("read-only");
    let id = reader.stream_id("s").expect("stream");
    assert_eq!(reader.stream_info(id).expect("info").next_seq, Seq(10));
    reader.close().expect("close reader");

    let log = Log::open(dir.path(), options.clone()).expect("reopen");
    for i in 10..5000 {
        log.commit(&[Append::new(s, 1, &payload(i))], Durability::Buffered)
            .expect("commit");
    }
    log.flush().expect("flush");
    // Dropping the log writes a fresh clean-close file; the stale one replaces it.
    drop(log);
    for f in clean_files(dir.path()) {
        std::fs::remove_file(f).expect("remove");
    }
    std::fs::write(&clean[0], &stale).expect("put the stale file back");

    let reader = Log::open_read_only(dir.path(), options).expect("read-only");
    let id = reader.stream_id("s").expect("stream");
    assert_eq!(reader.stream_info(id).expect("info").next_seq, Seq(5000));
    for (i, r) in reader.iter(id, Seq(0), Seq(5000)).enumerate() {
        assert_eq!(&r.expect("read").payload[..], &payload(i as u64)[..]);
    }
    assert!(reader.recovery_report().actions().is_empty());
}
