//! `stats --session` counts a session's events (by type, turns and end reasons, tool calls
//! and errors by tool, exact usage, estimated tokens), `tools` lists its tool calls and
//! `show` prints its transcript, all from the projections' checkpoints when a writer left them, read-only otherwise; a missing
//! session exits 2 with one line.

mod common;

use common::{picture, run};
use serde_json::Value;

/// One turn calling two tools; the second fails; the first result is shortened later.
const SESSION: &str = r#"{"type":"turn/start","time":1000,"data":{"turn":1}}
{"type":"step/start","time":1000,"data":{"turn":1,"step":1}}
{"type":"user/message","time":1000,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"list the files"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"type":"assistant/message","time":1010,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"cmd\":\"ls\"}"},{"type":"tool-call","id":"c2","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":120,"outputTokens":9}},"surfaceOp":"append"}
{"type":"tool/call","time":1020,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{\"cmd\":\"ls\"}"}}
{"type":"tool/result","time":1030,"data":{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a b"}]}]}},"surfaceOp":"append","sourceEventSeqs":[4]}
{"type":"tool/call","time":1040,"data":{"turn":1,"step":1,"callId":"c2","name":"read","arguments":"{}"}}
{"type":"tool/result","time":1290,"data":{"turn":1,"step":1,"message":{"id":"r2","role":"user","source":{"kind":"tool","callId":"c2"},"content":[{"type":"tool-result","toolCallId":"c2","content":[{"type":"text","text":"no such file"}],"isError":true}]}},"surfaceOp":"append","sourceEventSeqs":[6]}
{"type":"tool/result","time":1300,"data":{"turn":1,"step":1,"message":{"id":"r1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a"}]}]}},"surfaceOp":{"op":"replace","start":5,"end":5},"sourceEventSeqs":[5]}
{"type":"step/end","time":1310,"data":{"turn":1,"step":1}}
{"type":"turn/end","time":1320,"data":{"turn":1,"reason":{"kind":"completed"}}}
"#;

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn stats_and_tools_show_what_the_session_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let s = store.to_str().expect("utf-8 path");
    let appended = run(
        &["append", "--store", s, "--session", "t", "--create"],
        SESSION,
    );
    assert_eq!(appended.code, 0, "{appended:?}");

    let before = picture(&store);
    let stats = run(&["stats", "--store", s, "--session", "t", "--json"], "");
    assert_eq!(stats.code, 0, "{stats:?}");
    assert_eq!(picture(&store), before, "a read wrote something");
    let v = json(&stats.stdout);
    assert_eq!(v["events"], 11);
    assert_eq!(v["turns"], 1);
    assert_eq!(v["turnEnds"]["completed"], 1);
    assert_eq!(v["byType"]["tool/result"]["events"], 3);
    assert_eq!(v["tools"]["bash"]["calls"], 1);
    assert_eq!(v["tools"]["bash"]["errors"], 0);
    assert_eq!(v["tools"]["read"]["errors"], 1);
    assert_eq!(v["usage"]["input"], 120);
    assert_eq!(v["usage"]["output"], 9);
    assert_eq!(v["usage"]["label"], "exact");
    assert!(v["estimatedTokens"]["label"]
        .as_str()
        .is_some_and(|l| l.starts_with("estimated")));
    let total: u64 = v["byType"]
        .as_object()
        .expect("types")
        .values()
        .map(|t| t["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(v["bytes"].as_u64(), Some(total));

    let text = run(&["stats", "--store", s, "--session", "t"], "");
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.starts_with("session t: 11 events"), "{text:?}");
    assert!(text.stdout.contains("ended: completed 1"), "{text:?}");

    let tools = run(&["tools", "--store", s, "--session", "t", "--json"], "");
    assert_eq!(tools.code, 0, "{tools:?}");
    let calls: Vec<Value> = tools.stdout.lines().map(json).collect();
    assert_eq!(calls.len(), 2, "{tools:?}");
    assert_eq!(calls[0]["name"], "bash");
    assert_eq!(calls[0]["status"], "ok");
    assert_eq!(calls[0]["durationMs"], 10);
    assert_eq!(calls[0]["shadowedBy"], 8);
    assert_eq!(calls[0]["arguments"], r#"{"cmd":"ls"}"#);
    assert_eq!(calls[1]["name"], "read");
    assert_eq!(calls[1]["status"], "error");
    assert_eq!(calls[1]["durationMs"], 250);
    assert!(calls[1]["shadowedBy"].is_null());
    let listing = run(&["tools", "--store", s, "--session", "t"], "");
    assert_eq!(listing.code, 0);
    assert!(
        listing.stdout.contains("[result shadowed by seq 8]"),
        "{listing:?}"
    );

    // Once a writing command has checkpointed them, the reads come from the checkpoints,
    // and say the same.
    let shown = run(&["show", "--store", s, "--session", "t"], "");
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.contains("[shadowed by seq 8]"), "{shown:?}");
    let rebuilt = run(&["cache", "rebuild", "--store", s], "");
    assert_eq!(rebuilt.code, 0, "{rebuilt:?}");
    let again = json(&run(&["stats", "--store", s, "--session", "t", "--json"], "").stdout);
    assert_eq!(again["cache"]["checkpoint"], true, "{again}");
    assert_eq!(again["events"], 11);
    assert_eq!(
        run(&["show", "--store", s, "--session", "t"], "").stdout,
        shown.stdout
    );

    // Without --session, stats is the store's, with the store-wide `totals` projection:
    // written by `cache rebuild` above, so read from its checkpoint.
    let store_stats = json(&run(&["stats", "--store", s, "--json"], "").stdout);
    assert_eq!(store_stats["sessions"], 1);
    let totals = &store_stats["totals"];
    assert_eq!(totals["sessions"], 1, "{store_stats}");
    assert_eq!(totals["events"], 11, "{store_stats}");
    assert_eq!(totals["turns"], again["turns"], "{store_stats}");
    assert_eq!(totals["bytes"], again["bytes"], "{store_stats}");
    assert_eq!(totals["cache"]["checkpoint"], true, "{store_stats}");
    let text = run(&["stats", "--store", s], "");
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("totals: 1 sessions, 11 events"),
        "{text:?}"
    );

    for args in [
        vec!["stats", "--store", s, "--session", "nope"],
        vec!["tools", "--store", s, "--session", "nope"],
    ] {
        let r = run(&args, "");
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
        assert!(r.stderr.contains("no session named \"nope\""), "{r:?}");
    }
}
