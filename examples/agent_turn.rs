//! An agent platform's loop over three sessions, written with the typed builders only: each
//! turn asks the model, runs the tool it calls and answers; one session is compacted when its
//! context fills up; one is left with a turn open, as a crash would leave it, and is closed
//! by restart repair when the store is reopened.
//!
//! Run it with `cargo run -p sessionlog --example agent_turn`.

use std::sync::Arc;

use sessionlog::build::{
    AssistantMessage, HeaderReason, RequestContext, RequestHeader, StepEnd, StepStart, ToolCall,
    ToolResult, ToolSchema, TurnEnd, TurnStart, UserMessage,
};
use sessionlog::session::compaction::{
    CompactionOutcome, CompactionPolicy, DeterministicSummarizer,
};
use sessionlog::session::tokens::{HeuristicCounter, Usage};
use sessionlog::{LogOptions, SessionHandle, SessionHeader, Store, StoreOptions};

const PROVIDER: &str = "deepseek";
const MODEL: &str = "deepseek-chat";

/// Opens a session: the request envelope (system prompt, tools) and the context window.
fn start_session(store: &Store, name: &str) -> sessionlog::Result<SessionHandle> {
    let mut session = store.create_session(name, SessionHeader::new(name, 0, Some("/work")))?;
    let read_file = ToolSchema {
        name: "read_file".into(),
        description: "Reads a file of the workspace.".into(),
        parameters: r#"{"type":"object","properties":{"path":{"type":"string"}}}"#.into(),
    };
    session.append(
        RequestHeader::new(PROVIDER, MODEL, HeaderReason::Initial)
            .system("You are a careful coding agent.")
            .tool(read_file),
    )?;
    session.append(RequestContext::new(PROVIDER, MODEL).context_window(1_500))?;
    Ok(session)
}

/// One turn: the model reads a file (step 1), then answers (step 2). Durable at its end.
fn turn(session: &mut SessionHandle, question: &str, path: &str) -> sessionlog::Result<()> {
    let call_id = format!("call-{}", session.next_seq());
    let arguments = format!(r#"{{"path":"{path}"}}"#);
    session.append(TurnStart::new())?;
    session.append(StepStart::new())?;
    session.append(UserMessage::text(question))?;
    let usage = Usage {
        input: 420,
        output: 24,
        ..Usage::default()
    };
    session.append(
        AssistantMessage::new(PROVIDER, MODEL)
            .reasoning(format!("I should look at {path} first."))
            .tool_call(&call_id, "read_file", &arguments)
            .usage(usage),
    )?;
    session.commit()?; // durable before the tool runs
    session.append(ToolCall::new(&call_id, "read_file", &arguments))?;
    let contents = format!(
        "{path}: {}",
        "fn main() { println!(\"hello\"); } ".repeat(8)
    );
    session.append(ToolResult::text(&call_id, contents))?;
    session.append(StepEnd::new())?;
    session.append(StepStart::new())?;
    session.append(
        AssistantMessage::new(PROVIDER, MODEL).text(format!("{path} prints a greeting.")),
    )?;
    session.append(StepEnd::new())?;
    session.append(TurnEnd::completed())?;
    session.commit()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("sessionlog-agent-turn-{}", std::process::id()));
    let options = StoreOptions::default().with_log(
        LogOptions::default()
            .with_segment_size_bytes(1 << 20)
            .with_preallocate(false),
    );
    let store = Store::open(&dir, options.clone())?;

    for name in ["alpha", "beta", "gamma"] {
        let mut session = start_session(&store, name)?;
        for (i, path) in ["src/main.rs", "src/lib.rs", "build.rs"].iter().enumerate() {
            turn(&mut session, &format!("What does {path} do? ({i})"), path)?;
        }
        if name == "beta" {
            // The context window is small: summarize the older part of the conversation.
            let policy = CompactionPolicy::default().with_trigger_fraction(0.5);
            let outcome = session.compact(
                &policy,
                &mut DeterministicSummarizer::new(),
                Arc::new(HeuristicCounter),
                0,
            )?;
            match outcome {
                CompactionOutcome::Compacted(report) => println!(
                    "beta: compacted {} surface nodes ({} tokens) into a {}-token summary",
                    report.shadowed.len(),
                    report.shadowed_tokens,
                    report.summary_tokens
                ),
                other => println!("beta: no compaction ({other:?})"),
            }
        }
        if name == "gamma" {
            // A turn the process never finishes: the model asked for a tool, then a crash.
            session.append(TurnStart::new())?;
            session.append(StepStart::new())?;
            session.append(UserMessage::text("And Cargo.toml?"))?;
            session.append(AssistantMessage::new(PROVIDER, MODEL).tool_call(
                "call-last",
                "read_file",
                r#"{"path":"Cargo.toml"}"#,
            ))?;
            session.commit()?;
        }
    }
    store.close()?;

    // Reopen: restart repair closes gamma's open turn with new events.
    let store = Store::open(&dir, options)?;
    for name in ["alpha", "beta", "gamma"] {
        let (session, closers) = store.open_session(name)?;
        let types: Vec<&str> = closers.iter().map(|e| e.event_type()).collect();
        println!(
            "{name}: {} events, {} messages, closers {types:?}",
            session.next_seq(),
            session.derive_messages()?.len(),
        );
    }
    let view = store.view("beta")?;
    println!(
        "beta's first message after compaction: {:.80}…",
        view.surface.derive_messages()[0]
    );
    store.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
