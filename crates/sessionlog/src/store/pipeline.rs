//! Folding a long run of stored events on two threads: one reads, verifies and decodes
//! records while the other folds the events decoded before them. Reading and decoding cost
//! about as much as folding, so a cold resume of a long session takes about the time of the
//! slower half instead of the sum of both.

use std::sync::mpsc::{sync_channel, Receiver};

use sessionlog_session::Event;

use crate::error::Result;

/// Records below which a fold stays on the calling thread: starting a thread and handing
/// batches over costs more than it saves on a short run.
const PIPELINE_MIN_RECORDS: u64 = 16_384;

/// Events the reading thread hands over at once.
const BATCH: usize = 512;

/// Batches in flight between the threads; bounds the events held in memory to
/// `(IN_FLIGHT + 2) * BATCH` whatever the session's length.
const IN_FLIGHT: usize = 4;

/// Feeds every event of `events` (a run of `records` records, in seq order) to `fold`, and
/// returns how many were folded. Stops at the first error, of the reading or of the fold,
/// and returns it; on a long run the reading goes on in a second thread, and an error of
/// the fold stops it (the reader sees the hand-over closed and ends).
pub(super) fn fold_events<I, F>(records: u64, events: I, mut fold: F) -> Result<u64>
where
    I: Iterator<Item = Result<Event>> + Send,
    F: FnMut(Event) -> Result<()>,
{
    let mut count = 0u64;
    if records < PIPELINE_MIN_RECORDS {
        for event in events {
            fold(event?)?;
            count += 1;
        }
        return Ok(count);
    }
    std::thread::scope(|scope| {
        let (send, receive) = sync_channel::<Result<Vec<Event>>>(IN_FLIGHT);
        scope.spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            for event in events {
                match event {
                    Ok(event) => batch.push(event),
                    Err(e) => {
                        // Events before the bad one are folded first, as a plain loop
                        // would, then the error ends the run.
                        let _ = send.send(Ok(std::mem::take(&mut batch)));
                        let _ = send.send(Err(e));
                        return;
                    }
                }
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    if send.send(Ok(full)).is_err() {
                        return;
                    }
                }
            }
            let _ = send.send(Ok(batch));
        });
        drain(&receive, &mut fold, &mut count)
        // Returning drops `receive`, so a reader still sending sees the hand-over closed
        // and stops; the scope then joins it.
    })?;
    Ok(count)
}

/// Folds every batch `receive` hands over until the reader is done or something fails.
fn drain<F>(receive: &Receiver<Result<Vec<Event>>>, fold: &mut F, count: &mut u64) -> Result<()>
where
    F: FnMut(Event) -> Result<()>,
{
    for batch in receive {
        for event in batch? {
            fold(event)?;
            *count += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Events 0..n (enough to take the two-thread path when `n` is large).
    fn events(n: u64) -> impl Iterator<Item = Result<Event>> + Send {
        (0..n).map(|seq| {
            let raw =
                format!(r#"{{"type":"turn/start","seq":{seq},"time":0,"data":{{"turn":1}}}}"#);
            Ok(Event::parse(&raw, seq)?)
        })
    }

    /// `events(n)`, asserting that each is read on a thread other than `caller` (or on
    /// `caller` itself when `same` is set).
    fn read_on(
        n: u64,
        caller: std::thread::ThreadId,
        same: bool,
    ) -> impl Iterator<Item = Result<Event>> + Send {
        events(n).inspect(move |_| assert_eq!(std::thread::current().id() == caller, same))
    }

    #[test]
    fn a_long_run_is_folded_whole_and_in_order_on_two_threads() {
        let n = PIPELINE_MIN_RECORDS * 3 + 17;
        let caller = std::thread::current().id();
        let mut next = 0;
        let folded = fold_events(n, read_on(n, caller, false), |e| {
            assert_eq!(e.seq().get(), next, "events are folded in seq order");
            next += 1;
            Ok(())
        })
        .expect("fold");
        assert_eq!((folded, next), (n, n));
    }

    #[test]
    fn a_read_error_ends_the_run_after_every_event_before_it_is_folded() {
        let n = PIPELINE_MIN_RECORDS * 2;
        let bad = PIPELINE_MIN_RECORDS + 5;
        let run = events(n).map(move |e| match e {
            Ok(e) if e.seq().get() == bad => Err(Error::NoSuchSession("gone".into())),
            other => other,
        });
        let mut folded = 0;
        let result = fold_events(n, run, |_| {
            folded += 1;
            Ok(())
        });
        assert!(matches!(result, Err(Error::NoSuchSession(_))), "{result:?}");
        assert_eq!(folded, bad);
    }

    #[test]
    fn a_fold_error_stops_the_reader_and_is_returned() {
        let n = PIPELINE_MIN_RECORDS * 4;
        let mut folded = 0u64;
        let result = fold_events(n, events(n), |e| {
            if e.seq().get() == 100 {
                return Err(Error::NoSuchSession("refused".into()));
            }
            folded += 1;
            Ok(())
        });
        assert!(matches!(result, Err(Error::NoSuchSession(_))), "{result:?}");
        assert_eq!(folded, 100);
    }

    #[test]
    fn a_short_run_is_read_and_folded_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let n = PIPELINE_MIN_RECORDS - 1;
        let folded = fold_events(n, read_on(n, caller, true), |_| Ok(())).expect("fold");
        assert_eq!(folded, n);
    }
}
