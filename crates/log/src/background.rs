//! Reclaim on a thread of its own, so an application never has to call it.
//!
//! The thread runs [`crate::Log::reclaim`] once at start and then every interval, until the
//! handle is stopped or dropped, or the log is closed. Reclaim takes the log's lock only for
//! short, bounded steps (deciding on one segment, swapping one rewritten segment in, taking one
//! removed segment out); copying and writing a rewrite happen outside it, so commits go on
//! meanwhile. spec: segment.md#rewriting-a-segment

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::log::Log;
use crate::reclaim::ReclaimReport;

/// What the background thread has done so far.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BackgroundReport {
    /// Reclaim runs completed.
    pub runs: u64,
    /// Segments removed, over all runs.
    pub segments_removed: u64,
    /// Segments rewritten, over all runs.
    pub segments_rewritten: u64,
    /// Bytes given back, over all runs.
    pub bytes_freed: u64,
    /// Record bytes copied by rewrites, over all runs.
    pub live_bytes_copied: u64,
    /// The error that ended the thread, if one did (a closed log ends it without one).
    pub error: Option<String>,
}

impl BackgroundReport {
    fn add(&mut self, r: &ReclaimReport) {
        self.runs += 1;
        self.segments_removed += r.segments_removed.len() as u64;
        self.segments_rewritten += r.segments_rewritten.len() as u64;
        self.bytes_freed += r.bytes_removed + r.bytes_freed_by_rewrites;
        self.live_bytes_copied += r.live_bytes_copied;
    }
}

#[derive(Debug, Default)]
struct Shared {
    control: Mutex<Control>,
    wake: Condvar,
    report: Mutex<BackgroundReport>,
}

/// What the thread is asked to do, set under the lock it waits on, so that a nudge or a stop
/// that comes before it waits (while it finishes a run) is not lost.
#[derive(Debug, Default)]
struct Control {
    stop: bool,
    nudged: bool,
}

/// A running background reclaim. Dropping it stops the thread (waiting for a run in progress
/// to finish); [`BackgroundReclaim::stop`] does the same and returns what it did.
#[derive(Debug)]
pub struct BackgroundReclaim {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundReclaim {
    pub(crate) fn start(log: Log, interval: Duration) -> Result<BackgroundReclaim> {
        log.check_writable()?;
        let shared = Arc::new(Shared::default());
        let mine = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sessionlog-reclaim".into())
            .spawn(move || run(&log, interval, &mine))
            .map_err(|e| Error::InvalidInput(format!("starting the reclaim thread: {e}")))?;
        Ok(BackgroundReclaim {
            shared,
            thread: Some(thread),
        })
    }

    /// What the thread has done so far.
    pub fn report(&self) -> BackgroundReport {
        self.shared.report.lock().clone()
    }

    /// Runs reclaim again now instead of at the end of the interval.
    pub fn nudge(&self) {
        self.shared.control.lock().nudged = true;
        self.shared.wake.notify_one();
    }

    /// Stops the thread, after the run in progress, and returns what it did.
    pub fn stop(mut self) -> BackgroundReport {
        self.halt();
        self.report()
    }

    fn halt(&mut self) {
        self.shared.control.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for BackgroundReclaim {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(log: &Log, interval: Duration, shared: &Shared) {
    loop {
        {
            let mut control = shared.control.lock();
            if control.stop {
                return;
            }
            // A nudge before this run is answered by it.
            control.nudged = false;
        }
        match log.reclaim() {
            Ok(r) => shared.report.lock().add(&r),
            Err(Error::Closed) => return,
            Err(e) => {
                shared.report.lock().error = Some(e.to_string());
                return;
            }
        }
        // Until the interval is up (or for ever, past what a clock can count), a nudge or
        // a stop.
        let deadline = std::time::Instant::now().checked_add(interval);
        let mut control = shared.control.lock();
        while !control.stop && !control.nudged {
            match deadline {
                Some(deadline) => {
                    if shared.wake.wait_until(&mut control, deadline).timed_out() {
                        break;
                    }
                }
                None => shared.wake.wait(&mut control),
            }
        }
    }
}
