//! The golden session-state checkpoints in `format-spec/vectors/` decode to the states
//! `format-spec/vectors/README.md` describes and re-encode to the same bytes, so the spec of
//! the checkpoint (`format-spec/cache.md#session-state`) cannot drift from the code.
//!
//! The files are made once from the sessions built below
//! (`SESSIONLOG_REGENERATE_VECTORS=1 cargo test -p sessionlog-session --test
//! checkpoint_matches_golden_vectors`, which writes only missing files) and then only read.
//! A change of the encoding bumps the checkpoint state version; the old files then stay as
//! fixtures of a version this build refuses.

use std::path::PathBuf;
use std::sync::Arc;

use sessionlog_session::tokens::{HeuristicCounter, TokenCounter};
use sessionlog_session::{
    EventInput, FormatVersion, RuleSet, Seq, Session, SessionHeader, SessionState, SurfaceOp,
    CHECKPOINT_STATE_VERSION,
};

const REGENERATE_ENV: &str = "SESSIONLOG_REGENERATE_VECTORS";
const MEASURED_FILE: &str = "session_state_v3_tokens.bin";
const PLAIN_FILE: &str = "session_state_v3_plain.bin";
/// The files of older state versions, kept as fixtures of versions this build refuses, so
/// a checkpoint an older build wrote is rebuilt: version 1 (whose usage ledger kept every
/// record) and version 2 (whose compaction locks were a section of their own), with the
/// version each holds.
const OLD_FILES: [(&str, u32); 4] = [
    ("session_state_v1_tokens.bin", 1),
    ("session_state_v1_plain.bin", 1),
    ("session_state_v2_tokens.bin", 2),
    ("session_state_v2_plain.bin", 2),
];

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../format-spec/vectors")
}

fn input(event_type: &str, data: &str) -> EventInput {
    EventInput::new(event_type, 1_700_000_000_000, data)
}

