//! The reference model, pinned down: which recovered logs it accepts and which it rejects.

use bytes::Bytes;

use crate::model::{LogSnapshot, ModelAppend, ModelRecord, ReferenceModel, Restart, Violation};

fn record(payload: &'static [u8]) -> ModelRecord {
    ModelRecord {
        kind: 1,
        flags: 0,
        payload: Bytes::from_static(payload),
    }
}

fn append(stream: &str, payload: &'static [u8]) -> ModelAppend {
    ModelAppend {
        stream: stream.to_owned(),
        record: record(payload),
    }
}

/// A snapshot with the given streams and payloads; stream "a" has id 1, "b" id 2, and so on.
fn snapshot(streams: &[(&str, &[&'static [u8]])]) -> LogSnapshot {
    let mut snap = LogSnapshot::default();
    for (name, payloads) in streams {
        let stream = snap.streams.entry((*name).to_owned()).or_default();
        stream.id = u64::from(name.as_bytes()[0] - b'a') + 1;
        stream.records = payloads
            .iter()
            .enumerate()
            .map(|(seq, p)| (seq as u64, record(p)))
            .collect();
    }
    snap
}

/// Stream "a" (id 1) created durably, then a durable commit of "x" and a buffered one of "y".
fn model_with_durable_and_buffered() -> ReferenceModel {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model
        .committed(&[append("a", b"x")], true, 10, &[0])
        .unwrap();
    model
        .committed(&[append("a", b"y")], false, 20, &[1])
        .unwrap();
    model
}

#[test]
fn buffered_commit_may_survive_or_vanish() {
    let mut lost = model_with_durable_and_buffered();
    let summary = lost
        .check_recovered(&snapshot(&[("a", &[b"x"])]), Restart::PowerLoss)
        .unwrap();
    assert_eq!((summary.kept, summary.lost), (2, 1));
    assert_eq!(lost.next_seq("a"), 1);

    let mut kept = model_with_durable_and_buffered();
    let summary = kept
        .check_recovered(&snapshot(&[("a", &[b"x", b"y"])]), Restart::PowerLoss)
        .unwrap();
    assert_eq!((summary.kept, summary.kept_beyond_durable), (3, 1));
}

#[test]
fn missing_durable_commit_is_a_violation() {
    let mut model = model_with_durable_and_buffered();
    let err = model
        .check_recovered(&snapshot(&[("a", &[])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 1, .. }), "{err}");
}

#[test]
fn a_durable_commit_makes_earlier_buffered_ones_durable() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, false);
    model
        .committed(&[append("a", b"x")], false, 10, &[0])
        .unwrap();
    model
        .committed(&[append("a", b"y")], true, 20, &[1])
        .unwrap();
    let err = model
        .check_recovered(&LogSnapshot::default(), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 0, .. }), "{err}");
}

#[test]
fn flush_makes_everything_acknowledged_durable() {
    let mut model = model_with_durable_and_buffered();
    model.flushed();
    let err = model
        .check_recovered(&snapshot(&[("a", &[b"x"])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 2, .. }), "{err}");
}

#[test]
fn half_a_batch_is_a_violation() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model.stream_created("b", 2, true);
    model
        .committed(&[append("a", b"1"), append("b", b"2")], false, 10, &[0, 0])
        .unwrap();
    let err = model
        .check_recovered(&snapshot(&[("a", &[b"1"]), ("b", &[])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::TornBatch { op: 2, .. }), "{err}");
}

