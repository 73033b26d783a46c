//! Provider usage is read whichever convention wrote it, into the same disjoint buckets
//! (`input` never includes cached prompt tokens); usage in no known shape is reported as
//! unreadable, never counted as 0.

use sessionlog_session::json::JsonRef;
use sessionlog_session::tokens::{Usage, UsageShape};

fn read(json: &str) -> Option<(Usage, UsageShape)> {
    Usage::read(JsonRef::new(json))
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64, reasoning: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        reasoning,
    }
}

#[test]
fn dsh_usage_is_read_as_written() {
    assert_eq!(
        read(
            r#"{"inputTokens":10,"outputTokens":5,"cacheReadTokens":90,"cacheWriteTokens":3,"reasoningTokens":2}"#
        ),
        Some((usage(10, 5, 90, 3, 2), UsageShape::Dsh))
    );
}

#[test]
fn anthropic_usage_keeps_its_cache_buckets_apart() {
    let (u, shape) = read(
        r#"{"input_tokens":12,"output_tokens":7,"cache_read_input_tokens":100,"cache_creation_input_tokens":40}"#,
    )
    .expect("read");
    assert_eq!(shape, UsageShape::Anthropic);
    assert_eq!(u, usage(12, 7, 100, 40, 0));
    assert_eq!(u.prompt_tokens(), 152);
}

#[test]
fn openai_chat_usage_takes_the_cached_part_out_of_the_prompt() {
    let (u, shape) = read(
        r#"{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":8}}"#,
    )
    .expect("read");
    assert_eq!(shape, UsageShape::OpenAiChat);
    assert_eq!(u, usage(20, 30, 100, 0, 8));
    assert_eq!(
        u.prompt_tokens(),
        120,
        "the prompt as the provider counted it"
    );
    assert_eq!(u.total_tokens(), 150, "agrees with the provider's total");
    let (plain, _) = read(r#"{"prompt_tokens":9,"completion_tokens":4}"#).expect("read");
    assert_eq!(plain, usage(9, 4, 0, 0, 0));
}

#[test]
fn openai_responses_usage_takes_the_cached_part_out_of_the_input() {
    let (u, shape) = read(
        r#"{"input_tokens":50,"input_tokens_details":{"cached_tokens":20},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":6},"total_tokens":61}"#,
    )
    .expect("read");
    assert_eq!(shape, UsageShape::OpenAiResponses);
    assert_eq!(u, usage(30, 11, 20, 0, 6));
    assert_eq!(u.total_tokens(), 61);
}

#[test]
fn deepseek_usage_splits_the_prompt_into_cache_hit_and_miss() {
    let (u, shape) = read(
        r#"{"prompt_tokens":70,"completion_tokens":9,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":6,"total_tokens":79}"#,
    )
    .expect("read");
    assert_eq!(shape, UsageShape::DeepSeek);
    assert_eq!(u, usage(6, 9, 64, 0, 0));
    assert_eq!(u.total_tokens(), 79);
}

#[test]
fn gemini_usage_counts_thoughts_as_output() {
    let (u, shape) = read(
        r#"{"promptTokenCount":40,"cachedContentTokenCount":32,"candidatesTokenCount":5,"thoughtsTokenCount":3,"totalTokenCount":48}"#,
    )
    .expect("read");
    assert_eq!(shape, UsageShape::Gemini);
    assert_eq!(u, usage(8, 8, 32, 0, 3));
    assert_eq!(u.total_tokens(), 48);
}

#[test]
fn usage_in_no_known_shape_is_unreadable() {
    assert_eq!(read(r#"{"tokens_in":5,"tokens_out":6}"#), None);
    assert_eq!(read(r#"{}"#), None);
    assert_eq!(read("42"), None);
}
