//! Folding a long run of stored records on two threads: one reads and verifies records
//! while the other folds, and the work between (decoding a record and preparing its event,
//! the half of its load that needs no session state) is shared: the reading thread hands a
//! batch over as read whenever the folding thread has nothing waiting, for it to prepare
//! before it folds, and prepares the batch itself otherwise. How the work splits depends on
//! the session (a chunk, folded from its record's head, costs little to prepare; a message
//! much more), so the split follows whichever thread is behind instead of being fixed, and a
//! cold resume takes about the time of one half instead of the sum.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::error::Result;

/// Records below which a fold stays on the calling thread: starting a thread and handing
/// batches over costs more than it saves on a short run.
const PIPELINE_MIN_RECORDS: u64 = 16_384;

/// Items the reading thread hands over at once.
const BATCH: usize = 512;

/// Batches in flight between the threads; bounds the items held in memory to
/// `(IN_FLIGHT + 2) * BATCH` whatever the session's length, plus the folded batches on
/// their way back to the reading thread (at most [`GIVEN_BACK`]).
const IN_FLIGHT: usize = 4;

/// Folded batches of the reading thread's items waiting to be dropped there; more are
/// dropped where they were folded.
const GIVEN_BACK: usize = IN_FLIGHT + 2;

/// One batch handed from the reading thread to the folding one.
enum Handed<R, T> {
    /// Items the reading thread prepared.
    Prepared(Vec<T>),
    /// Items as read, for the folding thread to prepare.
    Read(Vec<R>),
}

/// Feeds every item of `items` (a run of `records` records, in seq order), each made ready
/// by `prepare`, to `fold`, and returns how many were folded. Stops at the first error, of
/// the reading, the preparing or the fold, and returns it, after folding every item before
/// the one that failed; on a long run the reading goes on in a second thread (which
/// prepares the batches the folding thread is not waiting for, with its own clone of
/// `prepare`), and an error of the fold
/// stops it (the reader sees the hand-over closed and ends).
///
/// `fold` takes each item by reference: the items the reading thread prepared are handed
/// back to it once folded and dropped there, because memory freed on another thread than
/// the one that allocated it makes both threads contend for the allocator's lock.
pub(super) fn fold_events<R, T, I, P, F>(
    records: u64,
    items: I,
    mut prepare: P,
    mut fold: F,
) -> Result<u64>
where
    R: Send,
    T: Send,
    I: Iterator<Item = Result<R>> + Send,
    P: FnMut(R) -> Result<T> + Clone + Send,
    F: FnMut(&mut T) -> Result<()>,
{
    let mut count = 0u64;
    if records < PIPELINE_MIN_RECORDS {
        for item in items {
            fold(&mut prepare(item?)?)?;
            count += 1;
        }
        return Ok(count);
    }
    let mut reader_prepare = prepare.clone();
    // Batches handed over and not yet taken by the folding thread.
    let waiting = &AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (send, receive) = sync_channel::<Result<Handed<R, T>>>(IN_FLIGHT);
        let (give_back, given_back) = sync_channel::<Vec<T>>(GIVEN_BACK);
        let reader = scope.spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            // Hands `batch` over, as read when the folding thread has nothing waiting (it
            // would otherwise sit idle), else prepared here; false when the folding thread
            // is gone or an item failed (its error sent after the items before it).
            let mut hand_over = |batch: Vec<R>| -> bool {
                // Counted as waiting before it is sent; nothing waited before it if the
                // count was 0.
                if waiting.fetch_add(1, Ordering::AcqRel) == 0 {
                    return send.send(Ok(Handed::Read(batch))).is_ok();
                }
                // The batches folded since are dropped here, where their items were made;
                // the room of one holds the next.
                let mut ready = Vec::new();
                while let Ok(mut spent) = given_back.try_recv() {
                    spent.clear();
                    if ready.capacity() == 0 {
                        ready = spent;
                    }
                }
                ready.reserve(batch.len());
                for item in batch {
                    match reader_prepare(item) {
                        Ok(item) => ready.push(item),
                        Err(e) => {
                            let _ = send.send(Ok(Handed::Prepared(ready)));
                            let _ = send.send(Err(e));
                            return false;
                        }
                    }
                }
                send.send(Ok(Handed::Prepared(ready))).is_ok()
            };
            for item in items {
                match item {
                    Ok(item) => batch.push(item),
                    Err(e) => {
                        // Items before the bad one are folded first, as a plain loop
                        // would, then the error ends the run.
                        if hand_over(std::mem::take(&mut batch)) {
                            let _ = send.send(Err(e));
                        }
                        return;
                    }
                }
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    if !hand_over(full) {
                        return;
                    }
                }
            }
            hand_over(batch);
        });
        let folded = drain(
            &receive,
            &give_back,
            waiting,
            &mut prepare,
            &mut fold,
            &mut count,
        );
        // Dropping `receive` lets a reader still sending see the hand-over closed and stop.
        // It is joined here: the scope's own wait ends when the thread's work does, before
        // the thread has exited and run its thread-locals' destructors (a decompression
        // context, when it read a compressed segment).
        drop(receive);
        if let Err(panic) = reader.join() {
            std::panic::resume_unwind(panic);
        }
        folded
    })?;
    Ok(count)
}

