//! The codec's one error type. Every variant names the structure that failed.

use std::fmt;

/// The on-disk structure a [`FormatError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Structure {
    /// The fixed header at offset 0 of every segment file.
    SegmentHeader,
    /// The fixed header that opens a batch frame.
    BatchHeader,
    /// A whole batch frame (header, records, trailer).
    Batch,
    /// One record inside a batch.
    Record,
    /// The footer body of a sealed segment.
    Footer,
    /// The fixed trailer at the end of a sealed segment.
    FooterTrailer,
    /// A segment file name.
    FileName,
    /// The block directory of a compressed segment.
    BlockDirectory,
    /// One stored block of a compressed segment.
    Block,
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Structure::SegmentHeader => "segment header",
            Structure::BatchHeader => "batch header",
            Structure::Batch => "batch",
            Structure::Record => "record",
            Structure::Footer => "footer",
            Structure::FooterTrailer => "footer trailer",
            Structure::FileName => "segment file name",
            Structure::BlockDirectory => "block directory",
            Structure::Block => "compressed block",
        })
    }
}

/// Why bytes failed to decode. Offsets, where present, are relative to the slice given to the
/// decoder; the log layer adds the segment and absolute offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The slice ends before the structure does.
    #[error("{structure} is truncated: needs {needed} bytes, {available} available")]
    Truncated {
        /// What was being decoded.
        structure: Structure,
        /// Bytes the structure needs.
        needed: usize,
        /// Bytes that were there.
        available: usize,
    },
    /// The bytes where a structure should start are all zero: nothing was written there.
    #[error("{structure} is all zero bytes (nothing was written there)")]
    Zeroed {
        /// What was expected.
        structure: Structure,
    },
    /// The magic number does not match.
    #[error("{structure} has bad magic {found:#x}")]
    BadMagic {
        /// What was being decoded.
        structure: Structure,
        /// The bytes found, as a little-endian integer.
        found: u64,
    },
    /// A checksum does not match the bytes it covers.
    #[error("{structure} checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// What was being decoded.
        structure: Structure,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum computed from the bytes.
        computed: u32,
    },
    /// The format version is not one this build reads.
    #[error("unsupported format version {found} (this build reads versions 1 to {supported}): open the store with a newer sessionlog")]
    UnsupportedVersion {
        /// Version on disk.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A field holds a value the format forbids.
    #[error("{structure} field `{field}` is invalid: {reason}")]
    InvalidField {
        /// What was being decoded.
        structure: Structure,
        /// The field name as in the spec.
        field: &'static str,
        /// Why the value is not allowed.
        reason: String,
    },
}

impl FormatError {
    pub(crate) fn invalid(
        structure: Structure,
        field: &'static str,
        reason: impl Into<String>,
    ) -> Self {
        FormatError::InvalidField {
            structure,
            field,
            reason: reason.into(),
        }
    }
}

impl FormatError {
    /// The class of this error: bytes from a newer format version are an environment
    /// problem (a newer build reads them); every other decoding failure is damage.
    pub fn class(&self) -> crate::ErrorClass {
        match self {
            FormatError::UnsupportedVersion { .. } => crate::ErrorClass::Environment,
            _ => crate::ErrorClass::Damaged,
        }
    }
}
