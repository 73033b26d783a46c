//! [`SessionStore`](sessionlog_session::SessionStore) implementations other than the engine
//! itself: [`MemoryStore`] (tests, ephemeral agents), [`SqliteStore`] (one row per event, the
//! store most agent frameworks use today; layout in `SQLITE.md`) and [`DshDirStore`]
//! (DeepSeek Harness's own `session.jsonl` tree, read and written in place).
//!
//! All three validate appends with the session rules through a cached, folded
//! [`Session`](sessionlog_session::Session) per open session.

#![forbid(unsafe_code)]

mod dsh_dir;
mod memory;
mod sqlite;

pub use dsh_dir::{
    decode_session_dir, encode_session_dir, newest_session_file, DshDirStore, SESSION_FILE,
};
pub use memory::MemoryStore;
pub use sqlite::SqliteStore;
