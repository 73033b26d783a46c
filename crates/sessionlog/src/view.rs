//! What [`Store::view`](crate::Store::view) returns beside the header: the surface with the
//! message each node contributes, and the latest request envelope. Both are read from the
//! log by seq after folding the session's state; they are results, not a second fold.

use sessionlog_session::Seq;

/// The current surface and the model history derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurfaceView {
    pub(crate) nodes: Vec<Seq>,
    pub(crate) messages: Vec<String>,
    pub(crate) replace_generation: u64,
}

impl SurfaceView {
    /// The surface nodes (event seqs), in order.
    pub fn nodes(&self) -> &[Seq] {
        &self.nodes
    }

    /// How many replacements have been applied.
    pub fn replace_generation(&self) -> u64 {
        self.replace_generation
    }

    /// The model history: the message of every surface node that contributes one,
    /// verbatim (stored key order).
    pub fn derive_messages(&self) -> Vec<&str> {
        self.messages.iter().map(String::as_str).collect()
    }

    /// [`SurfaceView::derive_messages`] as one JSON array.
    pub fn derive_messages_json(&self) -> String {
        sessionlog_session::messages_json(&self.messages)
    }
}

/// The latest `request/header` and `request/context` payloads: the envelope and tool schemas
/// of the next provider request, and its context window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestView {
    pub(crate) header: Option<String>,
    pub(crate) context: Option<String>,
}

impl RequestView {
    /// The latest `request/header` data, verbatim.
    pub fn header(&self) -> Option<&str> {
        self.header.as_deref()
    }

    /// The latest `request/context` data, verbatim.
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }
}
