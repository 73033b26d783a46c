//! Compaction (placeholder while it is written).
