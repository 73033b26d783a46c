//! Decoding a checkpoint never panics: not on random bytes, not on any truncation of a valid
//! checkpoint, not on bit flips throughout one. A truncation is always refused, and a
//! checkpoint of another state version, format version or token counter is refused as such.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{
    CheckpointError, FormatVersion, SessionState, CHECKPOINT_MAGIC, CHECKPOINT_STATE_VERSION,
};

fn heuristic() -> Option<Arc<dyn TokenCounter>> {
    Some(Arc::new(HeuristicCounter))
}

/// A counter with another name (and so other estimates).
#[derive(Debug)]
struct Words;

impl TokenCounter for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn count(&self, text: &str) -> u32 {
        u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
    }
}

/// The checkpoint of a random agent session that measures tokens.
fn checkpoint(steps: &[common::AgentStep]) -> (SessionState, Vec<u8>) {
    let session = common::agent_session(steps);
    let mut state = SessionState::with_tokens(
        session.header().clone(),
        session.version().clone(),
        Arc::new(HeuristicCounter),
    );
    let events = session.events();
    for (i, event) in events.iter().enumerate() {
        state
            .append(event, sessionlog_session::RuleSet::Dsh, &&events[..i])
            .expect("refold");
    }
    let mut bytes = Vec::new();
    state.encode_checkpoint(&mut bytes);
    (state, bytes)
}

/// Whatever decodes must be usable: every accessor and a restart-repair plan run without
/// panicking.
fn exercise(state: &SessionState) {
    let _ = state.surface();
    let _ = state.message_nodes().count();
    let _ = state.token_view();
    let _ = state.repair_closers();
    let _ = state.position(0).open_turn();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for counter in [None, heuristic()] {
            if let Ok(state) = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), counter) {
                exercise(&state);
            }
        }
    }

    #[test]
    fn random_bytes_after_a_valid_preamble_never_panic(tail in prop::collection::vec(any::<u8>(), 0..512)) {
        // Past the magic and version, so the body decoders see the random bytes.
        let (_, valid) = checkpoint(&[]);
        let mut bytes = valid[..8].to_vec();
        bytes.extend_from_slice(&tail);
        if let Ok(state) = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), heuristic()) {
            exercise(&state);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn every_truncation_is_refused_and_bit_flips_are_survived(
        steps in prop::collection::vec(common::agent_step(), 0..40),
        stride in 1usize..7,
    ) {
        let (state, bytes) = checkpoint(&steps);
        let decoded = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), heuristic());
        prop_assert_eq!(decoded.as_ref(), Ok(&state));
        for cut in 0..bytes.len() {
            let result = SessionState::decode_checkpoint(&bytes[..cut], FormatVersion::dsh_v0(), heuristic());
            prop_assert!(result.is_err(), "a checkpoint cut to {} bytes decoded", cut);
        }
        // Every bit of the first 512 bytes (identity, header, surface), then every
        // `stride`-th bit, so long checkpoints stay cheap.
        let bits = (0..bytes.len() * 8).filter(|b| *b < 4096 || b % (stride * 8 + 1) == 0);
        for bit in bits {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Ok(state) = SessionState::decode_checkpoint(&flipped, FormatVersion::dsh_v0(), heuristic()) {
                exercise(&state);
            }
        }
    }
}

#[test]
fn a_checkpoint_of_another_state_version_is_refused() {
    let (_, mut bytes) = checkpoint(&[common::AgentStep::User]);
    assert_eq!(bytes[..4], CHECKPOINT_MAGIC.to_le_bytes());
    bytes[4..8].copy_from_slice(&(CHECKPOINT_STATE_VERSION + 1).to_le_bytes());
    assert_eq!(
        SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), heuristic()),
        Err(CheckpointError::StateVersion {
            found: CHECKPOINT_STATE_VERSION + 1,
            expected: CHECKPOINT_STATE_VERSION
        })
    );
}

#[test]
fn a_checkpoint_of_another_format_version_is_refused() {
    let (_, bytes) = checkpoint(&[common::AgentStep::User]);
    for version in [
        FormatVersion::current(),
        // Same name, another vocabulary: the fingerprint tells them apart.
        FormatVersion::dsh_v0().with_known_type("acme/plugin-event"),
    ] {
        let result = SessionState::decode_checkpoint(&bytes, version, heuristic());
        assert!(
            matches!(result, Err(CheckpointError::FormatVersion { .. })),
            "{result:?}"
        );
    }
}

#[test]
fn a_checkpoint_of_another_token_counter_is_refused() {
    let (_, bytes) = checkpoint(&[common::AgentStep::User]);
    for counter in [None, Some(Arc::new(Words) as Arc<dyn TokenCounter>)] {
        let result = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), counter);
        assert!(
            matches!(result, Err(CheckpointError::TokenCounter { .. })),
            "{result:?}"
        );
    }
    let plain = common::agent_session(&[common::AgentStep::User]);
    let mut bytes = Vec::new();
    plain.state().encode_checkpoint(&mut bytes);
    let result = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), heuristic());
    assert!(
        matches!(
            result,
            Err(CheckpointError::TokenCounter { found: None, .. })
        ),
        "{result:?}"
    );
}

#[test]
fn bytes_without_the_magic_are_not_a_checkpoint() {
    for bytes in [&b""[..], b"SLS", b"SLPC\x01\x00\x00\x00"] {
        assert_eq!(
            SessionState::decode_checkpoint(bytes, FormatVersion::dsh_v0(), None),
            Err(CheckpointError::NotACheckpoint)
        );
    }
}
