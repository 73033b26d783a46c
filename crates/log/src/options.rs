//! Options for opening a log.

/// How much damage `open` tolerates. spec: recovery.md#modes
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Any damage, a torn tail included, is an error; nothing is cut.
    AbsoluteConsistency,
    /// The unsynced tail of the active segment may be cut (and the cut is reported); damage
    /// anywhere else is an error. The default.
    #[default]
    TolerateTornTail,
}

/// What an open may do to the store directory. spec: recovery.md#read-only-open
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Open for writing; create the store when the directory is absent or empty. A directory
    /// that holds other files and no segment is refused.
    #[default]
    CreateOrOpen,
    /// Open an existing store for writing; refuse a directory that is not a store.
    Existing,
    /// Open an existing store for reading only: no lock, no write of any kind, damage reported
    /// and skipped in what is read instead of repaired. Works beside a live writer.
    ReadOnly,
}

/// When a commit returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Returns once the batch (and everything committed before it) is on stable storage:
    /// written and covered by an `fdatasync`, shared with concurrent commits.
    #[default]
    Sync,
    /// Returns once the batch is in the log's buffer; it becomes durable with a later `Sync`
    /// commit, [`crate::Log::flush`] or [`crate::Log::close`]. A crash may lose it, whole.
    Buffered,
}

/// How sealed segments are stored. spec: segment.md#compressed-segments
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Sealed segments stay as they were written. Segments compressed earlier stay
    /// compressed (a rewrite of one compresses it again).
    #[default]
    None,
    /// Reclaim rewrites every sealed segment not compressed yet into zstd blocks of about
    /// 8 KiB at this level (1 to 19; 3 is zstd's default).
    Zstd {
        /// The zstd compression level.
        level: i32,
    },
}

impl Compression {
    /// The zstd levels a store may compress at.
    pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

    /// zstd's default level.
    const DEFAULT_ZSTD_LEVEL: i32 = 3;

    /// zstd at `level`, refused (with the reason) outside [`Compression::ZSTD_LEVELS`]: the
    /// one check every way of choosing a level goes through.
    pub fn zstd(level: i32) -> Result<Compression, String> {
        let levels = Self::ZSTD_LEVELS;
        if !levels.contains(&level) {
            return Err(format!(
                "zstd level {level} is outside {} ..= {}",
                levels.start(),
                levels.end()
            ));
        }
        Ok(Compression::Zstd { level })
    }

    /// zstd at its default level, 3.
    pub const ZSTD: Compression = Compression::Zstd {
        level: Self::DEFAULT_ZSTD_LEVEL,
    };

    /// The level to compress a rewritten segment at, when it is compressed at all: the
    /// option's, or the default level for a segment that was compressed before.
    pub(crate) fn level_for(self, was_compressed: bool) -> Option<i32> {
        match self {
            Compression::Zstd { level } => Some(level),
            Compression::None => was_compressed.then_some(Self::DEFAULT_ZSTD_LEVEL),
        }
    }
}

/// Options for [`crate::Log::open`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LogOptions {
    /// Target size of a segment file in bytes; the active segment is sealed and a new one
    /// started when the next batch would not fit. Between 64 KiB and 1 GiB.
    pub segment_size_bytes: u64,
    /// Largest payload a record may have. At most 1 GiB.
    pub max_record_bytes: usize,
    /// One sparse index entry per this many bytes of a stream's data in a segment.
    pub index_interval_bytes: u32,
    /// Buffered bytes that trigger a write to the operating system without waiting for a
    /// sync commit.
    pub write_buffer_bytes: usize,
    /// What `open` tolerates.
    pub recovery_mode: RecoveryMode,
    /// Reserve space ahead of the appends (`fallocate`), so they never grow the file block by
    /// block. The first segment of a store gets
    /// [`first_preallocation_bytes`](Self::first_preallocation_bytes), and each time the data
    /// reaches the end of the reservation it doubles, up to `segment_size_bytes`, so a small
    /// store stays small on disk; later segments are reserved whole when created.
    pub preallocate: bool,
    /// The first preallocation step of a store's first segment (doubling from there). Setting
    /// it to `segment_size_bytes` reserves that segment whole up front too. 4 KiB to 1 GiB.
    pub first_preallocation_bytes: u64,
    /// With `preallocate`, the writer writes zeros into the reservation ahead of the data, this
    /// many bytes at a time, in the same write cycle as the data and before its sync. Commits
    /// then land in blocks the file system has already written, so their `fdatasync` has no
    /// unwritten extent to convert (on ext4 and XFS a fallocated extent is "unwritten" until
    /// written, and converting it costs a journal commit in every sync that touches it). The
    /// next step is written once less than half a step is left ahead of the data. 0 turns it
    /// off; otherwise 4 KiB to 64 MiB.
    pub zero_ahead_bytes: u64,
    /// Syncs of successive commit groups that may run at once (1 to 4). With 1, the next
    /// group is written only after the previous sync returns, and each group's write and sync
    /// run back to back; more lets its write and sync start while earlier syncs run, which
    /// helps on devices that serve syncs in parallel (on a virtual disk measured here, two or
    /// four made 64 committing sessions 0.6–0.7× as fast: see the README).
    pub max_concurrent_syncs: u32,
    /// Reclaim rewrites a sealed segment whose live records (those of streams not deleted,
    /// and catalog records) take less than this percentage of its record bytes: they are
    /// copied into a smaller file that replaces it. 0 turns rewriting off; at most 100.
    pub rewrite_below_live_percent: u32,
    /// Whether reclaim compresses sealed segments. Off by default.
    pub compression: Compression,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size_bytes: 64 << 20,
            max_record_bytes: 16 << 20,
            index_interval_bytes: 4096,
            write_buffer_bytes: 1 << 20,
            recovery_mode: RecoveryMode::TolerateTornTail,
            preallocate: true,
            first_preallocation_bytes: 16 << 10,
            zero_ahead_bytes: 1 << 20,
            max_concurrent_syncs: 1,
            rewrite_below_live_percent: 50,
            compression: Compression::None,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `LogOptions::default().with_...(...)`.
