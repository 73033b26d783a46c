//! A session state keeps its usage ledger bounded: however many requests the session made,
//! it holds exact totals, the newest settlement and only the newest `LEDGER_RECENT` records,
//! and its checkpoint restores exactly that; a token projection over the same events keeps
//! every record, with the same totals.

use std::sync::Arc;

use sessionlog_session::tokens::{HeuristicCounter, TokenCounter, TokenProjection, LEDGER_RECENT};
use sessionlog_session::{
    EventInput, FormatVersion, RuleSet, SessionHeader, SessionState, SurfaceOp,
};

const TURNS: u64 = 3 * LEDGER_RECENT as u64 + 5;

fn turn(n: u64) -> Vec<EventInput> {
    let input = |t: &str, data: String| EventInput::new(t, 1_700_000_000_000, data);
    let mut out = vec![
        input("turn/start", format!(r#"{{"turn":{n}}}"#)),
        input("step/start", format!(r#"{{"turn":{n},"step":1}}"#)),
        input(
            "user/message",
            format!(
                r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"question {n}"}}],"source":{{"kind":"user"}}}}"#
            ),
        )
        .with_surface_op(SurfaceOp::Append),
        input(
            "assistant/message",
            format!(
                r#"{{"turn":{n},"step":1,"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"text","text":"answer {n}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{{"inputTokens":{},"outputTokens":7}}}}"#,
                100 + n
            ),
        )
        .with_surface_op(SurfaceOp::Append),
    ];
    if n % 10 == 0 {
        // A usage object in no known shape: counted as unreadable, in no total.
        out.push(
            input(
                "assistant/message",
                format!(
                    r#"{{"turn":{n},"step":1,"message":{{"id":"b{n}","role":"assistant","content":[{{"type":"text","text":"more"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{{"tokens":3}}}}"#
                ),
            )
            .with_surface_op(SurfaceOp::Append),
        );
    }
    out.push(input("step/end", format!(r#"{{"turn":{n},"step":1}}"#)));
    out.push(input(
        "turn/end",
        format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
    ));
    out
}

#[test]
fn usage_ledger_of_the_state_stays_bounded() {
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let header = SessionHeader::new("ledger", 1_700_000_000_000, None);
    let mut state = SessionState::with_tokens(header, FormatVersion::current(), counter.clone());
    let mut projection = TokenProjection::new(counter.clone(), FormatVersion::current());
    let mut events = Vec::new();
    for n in 1..=TURNS {
        for input in turn(n) {
            let event = input
                .into_event(state.next_seq().get())
                .expect("valid event");
            state
                .append(&event, RuleSet::Native, &events.as_slice())
                .expect("accepted");
            projection.apply(&event).expect("projected");
            events.push(event);
        }
    }
    let kept = state.usage_ledger().expect("tokens measured");
    let full = projection.ledger();
    assert_eq!(
        full.requests().len() as u64,
        TURNS,
        "one settlement per turn"
    );
    assert!(kept.is_bounded() && !full.is_bounded());
    assert_eq!(kept.requests().len(), LEDGER_RECENT);
    assert_eq!(
        kept.requests(),
        &full.requests()[full.requests().len() - LEDGER_RECENT..]
    );
    assert_eq!(kept.settlements(), full.settlements());
    assert_eq!(kept.settlements().requests(), TURNS);
    assert_eq!(kept.auxiliary(), full.auxiliary());
    assert_eq!(kept.last_settlement(), full.last_settlement());
    assert_eq!(kept.unreadable_count(), TURNS / 10);
    assert_eq!(kept.unreadable_count(), full.unreadable().len() as u64);
    assert_eq!(state.token_view(), Some(projection.view()));

    let mut bytes = Vec::new();
    state.encode_checkpoint(&mut bytes);
    let restored = SessionState::decode_checkpoint(&bytes, FormatVersion::current(), Some(counter))
        .expect("decodes");
    assert_eq!(restored, state);
}
