//! The `SessionStore` conformance suite: the same scenarios against any implementation.
//!
//! An implementation passes a [`Subject`] factory to [`run`]: each scenario gets a fresh
//! subject (a fresh store location), opens the store through it, and may drop the store and
//! open it again to check what survives. Stores with a file that a crash can tear implement
//! [`Subject::tear_tail`]; the others skip that scenario. A third party runs it against
//! their store with
//!
//! ```ignore
//! sessionlog_testkit::conformance::run("my store", || MySubject::new()).assert_passed();
//! ```

use std::panic::{catch_unwind, AssertUnwindSafe};

use sessionlog_session::store_trait::{MAX_NAME_BYTES, PORTABLE_NAME_BYTES};
use sessionlog_session::{
    EventInput, NewEvent, Seq, SessionHeader, SessionStore, StoreError, SurfaceOp,
};

/// One store location under test.
pub trait Subject {
    /// Opens the store at this location. Called again, after the previous instance was
    /// dropped, to reopen it.
    fn open(&mut self) -> Box<dyn SessionStore>;

    /// With no instance open: leaves a partial record (a write that never completed) at
    /// the end of `session`'s storage. Returns false when the store has nothing to tear.
    fn tear_tail(&mut self, session: &str) -> bool {
        let _ = session;
        false
    }

    /// Whether committed sessions survive dropping and reopening the store.
    fn durable(&self) -> bool {
        true
    }
}

/// What a scenario found.
#[derive(Debug)]
enum Outcome {
    Passed,
    Skipped(String),
}

type Scenario = fn(&mut dyn Subject) -> Result<Outcome, String>;

/// The outcome of [`run`].
#[derive(Debug, Default)]
pub struct Report {
    /// The implementation's name.
    pub implementation: String,
    /// Scenarios passed.
    pub passed: Vec<&'static str>,
    /// Scenarios that do not apply, with the reason.
    pub skipped: Vec<(&'static str, String)>,
    /// Scenarios failed, with what went wrong.
    pub failed: Vec<(&'static str, String)>,
}

impl Report {
    /// Panics with every failure when any scenario failed.
    pub fn assert_passed(&self) {
        assert!(
            self.failed.is_empty(),
            "{} fails {} of {} conformance scenarios:\n{}",
            self.implementation,
            self.failed.len(),
            SCENARIOS.len(),
            self.failed
                .iter()
                .map(|(name, why)| format!("  {name}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The names of every scenario, in the order [`run`] runs them.
pub fn scenario_names() -> Vec<&'static str> {
    SCENARIOS.iter().map(|(name, _)| *name).collect()
}

const SCENARIOS: &[(&str, Scenario)] = &[
    (
        "appended_events_read_back_in_order",
        appended_events_read_back_in_order,
    ),
    (
        "raw_envelopes_keep_their_bytes",
        raw_envelopes_keep_their_bytes,
    ),
    ("gaps_are_rejected", gaps_are_rejected),
    ("stale_writer_is_rejected", stale_writer_is_rejected),
    (
        "racing_writers_cannot_both_win",
        racing_writers_cannot_both_win,
    ),
    (
        "invalid_event_leaves_the_session_unchanged",
        invalid_event_leaves_the_session_unchanged,
    ),
    (
        "reopen_keeps_committed_events",
        reopen_keeps_committed_events,
    ),
    ("torn_tail_is_cut_on_reopen", torn_tail_is_cut_on_reopen),
    ("list_pages_by_name", list_pages_by_name),
    ("delete_frees_the_name", delete_frees_the_name),
    ("bad_input_is_refused", bad_input_is_refused),
];

/// Runs every scenario, each against a fresh subject from `fresh`. A panic inside the
/// store counts as a failure of that scenario.
pub fn run<S: Subject>(implementation: &str, mut fresh: impl FnMut() -> S) -> Report {
    let mut report = Report {
        implementation: implementation.to_owned(),
        ..Report::default()
    };
    for (name, scenario) in SCENARIOS {
        let mut subject = fresh();
        let result = catch_unwind(AssertUnwindSafe(|| scenario(&mut subject)));
        match result {
            Ok(Ok(Outcome::Passed)) => report.passed.push(name),
            Ok(Ok(Outcome::Skipped(why))) => report.skipped.push((name, why)),
            Ok(Err(why)) => report.failed.push((name, why)),
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "a panic".to_owned());
                report.failed.push((name, format!("panicked: {text}")));
            }
        }
    }
    report
}

// ---------------------------------------------------------------------------------------
// Events and checks.

fn header(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_700_000_000_000, Some("/work"))
}

fn turn_start(turn: u64) -> EventInput {
    EventInput::new(
        "turn/start",
        1_000 + turn as i64,
        format!("{{\"turn\":{turn}}}"),
    )
}

fn step_start() -> EventInput {
    EventInput::new("step/start", 1_500, "{\"turn\":1,\"step\":1}")
}

fn step_end() -> EventInput {
    EventInput::new("step/end", 3_000, "{\"turn\":1,\"step\":1}")
}

fn user_message(id: &str, text: &str) -> EventInput {
    EventInput::new(
        "user/message",
        2_000,
        format!(
            "{{\"id\":\"{id}\",\"role\":\"user\",\"source\":{{\"kind\":\"user\"}},\
             \"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}"
        ),
    )
    .with_surface_op(SurfaceOp::Append)
}

fn inputs(events: &[EventInput]) -> Vec<NewEvent<'_>> {
    events.iter().map(NewEvent::Input).collect()
}

fn ensure(condition: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what())
    }
}