impl LogOptions {
    /// Sets [`segment_size_bytes`](Self::segment_size_bytes).
    #[must_use]
    pub fn with_segment_size_bytes(mut self, segment_size_bytes: u64) -> Self {
        self.segment_size_bytes = segment_size_bytes;
        self
    }

    /// Sets [`max_record_bytes`](Self::max_record_bytes).
    #[must_use]
    pub fn with_max_record_bytes(mut self, max_record_bytes: usize) -> Self {
        self.max_record_bytes = max_record_bytes;
        self
    }

    /// Sets [`index_interval_bytes`](Self::index_interval_bytes).
    #[must_use]
    pub fn with_index_interval_bytes(mut self, index_interval_bytes: u32) -> Self {
        self.index_interval_bytes = index_interval_bytes;
        self
    }

    /// Sets [`write_buffer_bytes`](Self::write_buffer_bytes).
    #[must_use]
    pub fn with_write_buffer_bytes(mut self, write_buffer_bytes: usize) -> Self {
        self.write_buffer_bytes = write_buffer_bytes;
        self
    }

    /// Sets [`recovery_mode`](Self::recovery_mode).
    #[must_use]
    pub fn with_recovery_mode(mut self, recovery_mode: RecoveryMode) -> Self {
        self.recovery_mode = recovery_mode;
        self
    }

    /// Sets [`preallocate`](Self::preallocate).
    #[must_use]
    pub fn with_preallocate(mut self, preallocate: bool) -> Self {
        self.preallocate = preallocate;
        self
    }

    /// Sets [`first_preallocation_bytes`](Self::first_preallocation_bytes).
    #[must_use]
    pub fn with_first_preallocation_bytes(mut self, first_preallocation_bytes: u64) -> Self {
        self.first_preallocation_bytes = first_preallocation_bytes;
        self
    }

    /// Sets [`zero_ahead_bytes`](Self::zero_ahead_bytes).
    #[must_use]
    pub fn with_zero_ahead_bytes(mut self, zero_ahead_bytes: u64) -> Self {
        self.zero_ahead_bytes = zero_ahead_bytes;
        self
    }

    /// Sets [`max_concurrent_syncs`](Self::max_concurrent_syncs).
    #[must_use]
    pub fn with_max_concurrent_syncs(mut self, max_concurrent_syncs: u32) -> Self {
        self.max_concurrent_syncs = max_concurrent_syncs;
        self
    }

    /// Sets [`rewrite_below_live_percent`](Self::rewrite_below_live_percent).
    #[must_use]
    pub fn with_rewrite_below_live_percent(mut self, percent: u32) -> Self {
        self.rewrite_below_live_percent = percent;
        self
    }
}

impl LogOptions {
    /// Sets [`compression`](Self::compression).
    #[must_use]
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }
}

impl LogOptions {
    pub(crate) fn check(&self) -> Result<(), String> {
        if !(64 << 10..=1 << 30).contains(&self.segment_size_bytes) {
            return Err(format!(
                "segment_size_bytes {} is outside 64 KiB ..= 1 GiB",
                self.segment_size_bytes
            ));
        }
        if self.max_record_bytes == 0 || self.max_record_bytes > 1 << 30 {
            return Err(format!(
                "max_record_bytes {} is outside 1 ..= 1 GiB",
                self.max_record_bytes
            ));
        }
        if !(4 << 10..=1 << 30).contains(&self.first_preallocation_bytes) {
            return Err(format!(
                "first_preallocation_bytes {} is outside 4 KiB ..= 1 GiB",
                self.first_preallocation_bytes
            ));
        }
        if self.zero_ahead_bytes != 0 && !(4 << 10..=64 << 20).contains(&self.zero_ahead_bytes) {
            return Err(format!(
                "zero_ahead_bytes {} is neither 0 nor within 4 KiB ..= 64 MiB",
                self.zero_ahead_bytes
            ));
        }
        if !(1..=4).contains(&self.max_concurrent_syncs) {
            return Err(format!(
                "max_concurrent_syncs {} is outside 1 ..= 4",
                self.max_concurrent_syncs
            ));
        }
        if self.rewrite_below_live_percent > 100 {
            return Err(format!(
                "rewrite_below_live_percent {} is above 100",
                self.rewrite_below_live_percent
            ));
        }
        if let Compression::Zstd { level } = self.compression {
            Compression::zstd(level)?;
        }
        if self.index_interval_bytes < 64 {
            return Err(format!(
                "index_interval_bytes {} is below 64",
                self.index_interval_bytes
            ));
        }
        Ok(())
    }
}