/// The session of the vectors (format-spec/vectors/README.md lists its events): one open
/// turn and step, an envelope and window, a user prompt, a settlement that called a tool
/// and got its result, a second settlement whose call is still pending, a replacement of
/// the prompt, and a compaction started and not ended.
fn golden_session(counter: Option<Arc<dyn TokenCounter>>) -> Session {
    let header = SessionHeader::new("golden", 1_700_000_000_000, Some("/work"));
    let mut session = match counter {
        Some(c) => Session::with_tokens(header, FormatVersion::dsh_v0(), c),
        None => Session::new(header, FormatVersion::dsh_v0()),
    };
    let append = SurfaceOp::Append;
    let inputs = [
        input("turn/start", r#"{"turn":1}"#),
        input("step/start", r#"{"turn":1,"step":1}"#),
        input(
            "request/header",
            r#"{"header":{"config":{"model":"m","provider":"p"},"system":"Be brief.","tools":"[bash]"},"reason":"initial"}"#,
        ),
        input("request/context", r#"{"provider":"p","model":"m","contextWindow":64000}"#),
        input(
            "user/message",
            r#"{"id":"u1","role":"user","content":[{"type":"text","text":"list the files"}],"source":{"kind":"user"}}"#,
        )
        .with_surface_op(append),
        input(
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":120,"outputTokens":9}}"#,
        )
        .with_surface_op(append),
        input(
            "tool/result",
            r#"{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a b"}]}]}}"#,
        )
        .with_surface_op(append),
        input(
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"id":"a2","role":"assistant","content":[{"type":"tool-call","id":"c2","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":150,"outputTokens":8,"cacheReadTokens":100}}"#,
        )
        .with_surface_op(append),
        input(
            "user/message",
            r#"{"id":"s1","role":"user","content":[{"type":"text","text":"ls"}],"source":{"kind":"user"}}"#,
        )
        .with_surface_op(SurfaceOp::Replace { start: Seq(4), end: Seq(4) })
        .with_sources(vec![Seq(4)]),
        input(
            "compaction/start",
            r#"{"compactionId":"k1","turn":1}"#,
        ),
    ];
    for input in inputs {
        if let Err(e) = session.try_append_with(input, RuleSet::Dsh) {
            panic!("golden session event refused: {e}");
        }
    }
    session
}

fn check(file: &str, counter: Option<Arc<dyn TokenCounter>>) -> SessionState {
    let session = golden_session(counter.clone());
    let mut built = Vec::new();
    session.state().encode_checkpoint(&mut built);
    let path = vectors_dir().join(file);
    if std::env::var_os(REGENERATE_ENV).is_some() && !path.exists() {
        std::fs::write(&path, &built).expect("write vector");
    }
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (see this file's docs)", path.display()));
    let state = SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), counter)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut again = Vec::new();
    state.encode_checkpoint(&mut again);
    assert_eq!(again, bytes, "{file}: re-encoding is not byte-identical");
    assert_eq!(
        built, bytes,
        "{file}: the golden session no longer encodes to the file"
    );
    assert_eq!(&state, session.state(), "{file}: decoded state differs");
    assert_eq!(bytes[4..8], CHECKPOINT_STATE_VERSION.to_le_bytes());
    // The values format-spec/vectors/README.md lists.
    assert_eq!(state.next_seq(), Seq(10));
    assert_eq!(state.surface(), [8, 5, 6, 7]);
    assert_eq!(state.replace_generation(), 1);
    assert_eq!(
        state.message_nodes().map(Seq::get).collect::<Vec<_>>(),
        [8, 5, 6, 7]
    );
    assert_eq!(state.latest_request_header(), Some(Seq(2)));
    assert_eq!(state.latest_request_context(), Some(Seq(3)));
    assert!(state.turn_open());
    assert_eq!(
        state
            .repair_closers()
            .expect("closers")
            .iter()
            .map(|e| e.event_type().to_owned())
            .collect::<Vec<_>>(),
        ["tool/result", "step/end", "turn/end"]
    );
    let ends = state.compaction_locks().closers(10, 1_700_000_000_000);
    assert_eq!(
        ends.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
        [format!(
            r#"{{"compactionId":"k1","turn":1,"error":{:?}}}"#,
            sessionlog_session::compaction::INTERRUPTED_COMPACTION
        )],
        "the open lock, its replacement not written"
    );
    state
}

#[test]
fn a_checkpoint_with_tokens_matches_its_golden_vector() {
    let state = check(MEASURED_FILE, Some(Arc::new(HeuristicCounter)));
    let view = state.token_view().expect("tokens measured");
    let estimates: Vec<u32> = state
        .surface()
        .iter()
        .map(|s| state.node_estimate(*s).unwrap_or(0))
        .collect();
    assert_eq!(
        view.surface_estimate.tokens,
        estimates.iter().map(|e| u64::from(*e)).sum::<u64>()
    );
    assert_eq!(view.cumulative.requests(), 2);
    let ledger = state.usage_ledger().expect("tokens measured");
    let settled = ledger.settlements().usage();
    assert_eq!(
        (settled.input, settled.output, settled.cache_read),
        (270, 17, 100)
    );
    assert_eq!(ledger.auxiliary().requests(), 0);
    assert_eq!(ledger.last_settlement().map(|r| r.seq), Some(Seq(7)));
    assert_eq!(ledger.unreadable_count(), 0);
    assert_eq!(view.pressure.anchored_on, Some(Seq(7)));
    assert_eq!(view.pressure.context_window, Some(64000));
    assert_eq!(estimates, [5, 6, 5, 6]);
    assert_eq!(view.envelope_estimate.tokens, 9);
    assert_eq!(view.pressure.estimated_prompt_tokens.tokens, 253);
    assert_eq!(view.pressure.estimated_delta_since_anchor, 3);
    assert_eq!(
        view.pressure.anchor_prompt_tokens.map(|t| t.tokens),
        Some(250)
    );
}

#[test]
fn a_checkpoint_without_tokens_matches_its_golden_vector() {
    let state = check(PLAIN_FILE, None);
    assert!(state.token_view().is_none());
    assert!(state
        .surface()
        .iter()
        .all(|s| state.node_estimate(*s) == Some(0)));
}

#[test]
fn checkpoints_of_an_older_state_version_are_refused() {
    for (file, version) in OLD_FILES {
        let path = vectors_dir().join(file);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            bytes[4..8],
            version.to_le_bytes(),
            "{file} is of state version {version}"
        );
        let counter: Option<Arc<dyn TokenCounter>> = file
            .contains("tokens")
            .then(|| Arc::new(HeuristicCounter) as Arc<dyn TokenCounter>);
        assert!(
            SessionState::decode_checkpoint(&bytes, FormatVersion::dsh_v0(), counter).is_err(),
            "{file}: a state version {version} checkpoint must be refused (and rebuilt)"
        );
    }
}
