//! A writer's `stats` take the usage its session state already read from each appended
//! settlement instead of reading it again; usage the state could not read (another shape,
//! `null`) is read by the fold itself. Whatever the shape, the counts a writer keeps equal
//! those of a fold of the whole log.

use sessionlog::projection::{SessionStats, Stats};
use sessionlog::session::SessionHeader;
use sessionlog::workload::{Workload, WorkloadConfig};
use sessionlog::{CacheUse, Store, StoreOptions};

/// Usage objects in each shape a fold meets: the generator's own (DSH), DeepSeek's, one in
/// no known shape, and `null`.
const SHAPES: [Option<&str>; 4] = [
    None,
    Some(r#"{"prompt_tokens":1200,"completion_tokens":80,"prompt_cache_hit_tokens":700}"#),
    Some(r#"{"tokens":7}"#),
    Some("null"),
];

/// `data` with every usage object the generator writes (`{"inputTokens":…}` with its three
/// buckets) replaced by `usage`.
fn with_usage(data: &str, usage: &str) -> String {
    const START: &str = r#"{"inputTokens":"#;
    let mut out = String::with_capacity(data.len());
    let mut rest = data;
    while let Some(at) = rest.find(START) {
        let Some(len) = rest[at..].find('}') else {
            break;
        };
        let object = &rest[at..at + len + 1];
        out.push_str(&rest[..at]);
        if object.contains("cacheReadTokens") {
            out.push_str(usage);
        } else {
            out.push_str(object);
        }
        rest = &rest[at + len + 1..];
    }
    out.push_str(rest);
    out
}

fn options() -> StoreOptions {
    StoreOptions::default()
        .with_log(sessionlog::LogOptions::default().with_preallocate(false))
        .with_projection(Stats)
}

#[test]
fn stats_kept_by_a_writer_count_usage_in_every_shape_as_a_fold_of_the_log_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), options()).expect("store");
    let mut h = store
        .create_session("s", SessionHeader::new("s", 1, None))
        .expect("create");
    let mut w = Workload::new(
        7,
        WorkloadConfig::default().with_compact_every_turns(Some(3)),
    );
    for e in w.session_start(1) {
        h.append(e).expect("start");
    }
    for turn in 0..16 {
        let next = h.next_seq().get();
        for mut e in w.turn(next, 2, None) {
            if let Some(usage) = SHAPES[turn % SHAPES.len()] {
                e.data = with_usage(&e.data, usage);
            }
            h.append(e).expect("append");
        }
        if w.wants_compaction() {
            let surface = h.state().surface();
            if let Some(events) = w.compaction(&surface, h.next_seq(), 2) {
                h.append_atomic(events).expect("compaction");
            }
        }
        h.commit().expect("commit");
    }
    let kept: SessionStats = h.projection::<Stats>(Stats::NAME).expect("kept").clone();
    drop(h);

    let full = Store::open_read_only(dir.path(), options().with_projection_cache(false))
        .expect("read-only");
    let folded = full.projection::<Stats>(Stats::NAME, "s").expect("folded");
    assert_eq!(folded.cache, CacheUse::Disabled);
    assert_eq!(kept, folded.state);
    // Every shape was met: read usage (two shapes), and usage read as in no known shape.
    assert!(kept.usage.requests >= 8, "{:?}", kept.usage);
    assert!(kept.usage.unreadable >= 4, "{:?}", kept.usage);
    assert!(kept.usage.usage.cache_read >= 4 * 700, "{:?}", kept.usage);
}
