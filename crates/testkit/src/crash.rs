//! What a power loss leaves behind.
//!
//! The rules, for each file that still has a durable directory entry after the crash:
//! its contents are the durable image plus a subset of its unsynced changes (writes and size
//! changes), applied in their original order. At most one kept write per file is *torn*:
//! either only a prefix of its sectors lands (cut at a [`crate::SimConfig::sector_size`]
//! boundary), or — as with delayed allocation — the file grows to cover it but the new bytes
//! read as zeros. Unsynced directory changes (creations, removals, renames) each survive or
//! revert; a rename survives whole or not at all. Files whose entry does not survive are gone.
//!
//! The subsets are drawn from the caller's RNG, so a seed reproduces a crash exactly. The
//! default policy mixes four shapes per file (lose all, keep all, keep a prefix, keep a random
//! subset) so that both realistic and adversarial states come up often.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use rand::Rng;

use crate::sim::{apply_set_len, apply_write, InodeId, PendingOp, State};

/// Which unsynced changes a crash keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Survival {
    /// For each file (or for the directory changes), one of: none, all, a prefix in order, or
    /// an arbitrary subset — chosen by the RNG.
    Random,
    /// Every unsynced change lands: the state a process crash (not a power loss) leaves.
    KeepAll,
    /// No unsynced change lands: exactly the durable state.
    LoseAll,
}

/// How a simulated power loss treats unsynced state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrashPolicy {
    /// Unsynced file writes and size changes.
    pub file_changes: Survival,
    /// Unsynced directory changes.
    pub dir_changes: Survival,
    /// Chance that one kept write of a file is torn.
    pub tear_probability: f64,
    /// Given a tear, the chance that it lands as zeros (size grown, data missing) rather than
    /// as a sector-aligned prefix.
    pub zero_fill_probability: f64,
}

impl Default for CrashPolicy {
    fn default() -> Self {
        CrashPolicy {
            file_changes: Survival::Random,
            dir_changes: Survival::Random,
            tear_probability: 0.5,
            zero_fill_probability: 0.3,
        }
    }
}

impl CrashPolicy {
    /// Only what was synced survives.
    pub fn lose_everything_unsynced() -> CrashPolicy {
        CrashPolicy {
            file_changes: Survival::LoseAll,
            dir_changes: Survival::LoseAll,
            tear_probability: 0.0,
            zero_fill_probability: 0.0,
        }
    }

    /// Everything written survives, untorn: a process kill with the page cache intact.
    pub fn keep_everything_written() -> CrashPolicy {
        CrashPolicy {
            file_changes: Survival::KeepAll,
            dir_changes: Survival::KeepAll,
            tear_probability: 0.0,
            zero_fill_probability: 0.0,
        }
    }
}

/// How one kept write was torn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// Only `[offset, offset + kept)` landed; `kept` ends at a sector boundary.
    SectorPrefix { offset: u64, len: u64, kept: u64 },
    /// The file grew to cover `[offset, offset + len)` but the bytes past the old end read as
    /// zeros; bytes before the old end kept their old contents.
    ZeroFilled { offset: u64, len: u64 },
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    /// The file's path after the crash.
    pub path: PathBuf,
    /// Unsynced writes and size changes it had.
    pub unsynced_ops: usize,
    /// How many of them landed (a torn write counts as landed).
    pub kept_ops: usize,
    /// The torn write, if any.
    pub tear: Option<Tear>,
    /// Size after the crash.
    pub len: u64,
}

/// A description of one simulated power loss, for failure messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Every surviving file, by path.
    pub files: Vec<FileOutcome>,
    /// Unsynced directory changes before the crash.
    pub unsynced_dir_changes: usize,
    /// How many of them survived.
    pub kept_dir_changes: usize,
    /// Files that existed (by name) before the crash and do not after it.
    pub vanished: Vec<PathBuf>,
}

impl CrashReport {
    /// Whether any unsynced change (of a file or directory) was lost or torn.
    pub fn lost_anything(&self) -> bool {
        self.kept_dir_changes < self.unsynced_dir_changes
            || self
                .files
                .iter()
                .any(|f| f.kept_ops < f.unsynced_ops || f.tear.is_some())
    }
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "power loss: kept {}/{} unsynced directory changes",
            self.kept_dir_changes, self.unsynced_dir_changes
        )?;
        for file in &self.files {
            write!(
                f,
                "  {}: {} bytes, kept {}/{} unsynced ops",
                file.path.display(),
                file.len,
                file.kept_ops,
                file.unsynced_ops
            )?;
            if let Some(tear) = file.tear {
                write!(f, ", torn {tear:?}")?;
            }
            writeln!(f)?;
        }
        for path in &self.vanished {
            writeln!(f, "  {}: vanished", path.display())?;
        }
        Ok(())
    }
}

/// Chooses which of `count` ordered changes survive.
fn choose_kept<R: Rng + ?Sized>(rng: &mut R, survival: Survival, count: usize) -> Vec<bool> {
    match survival {
        Survival::KeepAll => vec![true; count],
        Survival::LoseAll => vec![false; count],
        Survival::Random if count == 0 => Vec::new(),
        Survival::Random => match rng.gen_range(0..4) {
            0 => vec![false; count],
            1 => vec![true; count],
            2 => {
                let prefix = rng.gen_range(0..=count);
                (0..count).map(|i| i < prefix).collect()
            }
            _ => {
                let p: f64 = rng.gen();
                (0..count).map(|_| rng.gen_bool(p)).collect()
            }
        },
    }
}