/// Folds every batch `receive` hands over, preparing those handed over as read and giving
/// the others back once folded, until the reader is done or something fails.
fn drain<R, T, P, F>(
    receive: &Receiver<Result<Handed<R, T>>>,
    give_back: &SyncSender<Vec<T>>,
    waiting: &AtomicUsize,
    prepare: &mut P,
    fold: &mut F,
    count: &mut u64,
) -> Result<()>
where
    P: FnMut(R) -> Result<T>,
    F: FnMut(&mut T) -> Result<()>,
{
    for batch in receive {
        if batch.is_ok() {
            waiting.fetch_sub(1, Ordering::AcqRel);
        }
        match batch? {
            Handed::Prepared(mut items) => {
                for item in &mut items {
                    fold(item)?;
                    *count += 1;
                }
                // A reader that is done, or behind in dropping, leaves the batch to be
                // dropped here.
                let _ = give_back.try_send(items);
            }
            Handed::Read(items) => {
                for item in items {
                    fold(&mut prepare(item)?)?;
                    *count += 1;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use sessionlog_session::Event;

    /// Hands an event over as it is.
    fn as_is(event: Event) -> Result<Event> {
        Ok(event)
    }

    /// Events 0..n (enough to take the two-thread path when `n` is large), parsed before
    /// the run, so that reading one costs next to nothing in any build (a debug build's
    /// parse would otherwise outweigh the work the tests give each thread).
    fn events(n: u64) -> impl Iterator<Item = Result<Event>> + Send {
        let parsed: Vec<Event> = (0..n)
            .map(|seq| {
                let raw =
                    format!(r#"{{"type":"turn/start","seq":{seq},"time":0,"data":{{"turn":1}}}}"#);
                Event::parse(&raw, seq).expect("a valid event")
            })
            .collect();
        parsed.into_iter().map(Ok)
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
        let folded = fold_events(n, read_on(n, caller, false), as_is, |e| {
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
        let result = fold_events(n, run, as_is, |_| {
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
        let result = fold_events(n, events(n), as_is, |e| {
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
        let folded = fold_events(n, read_on(n, caller, true), as_is, |_| Ok(())).expect("fold");
        assert_eq!(folded, n);
    }

    /// The work per item of the slow side of a run whose split is tested: well above what
    /// handing an item over and counting it costs either thread, even unoptimized.
    const SLOW_MICROS: u64 = 10;

    /// Works for about `micros` microseconds without sleeping (a thread that sleeps leaves
    /// the other nothing to wait for).
    fn spin(micros: u64) {
        let until = std::time::Instant::now() + std::time::Duration::from_micros(micros);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Runs `n` events through the pipeline, reading each in `read_micros` and folding
    /// each in `fold_micros`; returns how many were prepared on the folding (calling)
    /// thread and on the reader, checking that each was prepared once and folded in order.
    fn prepared_where(n: u64, read_micros: u64, fold_micros: u64) -> (u64, u64) {
        let caller = std::thread::current().id();
        let on_caller = std::sync::atomic::AtomicU64::new(0);
        let elsewhere = std::sync::atomic::AtomicU64::new(0);
        let prepare = |e: Event| {
            let count = if std::thread::current().id() == caller {
                &on_caller
            } else {
                &elsewhere
            };
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(e)
        };
        let mut next = 0;
        let read = events(n).inspect(move |_| spin(read_micros));
        let folded = fold_events(n, read, prepare, |e| {
            assert_eq!(e.seq().get(), next, "folded in seq order");
            next += 1;
            spin(fold_micros);
            Ok(())
        })
        .expect("fold");
        let (a, b) = (on_caller.into_inner(), elsewhere.into_inner());
        assert_eq!(
            (folded, a + b),
            (n, n),
            "every event prepared once and folded"
        );
        (a, b)
    }

    #[test]
    fn a_long_run_is_prepared_mostly_by_the_thread_that_has_time_for_it() {
        let n = PIPELINE_MIN_RECORDS * 2 + 3;
        // A slow fold: the folding thread always has batches waiting, so the reader
        // prepares them (all but the first few).
        let (folder, reader) = prepared_where(n, 0, SLOW_MICROS);
        assert!(
            reader > n / 2,
            "slow fold: prepared {folder} on the folding thread, {reader} on the reader"
        );
        // A slow read: the folding thread waits for every batch, so it is handed each as
        // read and prepares it.
        let (folder, reader) = prepared_where(n, SLOW_MICROS, 0);
        assert!(
            folder > n / 2,
            "slow read: prepared {folder} on the folding thread, {reader} on the reader"
        );
    }

    /// An item that counts being dropped on another thread than the one that made it.
    struct Made {
        on: std::thread::ThreadId,
        dropped_elsewhere: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl Drop for Made {
        fn drop(&mut self) {
            if std::thread::current().id() != self.on {
                self.dropped_elsewhere
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn items_the_reader_prepared_are_dropped_on_the_reader_but_for_the_last_batches() {
        let n = PIPELINE_MIN_RECORDS * 4;
        let dropped_elsewhere = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let caller = std::thread::current().id();
        let on_reader = std::sync::atomic::AtomicU64::new(0);
        let prepare = |e: Event| {
            if std::thread::current().id() != caller {
                on_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok((
                e,
                Made {
                    on: std::thread::current().id(),
                    dropped_elsewhere: dropped_elsewhere.clone(),
                },
            ))
        };
        let mut next = 0;
        // A fold slower than the reading, so that the reader prepares most batches.
        let folded = fold_events(n, events(n), prepare, |(e, _)| {
            assert_eq!(e.seq().get(), next, "folded in seq order");
            next += 1;
            spin(SLOW_MICROS);
            Ok(())
        })
        .expect("fold");
        let (on_reader, elsewhere) = (
            on_reader.into_inner(),
            dropped_elsewhere.load(std::sync::atomic::Ordering::Relaxed),
        );
        assert_eq!(folded, n);
        assert!(on_reader > n / 4, "the reader prepared {on_reader} items");
        // Only the batches folded after the reader is done (or while its way back is
        // full) are dropped on the folding thread.
        assert!(
            elsewhere <= ((GIVEN_BACK + IN_FLIGHT + 2) * BATCH) as u64,
            "{elsewhere} of the {on_reader} items the reader prepared were dropped elsewhere"
        );
    }

    #[test]
    fn a_preparation_error_ends_the_run_after_every_event_before_it_is_folded() {
        let n = PIPELINE_MIN_RECORDS * 2;
        let caller = std::thread::current().id();
        let mut refused_on = std::collections::HashSet::new();
        // With a slow fold the reader prepares the later batches, with a slow read the
        // folding thread prepares them: the refusal is met on each thread.
        for (read_micros, fold_micros) in [(0, SLOW_MICROS), (SLOW_MICROS, 0)] {
            for bad in [5, BATCH as u64 + 7, 6 * BATCH as u64 + 1] {
                let on = std::sync::Mutex::new(None);
                let prepare = |e: Event| {
                    if e.seq().get() == bad {
                        *on.lock().expect("lock") = Some(std::thread::current().id() == caller);
                        return Err(Error::NoSuchSession("undecodable".into()));
                    }
                    Ok(e)
                };
                let mut folded = 0;
                let read = events(n).inspect(move |_| spin(read_micros));
                let result = fold_events(n, read, prepare, |e| {
                    assert_eq!(e.seq().get(), folded, "folded in seq order");
                    folded += 1;
                    spin(fold_micros);
                    Ok(())
                });
                assert!(matches!(result, Err(Error::NoSuchSession(_))), "{result:?}");
                assert_eq!(folded, bad);
                refused_on.extend(on.into_inner().expect("lock"));
            }
        }
        assert_eq!(
            refused_on.len(),
            2,
            "refused on both threads: {refused_on:?}"
        );
    }
}
