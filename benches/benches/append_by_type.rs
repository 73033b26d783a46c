//! What an appended event costs by its type: the workload generator's agent session (default
//! config, compactions every 8 turns, tool results of 64 B–4 KiB) appended through a store's
//! `SessionHandle`, each event through a function named after its type, and each turn
//! committed through `commit_turn`. Counted by callgrind, those functions' inclusive
//! instructions divided by their calls are the instructions per event of each type
//! (validation, the state's checks and fold, the token tally, the log's encoding) and per
//! commit (the flush and the state checkpoints it writes when due). Instructions, unlike
//! time, are the same from run to run on a noisy machine.
//!
//! `benches/append-by-type.sh` builds this bench, runs it under callgrind and prints the table.
//! Run alone, it appends the session once and prints how many events of each type it appended
//! and their average payload size (also in `append_by_type.json`), which the script joins with
//! callgrind's counts. `SESSIONLOG_APPEND_BY_TYPE_EVENTS` sets the session's length (default
//! 50,000 events).

use sessionlog::session::{EventInput, SessionHeader};
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{SessionHandle, Store, StoreOptions};
use sessionlog_benches::{fresh_dir, write_json};

/// One appending function per event type of the generator, so that callgrind counts each
/// type apart; `other` takes any type the generator may add later.
macro_rules! typed_appends {
    ($($name:ident = $ty:literal),* $(,)?) => {
        mod by_type {
            use super::{EventInput, SessionHandle};
            // Each names its type (`black_box`), so that no two bodies are the same and the
            // compiler keeps every function apart rather than merging them into one.
            $(
                #[inline(never)]
                pub fn $name(h: &mut SessionHandle, e: EventInput) {
                    std::hint::black_box($ty);
                    h.append(e).expect("a generated event is valid");
                }
            )*
            #[inline(never)]
            pub fn other(h: &mut SessionHandle, e: EventInput) {
                std::hint::black_box("other");
                h.append(e).expect("a generated event is valid");
            }
        }

        /// The function names of the types, in the order of `TYPES`.
        const FUNCTIONS: &[&str] = &[$(stringify!($name),)* "other"];
        /// The event types, `"other"` last.
        const TYPES: &[&str] = &[$($ty,)* "other"];

        /// Appends `e` through its type's function; returns the type's index in `TYPES`.
        fn append(h: &mut SessionHandle, e: EventInput) -> usize {
            let mut i = 0;
            $(
                if e.event_type == $ty {
                    by_type::$name(h, e);
                    return i;
                }
                i += 1;
            )*
            by_type::other(h, e);
            i
        }
    };
}

typed_appends! {
    request_header = "request/header",
    request_context = "request/context",
    turn_start = "turn/start",
    step_start = "step/start",
    user_message = "user/message",
    assistant_chunk = "assistant/chunk",
    assistant_message = "assistant/message",
    tool_call = "tool/call",
    tool_result = "tool/result",
    step_end = "step/end",
    turn_end = "turn/end",
    compaction_start = "compaction/start",
    compaction_summary = "compaction/summary",
    compaction_end = "compaction/end",
}

/// Commits the turn just appended: the log's flush and sync, and the state checkpoints due.
#[inline(never)]
fn commit_turn(h: &mut SessionHandle) {
    h.commit().expect("commit");
}

fn main() {
    let events: u64 = std::env::var("SESSIONLOG_APPEND_BY_TYPE_EVENTS")
        .ok()
        .map(|v| {
            v.parse()
                .expect("SESSIONLOG_APPEND_BY_TYPE_EVENTS is a count of events")
        })
        .unwrap_or(50_000);
    let dir = fresh_dir("append-by-type");
    let store = Store::open(&dir, StoreOptions::default()).expect("open");
    let mut h = store
        .create_session("by-type", SessionHeader::new("by-type", 1, None))
        .expect("create");
    let mut w = Workload::new(
        9,
        WorkloadConfig::default().with_tool_result_bytes((64, 4096)),
    );
    let mut count = vec![0u64; TYPES.len()];
    let mut bytes = vec![0u64; TYPES.len()];
    let mut commits = 0u64;
    let mut feed = |h: &mut SessionHandle, batch: Vec<EventInput>| {
        for e in batch {
            let len = e.data.len() as u64;
            let i = append(h, e);
            count[i] += 1;
            bytes[i] += len;
        }
    };
    let mut time = 1_700_000_000_000i64;
    feed(&mut h, w.session_start(time));
    while h.next_seq().get() < events {
        time += 1000;
        let turn = w.turn(h.next_seq().get(), time, None);
        feed(&mut h, turn);
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(c) = w.compaction(&surface, h.next_seq(), time) {
                feed(&mut h, c);
            }
        }
        commit_turn(&mut h);
        commits += 1;
    }
    drop(h);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "appended {} events in {commits} commits:",
        count.iter().sum::<u64>()
    );
    println!(
        "{:<20} {:>9} {:>10}  function",
        "type", "events", "avg bytes"
    );
    let mut rows = Vec::new();
    for i in 0..TYPES.len() {
        if count[i] == 0 {
            continue;
        }
        let avg = bytes[i] as f64 / count[i] as f64;
        println!(
            "{:<20} {:>9} {:>10.0}  by_type::{}",
            TYPES[i], count[i], avg, FUNCTIONS[i]
        );
        rows.push(serde_json::json!({
            "type": TYPES[i], "function": format!("by_type::{}", FUNCTIONS[i]),
            "events": count[i], "avg_data_bytes": avg,
        }));
    }
    write_json(
        "append_by_type.json",
        &serde_json::json!({ "types": rows, "commits": commits, "commit_function": "commit_turn" }),
    );
}
