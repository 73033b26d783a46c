//! Latency percentiles, formatting, seeded data and directory sizes.

use std::path::Path;
use std::time::Duration;

/// Percentiles of a latency sample, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Percentiles {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
}

impl Percentiles {
    /// Percentiles of `samples`, sorting them in place.
    pub fn of(samples: &mut [u64]) -> Percentiles {
        samples.sort_unstable();
        let n = samples.len();
        let at = |q: f64| -> u64 {
            if n == 0 {
                return 0;
            }
            samples[(((n as f64) * q).ceil() as usize).clamp(1, n) - 1]
        };
        Percentiles {
            p50_ns: at(0.50),
            p99_ns: at(0.99),
        }
    }
}

/// Nanoseconds of `d`, saturating.
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds for people: `812 ns`, `3.41 µs`, `1.27 ms`, `2.103 s`.
pub fn human_ns(ns: u64) -> String {
    let n = ns as f64;
    if n < 1e3 {
        format!("{ns} ns")
    } else if n < 1e6 {
        format!("{:.2} µs", n / 1e3)
    } else if n < 1e9 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.2} s", n / 1e9)
    }
}

/// A count with thousands separators: `1,234,567`.
pub fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A small seeded generator (SplitMix64): the same seed gives the same data on every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A 1 KiB event as one line of JSON (exactly `len` bytes, no newline): a tool result with
/// seeded text, so it compresses like real text does, not like zeros.
pub fn event_json(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the", "session", "log", "tool", "result", "file", "read", "write", "check", "build",
        "test", "fix", "error", "value", "model", "turn", "step", "call", "output", "cargo",
    ];
    let mut rng = Rng::new(seed);
    let head =
        format!(r#"{{"type":"tool/result","seq":{seed},"data":{{"callId":"call-{seed}","text":""#);
    let tail = r#""}}"#;
    let mut out = head.into_bytes();
    let room = len.saturating_sub(out.len() + tail.len());
    let mut text = String::with_capacity(room + 16);
    while text.len() < room {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]);
    }
    text.truncate(room);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(tail.as_bytes());
    out
}

/// Bytes of the files under `dir`, recursively: (apparent length, allocated blocks × 512).
pub fn dir_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut len = 0;
    let mut alloc = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    for entry in rd.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (l, a) = dir_bytes(&entry.path());
            len += l;
            alloc += a;
        } else if meta.is_file() {
            len += meta.len();
            alloc += meta.blocks() * 512;
        }
    }
    (len, alloc)
}
