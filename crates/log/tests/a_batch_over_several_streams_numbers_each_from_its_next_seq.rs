//! One batch may hold records of several streams, interleaved: each record gets the next seq
//! of its own stream, whichever stream came first in the batch, and a batch that names an
//! unknown stream or a stale seq anywhere in it is refused whole.

use sessionlog_log::{Append, Durability, Error, Log, LogOptions, Seq, StreamId};

fn open(dir: &std::path::Path) -> Log {
    Log::open(dir, LogOptions::default().with_preallocate(false)).expect("open")
}

/// Every record of `stream`, as (seq, payload).
fn records(log: &Log, stream: StreamId) -> Vec<(u64, Vec<u8>)> {
    let next = log.stream_info(stream).expect("stream").next_seq;
    log.iter(stream, Seq(0), next)
        .map(|r| {
            let r = r.expect("record");
            (r.seq.0, r.payload.to_vec())
        })
        .collect()
}

#[test]
fn interleaved_streams_take_their_own_next_seqs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    let [a, b, c] = ["a", "b", "c"].map(|n| log.create_stream(n).expect("create"));
    // Streams start at different seqs: a at 2, b at 1, c at 0.
    for (stream, n) in [(a, 2), (b, 1)] {
        for _ in 0..n {
            log.commit(&[Append::new(stream, 1, b"before")], Durability::Buffered)
                .expect("commit");
        }
    }
    let order = [b, a, b, c, a, a, c, b];
    let payloads: Vec<Vec<u8>> = (0..order.len())
        .map(|i| format!("p{i}").into_bytes())
        .collect();
    let batch: Vec<Append<'_>> = order
        .iter()
        .zip(&payloads)
        .map(|(&s, p)| Append::new(s, 1, p))
        .collect();
    let receipt = log.commit(&batch, Durability::Sync).expect("commit");
    let seqs: Vec<u64> = receipt.seqs.iter().map(|s| s.0).collect();
    assert_eq!(seqs, [1, 2, 2, 0, 3, 4, 1, 3]);
    for (stream, want) in [
        (a, vec![(2, "p1"), (3, "p4"), (4, "p5")]),
        (b, vec![(1, "p0"), (2, "p2"), (3, "p7")]),
        (c, vec![(0, "p3"), (1, "p6")]),
    ] {
        let got: Vec<(u64, Vec<u8>)> = records(&log, stream)
            .into_iter()
            .filter(|(_, p)| p != b"before")
            .collect();
        let want: Vec<(u64, Vec<u8>)> = want
            .into_iter()
            .map(|(s, p)| (s, p.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn an_unknown_stream_or_a_stale_seq_anywhere_refuses_the_whole_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    let [a, b] = ["a", "b"].map(|n| log.create_stream(n).expect("create"));
    let gone = log.create_stream("gone").expect("create");
    log.delete_stream(gone, Durability::Buffered)
        .expect("delete");
    let expecting = |stream, seq| Append {
        expected_seq: Some(Seq(seq)),
        ..Append::new(stream, 1, b"x")
    };
    let refused: [(&str, Vec<Append<'_>>); 5] = [
        (
            "unknown first",
            vec![Append::new(gone, 1, b"x"), Append::new(a, 1, b"x")],
        ),
        (
            "unknown second",
            vec![Append::new(a, 1, b"x"), Append::new(gone, 1, b"x")],
        ),
        (
            "unknown third",
            vec![
                Append::new(a, 1, b"x"),
                Append::new(b, 1, b"x"),
                Append::new(gone, 1, b"x"),
            ],
        ),
        // b's record would get seq 0, not 1.
        (
            "stale seq of the second stream",
            vec![expecting(a, 0), expecting(b, 1)],
        ),
        // a's second record would get seq 1, not 0.
        (
            "stale seq of the first stream, after another stream",
            vec![expecting(a, 0), expecting(b, 0), expecting(a, 0)],
        ),
    ];
    for (case, batch) in refused {
        let result = log.commit(&batch, Durability::Buffered);
        assert!(
            matches!(
                result,
                Err(Error::UnknownStream(_) | Error::SeqMismatch { .. })
            ),
            "{case}: {result:?}"
        );
        for stream in [a, b] {
            assert_eq!(
                log.stream_info(stream).expect("stream").next_seq,
                Seq(0),
                "{case}: nothing of the batch was written"
            );
        }
    }
    let receipt = log
        .commit(
            &[expecting(a, 0), expecting(b, 0), expecting(a, 1)],
            Durability::Buffered,
        )
        .expect("the same seqs, right this time");
    assert_eq!(receipt.seqs, [Seq(0), Seq(0), Seq(1)]);
}
