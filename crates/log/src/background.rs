//! Reclaim on a thread of its own, so an application never has to call it.
//!
//! The thread runs [`crate::Log::reclaim`] once at start and then every interval, until the
//! handle is stopped or dropped, or the log is closed. Reclaim takes the log's lock only for
//! short, bounded steps (deciding on one segment, swapping one rewritten segment in, taking one
//! removed segment out); copying and writing a rewrite happen outside it, so commits go on
//! meanwhile. spec: segment.md#rewriting-a-segment
//!
//! Copying, checksumming and syncing a rewrite still take CPU and disk time that commits
//! want, so the thread paces itself: after each step of a run (a segment removed, a group of
//! segments rewritten) it rests in proportion to the time the step took, so that it works at
//! most its *work share* of the time ([`DEFAULT_WORK_SHARE`] unless
//! [`crate::Log::start_background_reclaim_paced`] says otherwise).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::log::Log;
use crate::reclaim::ReclaimReport;

/// The share of the time a background reclaim works, resting the rest, unless told otherwise:
/// on a store under load, a reclaim that copies at full speed takes the CPU and the disk syncs
/// that commits need.
pub const DEFAULT_WORK_SHARE: f64 = 0.15;

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
    pub(crate) fn start(
        log: Log,
        interval: Duration,
        work_share: f64,
    ) -> Result<BackgroundReclaim> {
        log.check_writable()?;
        if !(work_share > 0.0 && work_share <= 1.0) {
            return Err(Error::InvalidInput(format!(
                "a background reclaim's work share is above 0 and at most 1, not {work_share}"
            )));
        }
        let shared = Arc::new(Shared::default());
        let mine = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sessionlog-reclaim".into())
            .spawn(move || run(&log, interval, work_share, &mine))
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

/// Rests until `deadline`, or until a stop is asked for.
fn rest_until(shared: &Shared, deadline: Instant) {
    let mut control = shared.control.lock();
    while !control.stop {
        if shared.wake.wait_until(&mut control, deadline).timed_out() {
            return;
        }
    }
}

fn run(log: &Log, interval: Duration, work_share: f64, shared: &Shared) {
    // For each unit of time worked, this much rest.
    let rest_per_work = (1.0 - work_share) / work_share;
    loop {
        {
            let mut control = shared.control.lock();
            if control.stop {
                return;
            }
            // A nudge before this run is answered by it.
            control.nudged = false;
        }
        let mut step_started = Instant::now();
        let mut pace = |_: &ReclaimReport| {
            if rest_per_work > 0.0 {
                let worked = step_started.elapsed();
                let rest = worked.mul_f64(rest_per_work);
                if let Some(deadline) = Instant::now().checked_add(rest) {
                    rest_until(shared, deadline);
                }
            }
            step_started = Instant::now();
        };
        match log
            .inner
            .reclaim(&mut pace, crate::reclaim::Runner::Background)
        {
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
