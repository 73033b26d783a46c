//! Retention: deleting the sessions a policy names (by age, or a caller's list), so that
//! reclaim can give their space back. Deleting is the only thing retention does; the bytes
//! go when [`Store::reclaim`] runs.

use std::time::Duration;

use sessionlog_log::Seq as LogSeq;

use super::Store;
use crate::error::{Error, Result};

/// Which sessions [`Store::apply_retention`] deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retention {
    /// Every session whose last activity (the `time` of its last event, or its header's
    /// `createdAt` when it has no event) lies more than `max_age` before `now_unix_ms`.
    OlderThan {
        /// How old a session may get.
        max_age: Duration,
        /// The present, in milliseconds since the Unix epoch.
        now_unix_ms: u64,
    },
    /// Exactly these sessions.
    Sessions(Vec<String>),
}

impl Retention {
    /// [`Retention::OlderThan`] measured from the system clock.
    pub fn older_than(max_age: Duration) -> Retention {
        let now_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Retention::OlderThan {
            max_age,
            now_unix_ms,
        }
    }
}

/// What [`Store::apply_retention`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetentionReport {
    /// Sessions deleted, in the order they were.
    pub deleted: Vec<String>,
    /// Listed sessions the store does not hold (a list only).
    pub missing: Vec<String>,
    /// Sessions the policy named but left alone because a writer has them open.
    pub busy: Vec<String>,
}

impl Store {
    /// Deletes the sessions `retention` names, each durably, skipping (and reporting) those a
    /// writer holds open; calls `progress(done, total)` after each session looked at. Their
    /// space comes back with the next [`Store::reclaim`].
    pub fn apply_retention(
        &self,
        retention: &Retention,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        let names: Vec<String> = match retention {
            Retention::Sessions(names) => names.clone(),
            Retention::OlderThan { .. } => self.session_names(),
        };
        let total = names.len();
        for (i, name) in names.into_iter().enumerate() {
            let doomed = match retention {
                Retention::Sessions(_) => true,
                Retention::OlderThan {
                    max_age,
                    now_unix_ms,
                } => match self.last_activity_unix_ms(&name) {
                    Ok(last) => {
                        let age_ms = i128::from(*now_unix_ms) - i128::from(last);
                        age_ms > max_age.as_millis() as i128
                    }
                    // Deleted by someone else since the listing.
                    Err(Error::NoSuchSession(_)) => false,
                    Err(e) => return Err(e),
                },
            };
            if doomed {
                match self.delete_session(&name) {
                    Ok(()) => report.deleted.push(name),
                    Err(Error::NoSuchSession(_)) => report.missing.push(name),
                    Err(Error::WriterBusy(_)) => report.busy.push(name),
                    Err(e) => return Err(e),
                }
            }
            progress(i + 1, total);
        }
        Ok(report)
    }

    /// When a session was last active: the `time` of its last event, or its header's
    /// `createdAt` when it has no event (0 when it has neither), in milliseconds since the
    /// Unix epoch. Reads one record, folds nothing.
    pub fn last_activity_unix_ms(&self, name: &str) -> Result<i64> {
        let stream = self.stream(name)?;
        let records = self.next_record(stream);
        if records > 1 {
            // Record n + 1 holds event n: the last record holds the last event.
            let last = LogSeq(records - 1);
            if let Some(event) = self
                .stored_events(name, stream, last, LogSeq(records))
                .next()
            {
                return Ok(event?.time());
            }
        }
        let header = self.read_header(name, stream)?;
        Ok(header
            .created_at()
            .map_or(0, |ms| i64::try_from(ms).unwrap_or(i64::MAX)))
    }
}