fn ok<T>(result: Result<T, StoreError>, what: &str) -> Result<T, String> {
    result.map_err(|e| format!("{what} failed: {e}"))
}

/// The raw envelopes of `name`, all of them.
fn raws(store: &dyn SessionStore, name: &str) -> Result<Vec<String>, String> {
    let events = ok(store.read_from(name, 0, usize::MAX), "read_from")?;
    for (i, e) in events.iter().enumerate() {
        ensure(e.seq().get() == i as u64, || {
            format!("read_from returned seq {} at position {i}", e.seq())
        })?;
    }
    Ok(events.iter().map(|e| e.raw().to_owned()).collect())
}

fn expect_invalid(result: Result<u64, StoreError>, what: &str) -> Result<(), String> {
    match result {
        Err(StoreError::Invalid(_)) => Ok(()),
        Err(e) => Err(format!("{what}: expected Invalid, got {e}")),
        Ok(n) => Err(format!("{what}: accepted (next seq {n})")),
    }
}

/// A session named `name` with turn 1 and its step 1 open and a user message (seqs 0..3),
/// committed.
fn seeded(store: &dyn SessionStore, name: &str) -> Result<Vec<String>, String> {
    ok(store.create(name, &header(name)), "create")?;
    let batch = [turn_start(1), step_start(), user_message("u1", "hello")];
    let next = ok(store.append(name, &inputs(&batch), 0), "append")?;
    ensure(next == 3, || {
        format!("append of 3 events returned next seq {next}")
    })?;
    ok(store.commit(name), "commit")?;
    raws(store, name)
}

// ---------------------------------------------------------------------------------------
// Scenarios.

fn appended_events_read_back_in_order(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    let before = seeded(store, "s")?;
    let next = ok(
        store.append("s", &inputs(&[user_message("u3", "more")]), 3),
        "append",
    )?;
    ensure(next == 4, || {
        format!("next seq {next} after the fourth event")
    })?;
    let all = raws(store, "s")?;
    ensure(all.len() == 4 && all[..3] == before[..], || {
        format!("read back {all:?}")
    })?;
    ensure(
        all[3].contains("\"seq\":3") && all[3].contains("u3"),
        || format!("fourth event reads back as {}", all[3]),
    )?;
    let middle = ok(store.read_from("s", 2, 1), "read_from(2, 1)")?;
    ensure(middle.len() == 1 && middle[0].seq().get() == 2, || {
        format!("read_from(2, 1) gave {} events", middle.len())
    })?;
    for (from, limit) in [(4, 10), (1000, 10), (0, 0)] {
        let got = ok(store.read_from("s", from, limit), "read_from")?;
        ensure(got.is_empty(), || {
            format!("read_from({from}, {limit}) gave {} events", got.len())
        })?;
    }
    ensure(ok(store.next_seq("s"), "next_seq")? == 4, || {
        "next_seq is not 4".into()
    })?;
    let loaded = ok(store.load_header("s"), "load_header")?;
    ensure(loaded.raw() == header("s").raw(), || {
        format!("header reads back as {}", loaded.raw())
    })?;
    Ok(Outcome::Passed)
}

