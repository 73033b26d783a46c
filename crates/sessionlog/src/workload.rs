//! A deterministic generator of realistic agent-session traffic: turns with steps, streamed
//! assistant settlements (chunks, then the message citing them), tool calls and results of
//! varied sizes, request envelopes, and summary compactions that replace old surface spans.
//! Used by the demo, the benchmarks and tests; every event it makes passes validation.

use sessionlog_session::json::write_js_string;
use sessionlog_session::{EventInput, FormatVersion, Seq, SurfaceOp};

/// Shape of the generated traffic.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkloadConfig {
    /// Steps (model calls) per turn, inclusive range.
    pub steps_per_turn: (u32, u32),
    /// Streamed chunks per assistant settlement, inclusive range.
    pub chunks_per_message: (u32, u32),
    /// Bytes of a tool result's text, inclusive range.
    pub tool_result_bytes: (usize, usize),
    /// Bytes of a user prompt, inclusive range.
    pub prompt_bytes: (usize, usize),
    /// Compact after this many turns (None: never).
    pub compact_every_turns: Option<u64>,
    /// Surface nodes a compaction leaves unshadowed at the end.
    pub keep_tail_nodes: usize,
    /// Context window announced by the session's `request/context`.
    pub context_window: u64,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            steps_per_turn: (1, 4),
            chunks_per_message: (4, 24),
            tool_result_bytes: (64, 8192),
            prompt_bytes: (40, 600),
            compact_every_turns: Some(8),
            keep_tail_nodes: 6,
            context_window: 128_000,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `WorkloadConfig::default().with_...(...)`.
impl WorkloadConfig {
    /// Sets [`steps_per_turn`](Self::steps_per_turn).
    #[must_use]
    pub fn with_steps_per_turn(mut self, steps_per_turn: (u32, u32)) -> Self {
        self.steps_per_turn = steps_per_turn;
        self
    }

    /// Sets [`chunks_per_message`](Self::chunks_per_message).
    #[must_use]
    pub fn with_chunks_per_message(mut self, chunks_per_message: (u32, u32)) -> Self {
        self.chunks_per_message = chunks_per_message;
        self
    }

    /// Sets [`tool_result_bytes`](Self::tool_result_bytes).
    #[must_use]
    pub fn with_tool_result_bytes(mut self, tool_result_bytes: (usize, usize)) -> Self {
        self.tool_result_bytes = tool_result_bytes;
        self
    }

    /// Sets [`prompt_bytes`](Self::prompt_bytes).
    #[must_use]
    pub fn with_prompt_bytes(mut self, prompt_bytes: (usize, usize)) -> Self {
        self.prompt_bytes = prompt_bytes;
        self
    }

    /// Sets [`compact_every_turns`](Self::compact_every_turns).
    #[must_use]
    pub fn with_compact_every_turns(mut self, compact_every_turns: Option<u64>) -> Self {
        self.compact_every_turns = compact_every_turns;
        self
    }

    /// Sets [`keep_tail_nodes`](Self::keep_tail_nodes).
    #[must_use]
    pub fn with_keep_tail_nodes(mut self, keep_tail_nodes: usize) -> Self {
        self.keep_tail_nodes = keep_tail_nodes;
        self
    }

    /// Sets [`context_window`](Self::context_window).
    #[must_use]
    pub fn with_context_window(mut self, context_window: u64) -> Self {
        self.context_window = context_window;
        self
    }
}

/// A small, fast, seeded generator (SplitMix64); the workload is a pure function of the seed.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }
}

const WORDS: &[&str] = &[
    "the", "session", "log", "tool", "result", "file", "read", "write", "check", "build", "test",
    "fix", "error", "value", "model", "turn", "step", "call", "output", "summary", "context",
    "token", "cache", "segment", "index", "record",
];

/// Generates the events of one agent session, turn by turn.
#[derive(Debug, Clone)]
pub struct Workload {
    rng: SplitMix,
    config: WorkloadConfig,
    turn: u64,
    calls: u64,
    compactions: u64,
    /// The prompt tokens of the session's surface before the next turn, when the caller
    /// tells them ([`Workload::set_context_tokens`]).
    context_tokens: Option<u64>,
}

impl Workload {
    /// A generator for one session.
    pub fn new(seed: u64, config: WorkloadConfig) -> Self {
        Workload {
            rng: SplitMix::new(seed),
            config,
            turn: 0,
            calls: 0,
            compactions: 0,
            context_tokens: None,
        }
    }

