//! Raw bytes as a session-state checkpoint. Byte 0 picks the format version (bit 0: current,
//! else DSH V0) and whether tokens are measured (bit 1); the rest is the checkpoint. Decoding
//! never panics; a decoded state is usable (accessors, restart closers) and re-encodes to a
//! checkpoint that decodes to the same state and encodes to the same bytes.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{FormatVersion, SessionState};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let version = if mode & 1 != 0 {
        FormatVersion::current()
    } else {
        FormatVersion::dsh_v0()
    };
    let counter: Option<Arc<dyn TokenCounter>> =
        (mode & 2 != 0).then(|| Arc::new(HeuristicCounter) as Arc<dyn TokenCounter>);
    let Ok(state) = SessionState::decode_checkpoint(bytes, version.clone(), counter.clone()) else {
        return;
    };
    let _ = state.message_nodes().count();
    let _ = state.token_view();
    let _ = state.repair_closers();
    let mut encoded = Vec::new();
    state.encode_checkpoint(&mut encoded);
    let again = match SessionState::decode_checkpoint(&encoded, version, counter) {
        Ok(again) => again,
        Err(e) => panic!("a re-encoded checkpoint does not decode: {e}"),
    };
    assert_eq!(again, state, "a checkpoint round trip changed the state");
    let mut twice = Vec::new();
    again.encode_checkpoint(&mut twice);
    assert_eq!(twice, encoded, "checkpoint encoding is not stable");
});