fn raw_envelopes_keep_their_bytes(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    ok(store.create("raw", &header("raw")), "create")?;
    // Envelope and payload keys in an order no writer of ours produces, and a number spelled
    // as written: the store must keep the bytes.
    let lines: [&[u8]; 3] = [
        br#"{"type":"turn/start","seq":0,"time":1.5e3,"data":{"turn":1}}"#,
        br#"{"data":{"step":1,"turn":1},"type":"step/start","seq":1,"time":2e3}"#,
        br#"{"type":"user/message","seq":2,"time":7,"data":{"content":[{"text":"hi","type":"text"}],"role":"user","id":"m","source":{"kind":"user"}},"surfaceOp":"append"}"#,
    ];
    let batch: Vec<NewEvent<'_>> = lines.iter().map(|l| NewEvent::Raw(l)).collect();
    ok(store.append("raw", &batch, 0), "append raw")?;
    ok(store.commit("raw"), "commit")?;
    let got = raws(store, "raw")?;
    let want: Vec<String> = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    ensure(got == want, || {
        format!("raw envelopes read back as {got:?}")
    })?;
    Ok(Outcome::Passed)
}

fn gaps_are_rejected(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    let before = seeded(store, "g")?;
    let skipping = br#"{"type":"turn/start","seq":4,"time":1,"data":{"turn":2}}"#;
    expect_invalid(
        store.append("g", &[NewEvent::Raw(skipping)], 3),
        "a raw event at seq 4 when 3 is next",
    )?;
    let mut input = turn_start(2);
    input.seq = Some(Seq(7));
    expect_invalid(
        store.append("g", &[NewEvent::Input(&input)], 3),
        "an input naming seq 7 when 3 is next",
    )?;
    ensure(raws(store, "g")? == before, || {
        "a refused gap changed the session".into()
    })?;
    Ok(Outcome::Passed)
}

fn stale_writer_is_rejected(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    let before = seeded(store, "w")?;
    for expected in [0, 2, 4, 99] {
        match store.append("w", &inputs(&[user_message("late", "x")]), expected) {
            Err(StoreError::StaleWriter {
                expected: e,
                actual: 3,
                ..
            }) if e == expected => {}
            other => {
                return Err(format!(
                    "a writer expecting seq {expected} (next is 3) got {other:?}"
                ))
            }
        }
    }
    ensure(raws(store, "w")? == before, || {
        "a stale writer changed the session".into()
    })?;
    let next = ok(store.append("w", &[], 3), "an empty batch")?;
    ensure(next == 3, || format!("an empty batch returned {next}"))?;
    Ok(Outcome::Passed)
}

