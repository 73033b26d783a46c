//! Token measurement and compaction benchmarks.
//!
//! - `tokens/incremental_one_event` vs `tokens/recount_from_scratch`: measuring a
//!   1,000,000-event generated session after one more event, through the projection's
//!   cached per-node estimates, against re-counting every derived message. Target: the
//!   incremental path ≥ 20× faster (compare the two in the same run).
//! - `compaction/compact_200k_tokens`: planning and building a summary compaction of a
//!   surface of about 200k estimated tokens, appending its events to the session and
//!   folding them into the projection, with a summarizer that returns a fixed text (so the
//!   summarizer's own cost is excluded). Target ≤ 50 ms.
//!
//! Data comes from a fixed pattern (no randomness), so runs are comparable.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use sessionlog_session::compaction::{
    compact, CompactionContext, CompactionOutcome, CompactionPolicy, Summarizer, SummarizerError,
    Summary, SummaryRequest,
};
use sessionlog_session::json::JsonRef;
use sessionlog_session::tokens::{visible_text, HeuristicCounter, TokenCounter, TokenProjection};
use sessionlog_session::{EventInput, FormatVersion, Session, SessionHeader, SurfaceOp};

const EVENTS: u64 = 1_000_000;

fn user(n: u64, words: usize) -> EventInput {
    let text = "token ".repeat(words);
    EventInput::new(
        "user/message",
        1000,
        format!(r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#),
    )
    .with_surface_op(SurfaceOp::Append)
}

fn assistant(n: u64) -> EventInput {
    EventInput::new(
        "assistant/message",
        1000,
        format!(r#"{{"turn":1,"step":1,"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"text","text":"running the tool now"}},{{"type":"tool-call","id":"c{n}","name":"bash","arguments":"{{\"command\":\"ls -la\"}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{{"inputTokens":{n},"outputTokens":12}}}}"#),
    )
    .with_surface_op(SurfaceOp::Append)
}

fn result(n: u64, words: usize) -> EventInput {
    let text = "output ".repeat(words);
    EventInput::new(
        "tool/result",
        1000,
        format!(r#"{{"turn":1,"step":1,"message":{{"id":"r{n}","role":"user","source":{{"kind":"tool","callId":"c{n}"}},"content":[{{"type":"tool-result","toolCallId":"c{n}","content":[{{"type":"text","text":"{text}"}}]}}]}}}}"#),
    )
    .with_surface_op(SurfaceOp::Append)
}

fn todo(n: u64) -> EventInput {
    EventInput::new(
        "todo/write",
        1000,
        format!(r#"{{"todos":[{{"content":"step {n}","status":"pending"}}]}}"#),
    )
}

/// One exchange: a structural event, a user message, a settlement, a tool result.
fn exchange(n: u64, words: usize) -> [EventInput; 4] {
    [todo(n), user(n, words), assistant(n), result(n, words)]
}

fn session_of(events: u64, words: usize) -> Session {
    let mut session = Session::new(
        SessionHeader::new("bench", 0, Some("/bench")),
        FormatVersion::dsh_v0(),
    );
    // Turn 1 and its step 1 stay open: every exchange below belongs to them.
    for input in [
        EventInput::new("turn/start", 1000, r#"{"turn":1}"#),
        EventInput::new("step/start", 1000, r#"{"turn":1,"step":1}"#),
    ] {
        session.try_append(input).expect("opening accepted");
    }
    let mut n = 0;
    while session.next_seq().get() < events {
        for input in exchange(n, words) {
            session.try_append(input).expect("generated event accepted");
        }
        n += 1;
    }
    session
}

fn recount(session: &Session, counter: &dyn TokenCounter) -> u64 {
    session
        .derive_messages()
        .iter()
        .map(|m| {
            u64::from(counter.count(&visible_text(JsonRef::new(m))) + counter.message_overhead())
        })
        .sum()
}

fn bench_tokens(c: &mut Criterion) {
    let session = session_of(EVENTS, 12);
    let counter: Arc<dyn TokenCounter> = Arc::new(HeuristicCounter);
    let mut projection =
        TokenProjection::from_session(&session, Arc::clone(&counter)).expect("folds");
    assert_eq!(
        projection.surface_tokens(),
        recount(&session, counter.as_ref())
    );
    let mut next_exchange = session.next_seq().get();
    let mut group = c.benchmark_group("tokens");
    group.sample_size(10);
    group.bench_function("incremental_one_event", |b| {
        b.iter_custom(|iters| {
            // Build the events outside the timed loop: the cost measured is folding one
            // more event and reading the view, nothing else.
            let mut events = Vec::with_capacity(iters as usize);
            let mut seq = projection.next_seq();
            while (events.len() as u64) < iters {
                for input in exchange(next_exchange, 12) {
                    events.push(input.into_event(seq).expect("event builds"));
                    seq += 1;
                }
                next_exchange += 1;
            }
            events.truncate(iters as usize);
            let start = Instant::now();
            for event in &events {
                projection.apply(event).expect("folds");
                std::hint::black_box(projection.view().pressure.estimated_prompt_tokens.tokens);
            }
            start.elapsed()
        })
    });
    group.bench_function("recount_from_scratch", |b| {
        b.iter(|| std::hint::black_box(recount(&session, counter.as_ref())))
    });
    group.finish();
}

/// A summarizer with a fixed short answer: its cost is not the engine's.
struct Fixed;

impl Summarizer for Fixed {
    fn summarize(&mut self, _request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        Ok(Summary {
            blocks: vec!["The earlier work listed files and read their outputs.".to_owned()],
            provider: "bench".to_owned(),
            model: "fixed".to_owned(),
            usage: None,
            max_tokens: None,
        })
    }
}

fn bench_compaction(c: &mut Criterion) {
    // About 100 estimated tokens per node: ~2,000 nodes make ~200k tokens.
    let mut session = session_of(2_700, 60);
    let mut projection =
        TokenProjection::from_session(&session, Arc::new(HeuristicCounter)).expect("folds");
    while projection.surface_tokens() < 200_000 {
        let n = session.next_seq().get();
        for input in exchange(n, 60) {
            let event = session.try_append(input).expect("accepted").clone();
            projection.apply(&event).expect("folds");
        }
    }
    eprintln!(
        "compaction bench: {} surface nodes, {} estimated tokens",
        projection.surface().len(),
        projection.surface_tokens()
    );
    let policy = CompactionPolicy::default();
    let mut group = c.benchmark_group("compaction");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("compact_200k_tokens", |b| {
        b.iter_batched(
            || (session.clone(), projection.clone()),
            |(mut session, mut projection)| {
                let outcome = compact(
                    &session,
                    &projection,
                    &policy,
                    &mut Fixed,
                    &CompactionContext::new("bench", 1),
                )
                .expect("plans");
                let CompactionOutcome::Compacted(report) = outcome else {
                    panic!("expected a compaction: {outcome:?}");
                };
                for input in report.events {
                    let event = session.try_append(input).expect("accepted").clone();
                    projection.apply(&event).expect("folds");
                }
                (session, projection)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_tokens, bench_compaction);
criterion_main!(benches);
