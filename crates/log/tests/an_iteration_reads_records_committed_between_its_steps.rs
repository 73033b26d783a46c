//! An iteration over a stream of the active segment reads the records committed while it
//! is paused, whether they were written to the file (a synced commit) or are still in the
//! write buffer (a buffered one): the span of the file a window reads (and hands on to the
//! next window) never holds bytes the writer had not written yet, such as the zeros of the
//! segment's preallocated space.

use sessionlog_log::{Append, Durability, Log, LogOptions, Seq};

fn payload(seq: u64) -> Vec<u8> {
    format!("record {seq} ")
        .repeat(1 + (seq % 5) as usize)
        .into_bytes()
}

#[test]
fn an_iteration_reads_records_committed_between_its_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), LogOptions::default()).expect("open");
    let stream = log.create_stream("s").expect("create");
    let commit = |committed: &mut u64, n: u64, durability: Durability| {
        for _ in 0..n {
            let p = payload(*committed);
            let r = log
                .commit(&[Append::new(stream, 1, &p)], durability)
                .expect("commit");
            assert_eq!(r.seqs, vec![Seq(*committed)]);
            *committed += 1;
        }
    };
    let mut committed = 0u64;
    commit(&mut committed, 10, Durability::Sync);
    let mut iter = log.iter(stream, Seq(0), Seq(u64::MAX));
    let mut read = 0u64;
    // Rounds of synced commits (in the file past the span read before), buffered ones
    // (in the buffer), and enough records to take several windows.
    for (n, durability) in [
        (10, Durability::Sync),
        (3, Durability::Buffered),
        (400, Durability::Sync),
        (5, Durability::Buffered),
        (2, Durability::Sync),
    ] {
        for record in iter.by_ref() {
            let record = record.expect("record");
            assert_eq!(record.seq, Seq(read));
            assert_eq!(&record.payload[..], &payload(read)[..], "record {read}");
            read += 1;
        }
        assert_eq!(read, committed, "every committed record was read");
        commit(&mut committed, n, durability);
    }
    for record in iter {
        let record = record.expect("record");
        assert_eq!(&record.payload[..], &payload(read)[..], "record {read}");
        read += 1;
    }
    assert_eq!(read, committed);
    log.close().expect("close");
}