fn racing_writers_cannot_both_win(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    seeded(store, "race")?;
    const WRITERS: usize = 8;
    const ROUNDS: u64 = 5;
    for round in 0..ROUNDS {
        let expected = 3 + round;
        let wins = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..WRITERS)
                .map(|w| {
                    scope.spawn(move || {
                        let event = user_message(&format!("r{round}w{w}"), "race");
                        store.append("race", &inputs(&[event]), expected)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| "a writer panicked".to_owned()))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let winners = wins.iter().filter(|r| r.is_ok()).count();
        ensure(winners == 1, || {
            format!("round {round}: {winners} writers won")
        })?;
        for loser in wins.iter().filter_map(|r| r.as_ref().err()) {
            ensure(matches!(loser, StoreError::StaleWriter { .. }), || {
                format!("round {round}: a loser got {loser}")
            })?;
        }
    }
    ok(store.commit("race"), "commit")?;
    let all = raws(store, "race")?;
    ensure(all.len() as u64 == 3 + ROUNDS, || {
        format!("{} events after the race", all.len())
    })?;
    Ok(Outcome::Passed)
}

fn invalid_event_leaves_the_session_unchanged(
    subject: &mut dyn Subject,
) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    let before = seeded(store, "v")?;
    let no_surface_op = EventInput::new(
        "user/message",
        1,
        r#"{"id":"x","role":"user","source":{"kind":"user"},"content":[]}"#,
    );
    let unknown_type = EventInput::new("no/such-type", 1, "{}");
    let bad_replace = user_message("r", "replace")
        .with_surface_op(SurfaceOp::Replace {
            start: Seq(0),
            end: Seq(0),
        })
        .with_sources(vec![Seq(0)]);
    let valid = step_end();
    let cases: Vec<(&str, Vec<NewEvent<'_>>)> = vec![
        (
            "a surface event without surfaceOp",
            inputs(std::slice::from_ref(&no_surface_op)),
        ),
        (
            "an unknown, non-ignorable type",
            inputs(std::slice::from_ref(&unknown_type)),
        ),
        (
            "a replace of a node not on the surface",
            inputs(std::slice::from_ref(&bad_replace)),
        ),
        ("bytes that are not JSON", vec![NewEvent::Raw(b"{not json")]),
        (
            "bytes that are not UTF-8",
            vec![NewEvent::Raw(b"{\"type\":\"\xff\"}")],
        ),
        (
            "a batch whose second event is invalid",
            vec![NewEvent::Input(&valid), NewEvent::Input(&unknown_type)],
        ),
    ];
    for (what, batch) in &cases {
        expect_invalid(store.append("v", batch, 3), what)?;
        ensure(raws(store, "v")? == before, || {
            format!("{what} changed the session")
        })?;
        let next = ok(store.next_seq("v"), "next_seq")?;
        ensure(next == 3, || format!("{what} moved next seq to {next}"))?;
    }
    // The session still takes the valid event at the seq the refused batch would have used.
    let next = ok(
        store.append("v", &inputs(&[valid]), 3),
        "append after refusals",
    )?;
    ensure(next == 4, || {
        format!("next seq {next} after a valid append")
    })?;
    Ok(Outcome::Passed)
}

fn reopen_keeps_committed_events(subject: &mut dyn Subject) -> Result<Outcome, String> {
    if !subject.durable() {
        return Ok(Outcome::Skipped(
            "the store keeps nothing across reopen".into(),
        ));
    }
    let before = {
        let store = subject.open();
        seeded(store.as_ref(), "r")?
    };
    {
        let store = subject.open();
        let store = store.as_ref();
        ensure(raws(store, "r")? == before, || {
            "events differ after reopen".into()
        })?;
        let loaded = ok(store.load_header("r"), "load_header")?;
        ensure(loaded.raw() == header("r").raw(), || {
            "header differs after reopen".into()
        })?;
        let next = ok(
            store.append("r", &inputs(&[user_message("u9", "after")]), 3),
            "append after reopen",
        )?;
        ensure(next == 4, || format!("next seq {next} after reopen"))?;
        ok(store.commit("r"), "commit")?;
    }
    let again = subject.open();
    let all = raws(again.as_ref(), "r")?;
    ensure(all.len() == 4 && all[..3] == before[..], || {
        format!("{} events after the second reopen", all.len())
    })?;
    Ok(Outcome::Passed)
}

fn torn_tail_is_cut_on_reopen(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let before = {
        let store = subject.open();
        seeded(store.as_ref(), "t")?
    };
    if !subject.tear_tail("t") {
        return Ok(Outcome::Skipped("the store has no file to tear".into()));
    }
    {
        let store = subject.open();
        let store = store.as_ref();
        ensure(raws(store, "t")? == before, || {
            "the committed events differ after a torn tail".into()
        })?;
        let next = ok(
            store.append("t", &inputs(&[step_end()]), 3),
            "append after the tear",
        )?;
        ensure(next == 4, || format!("next seq {next} after the tear"))?;
        ok(store.commit("t"), "commit")?;
    }
    let store = subject.open();
    let all = raws(store.as_ref(), "t")?;
    ensure(all.len() == 4 && all[..3] == before[..], || {
        format!("after tear, append and reopen: {all:?}")
    })?;
    Ok(Outcome::Passed)
}

