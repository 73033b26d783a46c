//! Fault injection for [`crate::SimStorage`]: make the Nth operation of a kind fail.
//!
//! A [`Fault`] names an operation kind, how many operations of that kind to let through
//! first, the error to return, and whether it fires once or keeps firing. A write fault can
//! also be a *short write*: a prefix of the buffer lands, then the error is returned, which is
//! what `write_all_at` may do on a real disk that fills up.

use std::io;

/// The kinds of storage operation a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `read_at` and `map_readonly`.
    Read,
    /// `write_all_at`.
    Write,
    /// `sync_data`.
    SyncData,
    /// `sync_all`.
    SyncAll,
    /// `sync_dir`.
    SyncDir,
    /// `set_len` and `allocate`.
    Resize,
    /// Directory entry changes: creating a file, `remove_file`, `rename`.
    Namespace,
    /// Every operation, including opens, `len`, `list_dir`, locks: with a sticky fault this
    /// models the power going out after a given number of operations.
    Any,
}

/// The error a fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// `EIO`: the device reported an I/O error.
    Io,
    /// `ENOSPC`: the device is full.
    NoSpace,
}

impl FaultError {
    const EIO: i32 = 5;
    const ENOSPC: i32 = 28;

    /// The `io::Error` the storage returns for this fault.
    pub fn to_io_error(self) -> io::Error {
        match self {
            FaultError::Io => io::Error::from_raw_os_error(Self::EIO),
            FaultError::NoSpace => io::Error::from_raw_os_error(Self::ENOSPC),
        }
    }
}

/// Whether a fault fires once or on every matching operation after it first fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Fires on one operation, then is gone.
    OneShot,
    /// Fires on the target operation and every later operation of the kind.
    Sticky,
}

/// One planned failure. Build with [`Fault::on`] and the chained setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The operation kind that fails.
    pub kind: OpKind,
    /// How many matching operations succeed before the fault fires (0: the next one fails).
    pub skip: u64,
    /// The error returned.
    pub error: FaultError,
    /// Once or from then on.
    pub persistence: Persistence,
    /// For writes: land a random strict prefix of the buffer before failing.
    pub short_write: bool,
}

impl Fault {
    /// A one-shot `EIO` on the next operation of `kind`.
    pub fn on(kind: OpKind) -> Fault {
        Fault {
            kind,
            skip: 0,
            error: FaultError::Io,
            persistence: Persistence::OneShot,
            short_write: false,
        }
    }

    /// Lets `count` matching operations succeed first; the one after them fails.
    pub fn after(mut self, count: u64) -> Fault {
        self.skip = count;
        self
    }

    /// Fails with `error` instead of `EIO`.
    pub fn with_error(mut self, error: FaultError) -> Fault {
        self.error = error;
        self
    }

    /// Keeps failing every matching operation once it has fired.
    pub fn sticky(mut self) -> Fault {
        self.persistence = Persistence::Sticky;
        self
    }

    /// A failing write first lands a random strict prefix of its buffer.
    pub fn short_write(mut self) -> Fault {
        self.short_write = true;
        self
    }

    /// Power goes out after `ops` more operations of any kind: every later operation fails
    /// with `EIO` until a crash (or [`crate::SimStorage::clear_faults`]).
    pub fn power_cut_after(ops: u64) -> Fault {
        Fault::on(OpKind::Any).after(ops).sticky()
    }

    fn matches(&self, kind: OpKind) -> bool {
        self.kind == OpKind::Any || self.kind == kind
    }
}

/// What the plan decided for one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Firing {
    pub error: FaultError,
    pub short_write: bool,
}

#[derive(Debug, Clone)]
struct ArmedFault {
    fault: Fault,
    remaining: u64,
    fired: bool,
}

/// The faults currently armed, with their countdowns.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultPlan {
    armed: Vec<ArmedFault>,
}

impl FaultPlan {
    pub fn add(&mut self, fault: Fault) {
        self.armed.push(ArmedFault {
            remaining: fault.skip,
            fault,
            fired: false,
        });
    }

    pub fn clear(&mut self) {
        self.armed.clear();
    }

    pub fn armed(&self) -> usize {
        self.armed.len()
    }

    /// Counts one operation of `kind` against every armed fault; returns the first that fires.
    pub fn on_operation(&mut self, kind: OpKind) -> Option<Firing> {
        let mut firing = None;
        for armed in self.armed.iter_mut().filter(|a| a.fault.matches(kind)) {
            let fires = if armed.fired {
                armed.fault.persistence == Persistence::Sticky
            } else if armed.remaining == 0 {
                armed.fired = true;
                true
            } else {
                armed.remaining -= 1;
                false
            };
            if fires && firing.is_none() {
                firing = Some(Firing {
                    error: armed.fault.error,
                    short_write: armed.fault.short_write && kind == OpKind::Write,
                });
            }
        }
        self.armed
            .retain(|a| !(a.fired && a.fault.persistence == Persistence::OneShot));
        firing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_fault_fires_on_the_counted_operation_only() {
        let mut plan = FaultPlan::default();
        plan.add(Fault::on(OpKind::Write).after(2));
        assert!(plan.on_operation(OpKind::Write).is_none());
        assert!(plan.on_operation(OpKind::Read).is_none());
        assert!(plan.on_operation(OpKind::Write).is_none());
        assert!(plan.on_operation(OpKind::Write).is_some());
        assert!(plan.on_operation(OpKind::Write).is_none());
        assert_eq!(plan.armed(), 0);
    }

    #[test]
    fn sticky_fault_keeps_firing() {
        let mut plan = FaultPlan::default();
        plan.add(
            Fault::on(OpKind::SyncData)
                .with_error(FaultError::NoSpace)
                .sticky(),
        );
        for _ in 0..3 {
            let firing = plan.on_operation(OpKind::SyncData).expect("fires");
            assert_eq!(firing.error, FaultError::NoSpace);
        }
        assert!(plan.on_operation(OpKind::Write).is_none());
    }

    #[test]
    fn power_cut_counts_every_kind() {
        let mut plan = FaultPlan::default();
        plan.add(Fault::power_cut_after(2));
        assert!(plan.on_operation(OpKind::Read).is_none());
        assert!(plan.on_operation(OpKind::SyncDir).is_none());
        assert!(plan.on_operation(OpKind::Namespace).is_some());
        assert!(plan.on_operation(OpKind::Read).is_some());
    }
}
