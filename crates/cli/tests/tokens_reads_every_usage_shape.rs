//! `tokens` reads the usage shapes DSH and the common providers write, and says so when it
//! finds usage it cannot read instead of silently counting 0.

mod common;

use common::{describe, sessionlog, text};

/// One turn whose settlement carries `usage` (raw JSON).
fn turn(t: u32, usage: &str) -> String {
    format!(
        concat!(
            r#"{{"type":"turn/start","data":{{"turn":{t}}}}}"#,
            "\n",
            r#"{{"type":"step/start","data":{{"turn":{t},"step":1}}}}"#,
            "\n",
            r#"{{"type":"user/message","data":{{"content":[{{"type":"text","text":"q{t}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{t}"}},"surfaceOp":"append"}}"#,
            "\n",
            r#"{{"type":"assistant/message","data":{{"turn":{t},"step":1,"message":{{"id":"a{t}","role":"assistant","content":[{{"type":"text","text":"a{t}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{u}}},"surfaceOp":"append"}}"#,
            "\n",
            r#"{{"type":"step/end","data":{{"turn":{t},"step":1}}}}"#,
            "\n",
            r#"{{"type":"turn/end","data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#,
            "\n",
        ),
        t = t,
        u = usage
    )
}

/// (usage JSON, shape name, input, output, cache read, cache write, reasoning)
const SHAPES: [(&str, &str, u64, u64, u64, u64, u64); 6] = [
    (
        r#"{"inputTokens":10,"outputTokens":5,"cacheReadTokens":90,"reasoningTokens":2}"#,
        "dsh",
        10,
        5,
        90,
        0,
        2,
    ),
    (
        r#"{"input_tokens":12,"output_tokens":7,"cache_read_input_tokens":100,"cache_creation_input_tokens":40}"#,
        "anthropic",
        12,
        7,
        100,
        40,
        0,
    ),
    (
        r#"{"prompt_tokens":120,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":8}}"#,
        "openai-chat",
        20,
        30,
        100,
        0,
        8,
    ),
    (
        r#"{"input_tokens":50,"input_tokens_details":{"cached_tokens":20},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":6}}"#,
        "openai-responses",
        30,
        11,
        20,
        0,
        6,
    ),
    (
        r#"{"prompt_tokens":70,"completion_tokens":9,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":6}"#,
        "deepseek",
        6,
        9,
        64,
        0,
        0,
    ),
    (
        r#"{"promptTokenCount":40,"cachedContentTokenCount":32,"candidatesTokenCount":5,"thoughtsTokenCount":3}"#,
        "gemini",
        8,
        8,
        32,
        0,
        3,
    ),
];

fn store_with(turns: &[String]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("s").to_str().expect("utf8").to_owned();
    let made = sessionlog(
        &["append", "--store", &store, "--session", "a", "--create"],
        turns.concat().as_bytes(),
    );
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    (dir, store)
}

fn tokens_json(store: &str) -> (serde_json::Value, String) {
    let out = sessionlog(
        &["tokens", "--store", store, "--session", "a", "--json"],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    (
        serde_json::from_slice(&out.stdout).expect("json"),
        text(&out.stderr),
    )
}

#[test]
fn every_known_usage_shape_is_read_into_the_same_buckets() {
    let turns: Vec<String> = SHAPES
        .iter()
        .enumerate()
        .map(|(i, s)| turn(i as u32 + 1, s.0))
        .collect();
    let (_dir, store) = store_with(&turns);
    let (v, stderr) = tokens_json(&store);
    assert!(stderr.is_empty(), "no warning: {stderr}");
    let requests = v["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), SHAPES.len());
    let mut prompt = 0;
    let mut output = 0;
    for (r, (_, shape, input, out, read, write, reasoning)) in requests.iter().zip(SHAPES) {
        assert_eq!(r["shape"], shape, "{r}");
        assert_eq!(
            [
                &r["input"],
                &r["output"],
                &r["cacheRead"],
                &r["cacheWrite"],
                &r["reasoning"]
            ],
            [input, out, read, write, reasoning]
                .map(serde_json::Value::from)
                .each_ref(),
            "{shape}: {r}"
        );
        prompt += input + read + write;
        output += out;
    }
    assert_eq!(v["cumulative"]["prompt"]["tokens"], prompt);
    assert_eq!(v["cumulative"]["output"]["tokens"], output);
    assert_eq!(v["unreadableUsage"], serde_json::json!([]));
}

#[test]
fn usage_in_no_known_shape_is_reported_not_counted_as_zero() {
    let (_dir, store) = store_with(&[
        turn(1, SHAPES[0].0),
        turn(2, r#"{"tokens_in":5,"tokens_out":6}"#),
    ]);
    let (v, stderr) = tokens_json(&store);
    assert_eq!(stderr.lines().count(), 1, "one warning line: {stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("seq 9"),
        "{stderr}"
    );
    assert!(stderr.contains("tokens_in, tokens_out"), "{stderr}");
    assert_eq!(v["requests"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        v["unreadableUsage"],
        serde_json::json!([{"seq": 9, "kind": "Settlement", "keys": ["tokens_in", "tokens_out"]}])
    );
    let plain = sessionlog(&["tokens", "--store", &store, "--session", "a"], b"");
    assert_eq!(plain.status.code(), Some(0), "{}", describe(&plain));
    assert_eq!(
        text(&plain.stderr),
        stderr,
        "the same warning without --json"
    );
}
