//! Sessions for sessionlog: the pure semantic core.
//!
//! A session is an append-only, gap-free sequence of typed events ([`Event`]) with
//! lossless JSON payloads ([`json`]). Surface events form the ordered surface, which
//! replacements shadow without deleting anything; [`Session::derive_messages`] projects
//! the model history from it. Restart repair closes an open final turn with new events
//! ([`Session::repair`]). DeepSeek Harness JSONL files import and export losslessly
//! ([`dsh`]), and [`codec`] maps events to log records. Nothing here does file I/O.

#![forbid(unsafe_code)]

pub mod build;
mod checkpoint;
mod chunks;
pub mod codec;
pub mod compaction;
pub mod dsh;
mod error;
mod event;
mod header;
pub mod json;
mod lookback;
pub mod migrate;
mod prepare;
mod repair;
pub mod seq_hash;
mod session;
mod state;
pub mod store_trait;
mod surface;
pub mod tokens;
pub mod typed;
mod upgrade;
mod validate;
mod version;
pub mod zstd_file;

pub use build::{BuildEvent, Position};
pub use checkpoint::{CheckpointError, CHECKPOINT_MAGIC, CHECKPOINT_STATE_VERSION};
pub use chunks::PackedLines;
pub use codec::{
    decode_event, decode_header, decode_stored_event, encode_event, encode_event_into,
    encode_header, is_surface_kind, kind_tag,
};
pub use dsh::{
    event_for_format, export_dsh, export_format, export_jsonl, file_header, header_for_format,
    import_and_export, import_and_export_to, import_jsonl, needs_migration, ChildFact, DshImport,
    ExportOptions, FormatChoice, ImportOptions, TailCut,
};
pub use error::{Error, Rule, ValidationError};
pub use event::{Event, EventInput, Seq, SurfaceOp};
pub use header::SessionHeader;
pub use lookback::WithPending;
pub use prepare::{chunk_head, LoadPreparer, PreparedEvent, StoredChunk};
pub use repair::{TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN};
pub use session::{
    derive_message, derive_message_content, derive_surface_content, messages_json, Session,
};
pub use sessionlog_format::ErrorClass;
pub use state::{LookBack, SessionState};
pub use store_trait::{NewEvent, SessionStore, StoreError, StoreResult};
pub use surface::Surface;
pub use upgrade::{needs_upgrade, upgrade_event};
pub use validate::RuleSet;
pub use version::{
    DshFormat, FormatVersion, MessageLocation, MessageRule, SurfaceType, DSH_FORMAT_V0_ADDED_TYPES,
    DSH_FORMAT_V0_LEGACY_TYPES, DSH_V0_KNOWN_TYPES,
};