/// Replaces `state`'s files and entries with what survives a power loss.
pub(crate) fn power_loss<R: Rng + ?Sized>(
    state: &mut State,
    rng: &mut R,
    policy: &CrashPolicy,
) -> CrashReport {
    let mut report = CrashReport {
        unsynced_dir_changes: state.pending_dir_changes.len(),
        ..CrashReport::default()
    };

    let mut entries = state.durable_entries.clone();
    let kept = choose_kept(rng, policy.dir_changes, state.pending_dir_changes.len());
    for (change, keep) in state.pending_dir_changes.iter().zip(kept) {
        if keep {
            report.kept_dir_changes += 1;
            for (path, inode) in &change.entries {
                match inode {
                    Some(id) => entries.insert(path.clone(), *id),
                    None => entries.remove(path),
                };
            }
        }
    }
    report.vanished = state
        .entries
        .keys()
        .filter(|p| !entries.contains_key(*p))
        .cloned()
        .collect();

    // Each surviving inode is recomputed once, even if two names reach it.
    let mut images: BTreeMap<InodeId, Vec<u8>> = BTreeMap::new();
    for (path, id) in &entries {
        if images.contains_key(id) {
            continue;
        }
        let inode = &state.inodes[id];
        let (image, mut outcome) = surviving_image(
            &inode.durable,
            &inode.pending,
            rng,
            policy,
            state.config.sector_size,
        );
        outcome.path = path.clone();
        report.files.push(outcome);
        images.insert(*id, image);
    }

    state.inodes = images
        .into_iter()
        .map(|(id, image)| {
            let inode = crate::sim::Inode {
                written: image.clone(),
                durable: image,
                pending: Vec::new(),
            };
            (id, inode)
        })
        .collect();
    state.entries = entries.clone();
    state.durable_entries = entries;
    state.pending_dir_changes.clear();
    report
}

/// The durable image plus the kept unsynced ops, with at most one torn write.
fn surviving_image<R: Rng + ?Sized>(
    durable: &[u8],
    pending: &[PendingOp],
    rng: &mut R,
    policy: &CrashPolicy,
    sector_size: u64,
) -> (Vec<u8>, FileOutcome) {
    let kept = choose_kept(rng, policy.file_changes, pending.len());
    let kept_writes: Vec<usize> = (0..pending.len())
        .filter(|&i| kept[i] && matches!(pending[i], PendingOp::Write { .. }))
        .collect();
    let torn_index = if !kept_writes.is_empty() && rng.gen_bool(policy.tear_probability) {
        // The last landed write is the likeliest to be in flight; any other may tear too.
        if rng.gen_bool(0.5) {
            kept_writes.last().copied()
        } else {
            Some(kept_writes[rng.gen_range(0..kept_writes.len())])
        }
    } else {
        None
    };
    let zero_fill = torn_index.is_some() && rng.gen_bool(policy.zero_fill_probability);

    let mut image = durable.to_vec();
    let mut tear = None;
    for (i, op) in pending.iter().enumerate() {
        if !kept[i] {
            continue;
        }
        match op {
            PendingOp::SetLen { len } => apply_set_len(&mut image, *len),
            PendingOp::Write { offset, data } if Some(i) == torn_index => {
                tear = tear_write(&mut image, *offset, data, zero_fill, sector_size, rng);
            }
            PendingOp::Write { offset, data } => apply_write(&mut image, *offset, data),
        }
    }
    let outcome = FileOutcome {
        path: PathBuf::new(),
        unsynced_ops: pending.len(),
        kept_ops: kept.iter().filter(|k| **k).count(),
        tear,
        len: image.len() as u64,
    };
    (image, outcome)
}

/// Applies a torn version of one write. A write inside one sector cannot tear (sector writes
/// are atomic) and lands whole unless zero-filled.
fn tear_write<R: Rng + ?Sized>(
    image: &mut Vec<u8>,
    offset: u64,
    data: &[u8],
    zero_fill: bool,
    sector_size: u64,
    rng: &mut R,
) -> Option<Tear> {
    let len = data.len() as u64;
    let end = offset + len;
    if zero_fill {
        if (image.len() as u64) < end {
            apply_set_len(image, end);
        }
        return Some(Tear::ZeroFilled { offset, len });
    }
    let first_boundary = (offset / sector_size + 1) * sector_size;
    let cuts: Vec<u64> = std::iter::once(offset)
        .chain((first_boundary..end).step_by(sector_size as usize))
        .collect();
    if cuts.len() == 1 {
        apply_write(image, offset, data);
        return None;
    }
    let cut = cuts[rng.gen_range(0..cuts.len())];
    let kept = cut - offset;
    if kept > 0 {
        apply_write(image, offset, &data[..kept as usize]);
    }
    Some(Tear::SectorPrefix { offset, len, kept })
}