fn list_pages_by_name(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    let names = [
        "b", "a", "c/d", "..", ".", "ü", "A", "a b", "~x", "a:b\\c", "Z9",
    ];
    for name in names {
        ok(
            store.create(name, &header(name)),
            &format!("create {name:?}"),
        )?;
    }
    let mut sorted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    sorted.sort();
    let all = ok(store.list(None, 100), "list")?;
    ensure(all == sorted, || {
        format!("list gave {all:?}, want {sorted:?}")
    })?;
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = ok(store.list(after.as_deref(), 3), "list page")?;
        ensure(page.len() <= 3, || {
            format!("a page of limit 3 held {}", page.len())
        })?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        paged.extend(page);
        after = Some(last);
    }
    ensure(paged == sorted, || format!("paging gave {paged:?}"))?;
    let tail = ok(store.list(Some("a b"), 2), "list after a name")?;
    ensure(tail == sorted[6..8], || {
        format!("list after \"a b\" gave {tail:?}")
    })?;
    let between = ok(store.list(Some("bb"), 100), "list after a missing name")?;
    ensure(between == ["c/d", "~x", "ü"], || {
        format!("list after \"bb\" gave {between:?}")
    })?;
    ensure(ok(store.list(None, 0), "list limit 0")?.is_empty(), || {
        "limit 0 returned names".into()
    })?;
    Ok(Outcome::Passed)
}

fn delete_frees_the_name(subject: &mut dyn Subject) -> Result<Outcome, String> {
    {
        let store = subject.open();
        let store = store.as_ref();
        seeded(store, "d")?;
        seeded(store, "keep")?;
        ok(store.delete("d"), "delete")?;
        for (what, result) in [
            ("read_from", store.read_from("d", 0, 10).map(drop)),
            ("next_seq", store.next_seq("d").map(drop)),
            ("load_header", store.load_header("d").map(drop)),
            ("delete again", store.delete("d")),
        ] {
            ensure(matches!(result, Err(StoreError::NoSuchSession(_))), || {
                format!("{what} of a deleted session gave {result:?}")
            })?;
        }
        let listed = ok(store.list(None, 10), "list")?;
        ensure(listed == ["keep"], || {
            format!("list after delete gave {listed:?}")
        })?;
        ok(store.create("d", &header("d2")), "create after delete")?;
        ensure(ok(store.next_seq("d"), "next_seq")? == 0, || {
            "a re-created session is not empty".into()
        })?;
        ok(
            store.append("d", &inputs(&[turn_start(1)]), 0),
            "append to the new session",
        )?;
        ok(store.commit("d"), "commit")?;
    }
    if subject.durable() {
        let store = subject.open();
        let store = store.as_ref();
        let events = raws(store, "d")?;
        let loaded = ok(store.load_header("d"), "load_header")?;
        ensure(events.len() == 1 && loaded.id() == "d2", || {
            format!(
                "after reopen the re-created session has {} events, id {}",
                events.len(),
                loaded.id()
            )
        })?;
    }
    Ok(Outcome::Passed)
}

fn bad_input_is_refused(subject: &mut dyn Subject) -> Result<Outcome, String> {
    let store = subject.open();
    let store = store.as_ref();
    seeded(store, "x")?;
    let too_long = "n".repeat(MAX_NAME_BYTES + 1);
    for name in ["", "tab\there", "nul\0", too_long.as_str()] {
        let result = store.create(name, &header("h"));
        ensure(matches!(result, Err(StoreError::BadName { .. })), || {
            format!(
                "create {:?} gave {result:?}",
                name.get(..20).unwrap_or(name)
            )
        })?;
    }
    let portable = "~".repeat(PORTABLE_NAME_BYTES);
    ok(
        store.create(&portable, &header("p")),
        "create a name of the portable length",
    )?;
    ensure(
        matches!(store.create("x", &header("x")), Err(StoreError::Exists(_))),
        || "creating an existing session was not refused with Exists".into(),
    )?;
    let event = turn_start(1);
    for (what, result) in [
        (
            "append",
            store
                .append("missing", &inputs(std::slice::from_ref(&event)), 0)
                .map(drop),
        ),
        ("commit", store.commit("missing")),
        ("read_from", store.read_from("missing", 0, 1).map(drop)),
        ("load_header", store.load_header("missing").map(drop)),
        ("next_seq", store.next_seq("missing").map(drop)),
        ("delete", store.delete("missing")),
    ] {
        ensure(matches!(result, Err(StoreError::NoSuchSession(_))), || {
            format!("{what} of a missing session gave {result:?}")
        })?;
    }
    let listed = ok(store.list(None, 10), "list")?;
    ensure(listed == ["x", portable.as_str()], || {
        format!("list gave {listed:?}")
    })?;
    Ok(Outcome::Passed)
}