#[test]
fn survivors_must_be_a_prefix_in_log_order() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model.stream_created("b", 2, true);
    model
        .committed(&[append("a", b"1")], false, 10, &[0])
        .unwrap();
    model
        .committed(&[append("b", b"2")], false, 20, &[0])
        .unwrap();
    let err = model
        .check_recovered(&snapshot(&[("a", &[]), ("b", &[b"2"])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Violation::NotAPrefix {
                absent: 2,
                present: 3,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn unknown_stream_is_foreign() {
    let mut model = model_with_durable_and_buffered();
    let err = model
        .check_recovered(
            &snapshot(&[("a", &[b"x"]), ("zzz", &[])]),
            Restart::PowerLoss,
        )
        .unwrap_err();
    assert_eq!(err, Violation::ForeignStream { name: "zzz".into() });
}

#[test]
fn stream_created_after_a_lost_creation_breaks_the_prefix() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, false);
    model.stream_created("b", 2, false);
    let err = model
        .check_recovered(&snapshot(&[("b", &[])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::NotAPrefix { .. }), "{err}");
}

#[test]
fn extra_or_changed_records_are_violations() {
    let mut changed = model_with_durable_and_buffered();
    let err = changed
        .check_recovered(&snapshot(&[("a", &[b"x", b"z"])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::WrongRecords { .. }), "{err}");

    let mut extra = model_with_durable_and_buffered();
    let err = extra
        .check_recovered(
            &snapshot(&[("a", &[b"x", b"y", b"stale"])]),
            Restart::PowerLoss,
        )
        .unwrap_err();
    assert!(matches!(err, Violation::WrongRecords { .. }), "{err}");
}

#[test]
fn a_gap_in_seqs_is_a_violation() {
    let mut model = model_with_durable_and_buffered();
    let mut snap = snapshot(&[("a", &[b"x", b"y"])]);
    snap.streams.get_mut("a").unwrap().records[1].0 = 2;
    let err = model
        .check_recovered(&snap, Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::WrongRecords { .. }), "{err}");
}

#[test]
fn failed_commit_may_be_present_or_absent_and_resolves() {
    for survived in [false, true] {
        let mut model = model_with_durable_and_buffered();
        model.commit_failed(&[append("a", b"f")]);
        assert!(model.has_uncertain());
        let payloads: &[&'static [u8]] = if survived {
            &[b"x", b"y", b"f"]
        } else {
            &[b"x", b"y"]
        };
        model
            .check_recovered(&snapshot(&[("a", payloads)]), Restart::Process)
            .unwrap();
        assert!(!model.has_uncertain());
        assert_eq!(model.records("a").len(), payloads.len());
    }
}

#[test]
fn receipts_must_carry_the_expected_seqs_and_increasing_lsns() {
    let mut model = model_with_durable_and_buffered();
    let err = model
        .committed(&[append("a", b"z")], true, 30, &[5])
        .unwrap_err();
    assert!(matches!(err, Violation::WrongReceipt { .. }));
    let err = model
        .committed(&[append("a", b"z")], true, 20, &[2])
        .unwrap_err();
    assert!(matches!(err, Violation::WrongReceipt { .. }));
    model
        .committed(&[append("a", b"z")], true, 30, &[2])
        .unwrap();
}

#[test]
fn live_check_requires_every_acknowledged_commit() {
    let model = model_with_durable_and_buffered();
    model
        .check_live(&snapshot(&[("a", &[b"x", b"y"])]))
        .unwrap();
    assert!(model.check_live(&snapshot(&[("a", &[b"x"])])).is_err());
}

#[test]
fn after_a_power_loss_what_survived_is_durable() {
    let mut model = model_with_durable_and_buffered();
    model
        .check_recovered(&snapshot(&[("a", &[b"x", b"y"])]), Restart::PowerLoss)
        .unwrap();
    let err = model
        .check_recovered(&snapshot(&[("a", &[b"x"])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 2, .. }), "{err}");
}

/// Streams "a" and "b" created durably, a record in each, then "a" deleted (buffered).
fn model_with_a_deletion() -> ReferenceModel {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model.stream_created("b", 2, true);
    model
        .committed(&[append("a", b"1"), append("b", b"2")], true, 10, &[0, 0])
        .unwrap();
    model.stream_deleted("a", false);
    model
}

#[test]
fn deleted_stream_may_be_gone_or_back_after_a_crash() {
    let mut gone = model_with_a_deletion();
    assert_eq!(gone.streams(), vec!["b".to_owned()]);
    gone.check_recovered(&snapshot(&[("b", &[b"2"])]), Restart::PowerLoss)
        .unwrap();
    assert_eq!(gone.streams(), vec!["b".to_owned()]);

    let mut back = model_with_a_deletion();
    back.check_recovered(
        &snapshot(&[("a", &[b"1"]), ("b", &[b"2"])]),
        Restart::PowerLoss,
    )
    .unwrap();
    assert_eq!(back.streams(), vec!["a".to_owned(), "b".to_owned()]);
}

#[test]
fn durable_deletion_must_not_come_back() {
    let mut model = model_with_a_deletion();
    model.flushed();
    let err = model
        .check_recovered(
            &snapshot(&[("a", &[b"1"]), ("b", &[b"2"])]),
            Restart::PowerLoss,
        )
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 3, .. }), "{err}");
}

#[test]
fn a_stream_that_was_never_deleted_must_not_vanish() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model.stream_created("b", 2, true);
    model.stream_deleted("a", false);
    let err = model
        .check_recovered(&snapshot(&[("a", &[])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::LostDurable { op: 1, .. }), "{err}");
}

#[test]
fn deletion_cannot_survive_when_an_earlier_commit_is_lost() {
    let mut model = ReferenceModel::new();
    model.stream_created("a", 1, true);
    model.stream_created("b", 2, true);
    model
        .committed(&[append("b", b"x")], false, 10, &[0])
        .unwrap();
    model.stream_deleted("a", false);
    // "b" lost its record, so the later deletion of "a" cannot have survived.
    let err = model
        .check_recovered(&snapshot(&[("b", &[])]), Restart::PowerLoss)
        .unwrap_err();
    assert!(matches!(err, Violation::WrongRecords { .. }), "{err}");
}
