//! Reads a [`Log`] into a [`LogSnapshot`] for the [`crate::ReferenceModel`], checking on the
//! way that the log's read paths agree with each other: range iteration, point reads, the
//! stream's reported next seq, and the end of each stream.

use sessionlog_log::{Error, Log, Seq};

use crate::model::{LogSnapshot, ModelRecord, SnapshotStream};

/// Everything in `log`, stream by stream, with every record also read by seq. Fails (with a
/// description) when a read fails or the read paths disagree: iteration yields a record past
/// the stream's next seq, a point read returns other bytes than iteration, or reading at the
/// end does not report "no such record".
pub fn snapshot(log: &Log) -> Result<LogSnapshot, String> {
    snapshot_sampled(log, usize::MAX)
}

/// [`snapshot`], with point reads of at most `point_reads` records per stream (spread evenly,
/// the last one always included) to bound the cost of frequent checks.
pub fn snapshot_sampled(log: &Log, point_reads: usize) -> Result<LogSnapshot, String> {
    let mut snap = LogSnapshot::default();
    for info in log.streams() {
        let name = &info.name;
        let mut records = Vec::new();
        for item in log.iter(info.id, Seq(0), Seq(u64::MAX)) {
            let record = item.map_err(|e| format!("iterating stream {name:?}: {e}"))?;
            if record.stream != info.id {
                return Err(format!(
                    "iterating stream {name:?} ({}) returned a record of stream {}",
                    info.id, record.stream
                ));
            }
            records.push((record.seq.0, model_record(&record)));
        }
        if records.len() as u64 != info.next_seq.0 {
            return Err(format!(
                "stream {name:?} reports next seq {} but iteration returned {} records",
                info.next_seq,
                records.len()
            ));
        }
        let stride = records.len().div_ceil(point_reads.max(1)).max(1);
        let sampled = records
            .iter()
            .enumerate()
            .filter(|(i, _)| i % stride == 0 || i + 1 == records.len())
            .map(|(_, r)| r);
        for (seq, expected) in sampled {
            let record = log
                .read(info.id, Seq(*seq))
                .map_err(|e| format!("reading {name:?} seq {seq}: {e}"))?;
            if record.seq.0 != *seq || model_record(&record) != *expected {
                return Err(format!(
                    "point read of {name:?} seq {seq} disagrees with iteration"
                ));
            }
        }
        match log.read(info.id, info.next_seq) {
            Err(Error::NoSuchRecord { .. }) => {}
            Ok(_) => {
                return Err(format!(
                    "stream {name:?} has a record at its next seq {}",
                    info.next_seq
                ))
            }
            Err(e) => return Err(format!("reading {name:?} past its end: {e}")),
        }
        if log.stream_id(name) != Some(info.id) {
            return Err(format!("name {name:?} does not map back to id {}", info.id));
        }
        snap.streams.insert(
            name.clone(),
            SnapshotStream {
                id: info.id.0,
                records,
            },
        );
    }
    Ok(snap)
}

fn model_record(record: &sessionlog_log::Record) -> ModelRecord {
    ModelRecord {
        kind: record.kind,
        flags: record.flags,
        payload: record.payload.clone(),
    }
}