    /// Tells the generator the prompt tokens of the session's surface now (as the caller's
    /// token view estimates them, compactions included). The requests of the turns after it
    /// then report their input tokens as a provider would: these plus a quarter of the
    /// bytes the turn added before each request. Without it (the default), each request's
    /// input is drawn at random between 500 and 90,000 tokens, whatever the session holds.
    /// Either way the generator draws the same random numbers, so every other event it
    /// generates stays the same.
    pub fn set_context_tokens(&mut self, tokens: Option<u64>) {
        self.context_tokens = tokens;
    }

    /// Turns generated so far.
    pub fn turns(&self) -> u64 {
        self.turn
    }

    /// Compactions generated so far.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    fn text(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 8);
        while s.len() < bytes {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(WORDS[self.rng.range(0, WORDS.len() as u64 - 1) as usize]);
        }
        s
    }

    fn json_text(&mut self, bytes: usize) -> String {
        let t = self.text(bytes);
        let mut out = String::with_capacity(t.len() + 2);
        write_js_string(&mut out, &t);
        out
    }

    /// The events that open a session before its first turn: none. DSH records the request
    /// envelope inside the first step, after the prompt (a header outside a step is refused by
    /// DSH 0.2's migration), so the first [`turn`](Self::turn) writes it. Kept so a caller can
    /// open every session the same way.
    pub fn session_start(&mut self, _time: i64) -> Vec<EventInput> {
        Vec::new()
    }

    /// The request envelope and context window of the session's first model call. The
    /// header's `tools` is a list of tool schemas, as DSH records them: DSH 0.2 refuses to
    /// migrate a header whose `tools` is anything else.
    fn request_envelope(&self, time: i64) -> [EventInput; 2] {
        [
            EventInput::new(
                "request/header",
                time,
                concat!(
                    r#"{"header":{"config":{"model":"demo-model","provider":"demo"},"system":"You are a careful coding agent.","tools":["#,
                    r#"{"name":"bash","description":"Run a shell command.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},"#,
                    r#"{"name":"read","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},"#,
                    r#"{"name":"write","description":"Write a file.","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}"#,
                    r#"]},"reason":"initial"}"#
                ),
            ),
            EventInput::new(
                "request/context",
                time,
                format!(
                    r#"{{"provider":"demo","model":"demo-model","contextWindow":{}}}"#,
                    self.config.context_window
                ),
            ),
        ]
    }

    /// The events of the next turn, given the seq the first of them will get. With
    /// `interrupt_after` set, the turn stops after that many events (an open turn, as a crash
    /// leaves it).
    pub fn turn(
        &mut self,
        first_seq: u64,
        time: i64,
        interrupt_after: Option<usize>,
    ) -> Vec<EventInput> {
        self.turn += 1;
        let t = self.turn;
        // The surface types, when requests report what they sent: read once per turn.
        let version = self.context_tokens.map(|_| FormatVersion::current());
        let mut out: Vec<EventInput> = Vec::new();
        let seq = |out: &Vec<EventInput>| first_seq + out.len() as u64;
        out.push(EventInput::new(
            "turn/start",
            time,
            format!(r#"{{"turn":{t}}}"#),
        ));
        let prompt_len = self.rng.range(
            self.config.prompt_bytes.0 as u64,
            self.config.prompt_bytes.1 as u64,
        ) as usize;
        let prompt = self.json_text(prompt_len);
        // The prompt goes inside the first step: a surface event needs a step opened before
        // it (DSH 0.2 gives it a system head from there on). The first turn's first step also
        // records the request envelope, after the prompt, as DSH does.
        let mut prompt = Some(
            EventInput::new("user/message", time, format!(r#"{{"content":[{{"type":"text","text":{prompt}}}],"source":{{"kind":"user"}},"role":"user","id":"u-{t}"}}"#))
                .with_surface_op(SurfaceOp::Append),
        );
        let steps = self.rng.range(
            u64::from(self.config.steps_per_turn.0),
            u64::from(self.config.steps_per_turn.1),
        );
        for s in 1..=steps {
            out.push(EventInput::new(
                "step/start",
                time,
                format!(r#"{{"turn":{t},"step":{s}}}"#),
            ));
            if let Some(prompt) = prompt.take() {
                out.push(prompt);
                if t == 1 {
                    out.extend(self.request_envelope(time));
                }
            }
            let chunks = self.rng.range(
                u64::from(self.config.chunks_per_message.0),
                u64::from(self.config.chunks_per_message.1),
            );
            // The settlement's stream as DSH records it: each block opened, its deltas, each
            // block closed with its whole content, then usage and finish. DSH checks that the
            // message equals the stream it cites (content and usage).
            let last = s == steps;
            let call = (!last).then(|| {
                self.calls += 1;
                format!("call-{}", self.calls)
            });
            let args = r#""{\"command\": \"cargo test\"}""#;
            let mut sources = Vec::with_capacity(chunks as usize + 6);
            let mut chunk = |out: &mut Vec<EventInput>, body: String| {
                sources.push(Seq(first_seq + out.len() as u64));
                out.push(EventInput::new(
                    "assistant/chunk",
                    time,
                    format!(r#"{{"turn":{t},"step":{s},"chunk":{body}}}"#),
                ));
            };
            chunk(
                &mut out,
                r#"{"type":"block-start","index":0,"blockType":"text"}"#.to_owned(),
            );
            let mut said = String::new();
            for _ in 0..chunks {
                let piece_len = self.rng.range(4, 40) as usize;
                let piece = self.text(piece_len);
                let mut js = String::new();
                write_js_string(&mut js, &piece);
                chunk(
                    &mut out,
                    format!(r#"{{"type":"text-delta","index":0,"text":{js}}}"#),
                );
                said.push_str(&piece);
            }
            let mut said_js = String::new();
            write_js_string(&mut said_js, &said);
            let text_block = format!(r#"{{"type":"text","text":{said_js}}}"#);
            let call_block = call.as_ref().map(|id| {
                format!(r#"{{"type":"tool-call","id":"{id}","name":"bash","arguments":{args}}}"#)
            });
            if call_block.is_some() {
                chunk(
                    &mut out,
                    r#"{"type":"block-start","index":1,"blockType":"tool-call"}"#.to_owned(),
                );
            }
            chunk(
                &mut out,
                format!(r#"{{"type":"block-end","index":0,"block":{text_block}}}"#),
            );
            if let Some(block) = &call_block {
                chunk(
                    &mut out,
                    format!(r#"{{"type":"block-end","index":1,"block":{block}}}"#),
                );
            }
            let (input, output) = (self.rng.range(500, 90_000), self.rng.range(20, 900));
            // What the request sent: the surface before the turn and the messages the turn
            // added to it (not the chunks streaming them, nor the structural events).
            let input = match (self.context_tokens, &version) {
                (Some(context), Some(version)) => {
                    let added: usize = out
                        .iter()
                        .filter(|e| version.surface_type(&e.event_type).is_some())
                        .map(|e| e.data.len())
                        .sum();
                    context + added as u64 / 4
                }
                _ => input,
            };
            let usage = format!(
                r#"{{"inputTokens":{input},"outputTokens":{output},"cacheReadTokens":{}}}"#,
                input / 2
            );
            chunk(&mut out, format!(r#"{{"type":"usage","usage":{usage}}}"#));
            let finish = if call.is_some() { "tool-calls" } else { "stop" };
            chunk(
                &mut out,
                format!(r#"{{"type":"finish","reason":{{"kind":"{finish}"}}}}"#),
            );
            let content = match &call_block {
                Some(block) => format!("{text_block},{block}"),
                None => text_block,
            };
            out.push(
                EventInput::new("assistant/message", time, format!(r#"{{"turn":{t},"step":{s},"message":{{"role":"assistant","content":[{content}],"source":{{"kind":"model","provider":"demo","model":"demo-model"}},"id":"a-{t}-{s}"}},"usage":{usage}}}"#))
                    .with_surface_op(SurfaceOp::Append)
                    .with_sources(sources),
            );
            if let Some(id) = call {
                let call_seq = seq(&out);
                out.push(EventInput::new("tool/call", time, format!(r#"{{"turn":{t},"step":{s},"callId":"{id}","name":"bash","arguments":{args}}}"#)));
                let size = self.rng.range(
                    self.config.tool_result_bytes.0 as u64,
                    self.config.tool_result_bytes.1 as u64,
                ) as usize;
                let body = self.json_text(size);
                out.push(
                    EventInput::new("tool/result", time, format!(r#"{{"turn":{t},"step":{s},"message":{{"source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":{body}}}],"isError":false}}],"role":"user","id":"r-{id}"}}}}"#))
                        .with_surface_op(SurfaceOp::Append)
                        .with_sources(vec![Seq(call_seq)]),
                );
            }
            out.push(EventInput::new(
                "step/end",
                time,
                format!(r#"{{"turn":{t},"step":{s}}}"#),
            ));
        }
        out.push(EventInput::new(
            "turn/end",
            time,
            format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
        ));
        if let Some(n) = interrupt_after {
            out.truncate(n.clamp(1, out.len()));
        }
        out
    }

    /// Whether the policy of this workload compacts after the turn just generated.
    pub fn wants_compaction(&self) -> bool {
        self.config
            .compact_every_turns
            .is_some_and(|n| n > 0 && self.turn % n == 0)
    }

    /// A summary compaction of the current `surface` (all but the last `keep_tail_nodes`
    /// nodes), as the four events DeepSeek Harness writes; `first_seq` is the seq the first
    /// will get. None when the surface is too short to compact. It runs between turns, so it
    /// is owned by no turn (`"turn":null`): DSH's reader refuses a compaction naming a turn
    /// that is not open.
    pub fn compaction(
        &mut self,
        surface: &[Seq],
        first_seq: Seq,
        time: i64,
    ) -> Option<Vec<EventInput>> {
        let first_seq = first_seq.get();
        let keep = self.config.keep_tail_nodes.max(1);
        if surface.len() <= keep + 1 {
            return None;
        }
        let shadowed = &surface[..surface.len() - keep];
        self.compactions += 1;
        let id = format!("compaction-{}", self.compactions);
        let (start, end) = (shadowed[0], shadowed[shadowed.len() - 1]);
        let summary = self.json_text(200);
        let seqs: Vec<String> = shadowed.iter().map(Seq::to_string).collect();
        let mut out = vec![
            EventInput::new(
                "compaction/start",
                time,
                format!(r#"{{"compactionId":"{id}","turn":null}}"#),
            ),
            EventInput::new(
                "compaction/summary",
                time,
                format!(
                    r#"{{"compactionId":"{id}","summary":[{{"type":"text","text":{summary}}}],"shadowedRange":{{"start":{start},"end":{end}}},"shadowedSeqs":[{}],"shadowedTokenCount":{},"provider":"demo","model":"demo-model","usage":{{"inputTokens":{},"outputTokens":50}}}}"#,
                    seqs.join(","),
                    shadowed.len() * 400,
                    shadowed.len() * 400
                ),
            ),
        ];
        let mut sources = vec![Seq(first_seq), Seq(first_seq + 1)];
        sources.extend_from_slice(shadowed);
        out.push(
            EventInput::new("user/message", time, format!(r#"{{"content":[{{"type":"text","text":{summary}}}],"source":{{"kind":"user"}},"role":"user","id":"{id}-summary"}}"#))
                .with_surface_op(SurfaceOp::Replace { start, end })
                .with_sources(sources),
        );
        out.push(EventInput::new(
            "compaction/end",
            time,
            format!(r#"{{"compactionId":"{id}","turn":null}}"#),
        ));
        Some(out)
    }

    /// Appends this workload's session to `h` until it holds at least `events` events: the
    /// session start, then a turn every second from `start_ms` (ms since the epoch), each
    /// followed by the compaction the policy asks for. Commits after every `commit_every`
    /// turns when given, and once at the end.
    pub fn fill(
        &mut self,
        h: &mut crate::SessionHandle,
        events: u64,
        start_ms: i64,
        commit_every: Option<u64>,
    ) -> crate::Result<()> {
        let mut time = start_ms;
        for e in self.session_start(time) {
            h.append(e)?;
        }
        while h.next_seq().get() < events {
            time += 1000;
            for e in self.turn(h.next_seq().get(), time, None) {
                h.append(e)?;
            }
            if self.wants_compaction() {
                let surface = h.state().surface();
                if let Some(c) = self.compaction(&surface, h.next_seq(), time) {
                    for e in c {
                        h.append(e)?;
                    }
                }
            }
            if commit_every.is_some_and(|n| self.turns() % n == 0) {
                h.commit()?;
            }
        }
        h.commit()
    }
}
