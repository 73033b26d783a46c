//! Object requests made a few at a time: a round trip to object storage costs far more than
//! the CPU around it, so shipping and restore keep several in flight.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// Requests in flight at once: enough to keep a loopback or LAN object store busy, few enough
/// that only this many objects (each at most a segment) are held in memory at a time.
pub(crate) const IN_FLIGHT: usize = 6;

/// Runs `work` on every item, up to [`IN_FLIGHT`] at a time, and returns the results in item
/// order; after the first failure no further item is started and that failure is returned.
pub(crate) fn for_each<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if items.len() <= 1 {
        return items.iter().map(&work).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || -> Result<Vec<(usize, R)>> {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(index) else { break };
            match work(item) {
                Ok(result) => done.push((index, result)),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(done)
    };
    let finished: Vec<Result<Vec<(usize, R)>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..IN_FLIGHT.min(items.len()))
            .map(|_| scope.spawn(worker))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(Err(Error::WorkerPanicked)))
            .collect()
    });
    let mut results = Vec::with_capacity(items.len());
    for part in finished {
        results.extend(part?);
    }
    results.sort_by_key(|(index, _)| *index);
    Ok(results.into_iter().map(|(_, r)| r).collect())
}
