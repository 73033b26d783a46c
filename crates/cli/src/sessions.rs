//! Session commands: import, export, append, events, surface, derive, open.

use std::io::{self, BufRead, Write};
use std::path::Path;

use sessionlog::projection::Transcript;
use sessionlog::session::{EventInput, ExportOptions, SessionHeader};
use sessionlog::{Access, CacheCheck, Durability, SessionHandle};

use crate::{open_store, out, Failure};

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

pub(crate) fn import(dir: &Path, file: &Path, name: Option<&str>) -> Result<u8, Failure> {
    let bytes = std::fs::read(file)
        .map_err(|e| Failure::new(2, format!("reading {}: {e}", file.display())))?;
    // Validated before the store is opened, so a refused log leaves no store behind (an
    // absent or empty directory would otherwise become one).
    let parsed = sessionlog::parse_dsh(&bytes)?;
    let store = open_store(dir, Access::CreateOrOpen)?;
    let s = store.import_parsed(parsed, name)?;
    let line = format!(
        "{{\"session\":{},\"events\":{},\"tailDiscarded\":{},\"closers\":{}}}\n",
        json_string(&s.session),
        s.events,
        s.tail_discarded,
        s.closers
    );
    out(&mut io::stdout().lock(), line.as_bytes())?;
    store.close()?;
    Ok(0)
}

pub(crate) fn export(dir: &Path, name: &str, options: &ExportOptions) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let mut w = io::BufWriter::new(io::stdout().lock());
    match store.write_dsh_as(name, options, &mut w).map(drop) {
        // A reader that stops early (`| head`) is not an error.
        Err(sessionlog::Error::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            return Err(Failure::new(0, ""))
        }
        written => written?,
    }
    w.flush()?;
    Ok(0)
}

pub(crate) fn append(
    dir: &Path,
    name: &str,
    create: bool,
    repair: bool,
    durability: Durability,
) -> Result<u8, Failure> {
    let store = open_store(
        dir,
        if create {
            Access::CreateOrOpen
        } else {
            Access::Existing
        },
    )?;
    let mut handle = match store.open_session_as_is(name) {
        Err(sessionlog::Error::NoSuchSession(_)) if create => {
            store.create_session(name, SessionHeader::new(name, now_ms(), None))?
        }
        Err(e) => return Err(e.into()),
        Ok(handle) if repair => {
            drop(handle);
            let (handle, closers) = store.open_session(name)?;
            let mut err = io::stderr().lock();
            for c in &closers {
                let _ = writeln!(err, "sessionlog: --repair appended {}", c.raw());
            }
            handle
        }
        Ok(handle) => handle,
    };
    let mut input = io::stdin().lock();
    let mut w = io::stdout().lock();
    let session = json_string(name);
    let mut bytes = Vec::new();
    let mut number = 0usize;
    loop {
        bytes.clear();
        if input.read_until(b'\n', &mut bytes)? == 0 {
            break;
        }
        number += 1;
        let result = append_line(&mut handle, &bytes, number, dir);
        let seq = match result {
            Ok(Some(seq)) => seq,
            Ok(None) => continue,
            Err(refusal) => {
                // What was accepted before the refused line was acknowledged: keep it.
                handle.commit()?;
                return Err(refusal);
            }
        };
        if durability == Durability::Sync {
            handle.commit()?;
        }
        out(
            &mut w,
            format!("{{\"session\":{session},\"seq\":{seq}}}\n").as_bytes(),
        )?;
        w.flush()?;
    }
    handle.commit()?;
    Ok(0)
}

/// Appends one stdin line (`number` counts from 1); `None` for a blank line. A refused
/// line changes nothing.
fn append_line(
    handle: &mut SessionHandle,
    bytes: &[u8],
    number: usize,
    dir: &Path,
) -> Result<Option<u64>, Failure> {
    let refused = |e: String| Failure::new(3, format!("line {number}: {e}"));
    let text = std::str::from_utf8(bytes).map_err(|e| {
        refused(format!(
            "not valid UTF-8 (byte {} of the line); nothing of it was appended",
            e.valid_up_to() + 1
        ))
    })?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let event = EventInput::from_json(text, now_ms()).map_err(|e| refused(e.to_string()))?;
    // DSH's reader lets a turn/start reset an open turn; a writer must not, or the open
    // turn would be left without its end. Closing it is restart repair, never implicit.
    if event.event_type == "turn/start" && handle.state().turn_open() {
        return Err(refused(format!(
            "a new turn/start is refused{}",
            repair_hint(handle, dir)
        )));
    }
    match handle.append(event) {
        Ok(e) => Ok(Some(e.seq().get())),
        Err(e) if e.is_refusal() => {
            // A line refused for its own shape is refused whatever the session's state: the
            // open turn or compaction is no part of the answer, so no repair is pointed at.
            let for_its_shape = matches!(
                &e,
                sessionlog::Error::Session(sessionlog::session::Error::Invalid { rule, .. })
                    if rule.is_about_shape()
            );
            let hint = if for_its_shape {
                String::new()
            } else {
                repair_hint(handle, dir)
            };
            Err(refused(format!("{e}{hint}")))
        }
        Err(e) => Err(e.into()),
    }
}

/// When the session was left needing restart repair, how to get it.
fn repair_hint(handle: &SessionHandle, dir: &Path) -> String {
    if !handle.needs_restart_repair() {
        return String::new();
    }
    format!(
        "; the session's last turn or compaction is still open: continue it, or if its writer is gone, run `sessionlog open --store {} --session {}` to close it (it prints the closers) or pass --repair",
        dir.display(),
        handle.name()
    )
}

pub(crate) fn events(dir: &Path, name: &str, from: u64) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let mut w = io::BufWriter::new(io::stdout().lock());
    for e in store.events(name, sessionlog::Seq(from))? {
        out(&mut w, e?.raw().as_bytes())?;
        out(&mut w, b"\n")?;
    }
    w.flush()?;
    Ok(0)
}

pub(crate) fn surface(dir: &Path, name: &str) -> Result<u8, Failure> {
    let view = open_store(dir, Access::ReadOnly)?.view(name)?;
    let seqs: Vec<String> = view
        .surface
        .nodes()
        .iter()
        .map(sessionlog::Seq::to_string)
        .collect();
    out(
        &mut io::stdout().lock(),
        format!("[{}]\n", seqs.join(",")).as_bytes(),
    )?;
    Ok(0)
}

pub(crate) fn derive(dir: &Path, name: &str) -> Result<u8, Failure> {
    let view = open_store(dir, Access::ReadOnly)?.view(name)?;
    let messages = view.surface.derive_messages_json();
    out(&mut io::stdout().lock(), format!("{messages}\n").as_bytes())?;
    Ok(0)
}

pub(crate) fn open(dir: &Path, name: &str) -> Result<u8, Failure> {
    let store = open_store(dir, Access::Existing)?;
    let (_handle, closers) = store.open_session(name)?;
    if !closers.is_empty() {
        // The closers themselves go to stdout; stderr says a repair happened, like every
        // other repair an open makes.
        eprintln!(
            "sessionlog: repaired session {name:?}: appended {} closing event{} (seq {}..={})",
            closers.len(),
            if closers.len() == 1 { "" } else { "s" },
            closers.first().map_or(0, |e| e.seq().get()),
            closers.last().map_or(0, |e| e.seq().get()),
        );
    }
    let mut w = io::stdout().lock();
    for c in closers {
        out(&mut w, c.raw().as_bytes())?;
        out(&mut w, b"\n")?;
    }
    Ok(0)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn list(
    dir: &Path,
    json: bool,
    limit: usize,
    after: Option<&str>,
) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let mut w = io::BufWriter::new(io::stdout().lock());
    // One more than the page tells whether another page follows.
    let mut page = store.list_sessions(after, None, limit.saturating_add(1));
    let more = page.len() > limit;
    page.truncate(limit);
    for s in &page {
        let line = if json {
            format!(
                "{{\"session\":{},\"events\":{}}}\n",
                json_string(&s.name),
                s.events
            )
        } else {
            let unit = if s.events == 1 { "event" } else { "events" };
            format!("{}\t{} {unit}\n", s.name, s.events)
        };
        out(&mut w, line.as_bytes())?;
    }
    w.flush()?;
    if let (true, Some(last)) = (more, page.last()) {
        // On stderr, so the listing on stdout stays one session per line.
        eprintln!(
            "more sessions follow; next page: sessionlog sessions --store {} --limit {limit} --after {}{}",
            shell_word(&dir.to_string_lossy()),
            shell_word(&last.name),
            if json { " --json" } else { "" }
        );
    }
    Ok(0)
}

/// `word` as one shell word: as is when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// One line of a transcript: at most this many characters of a message's text.
const SHOW_TEXT_CHARS: usize = 160;

pub(crate) fn show(dir: &Path, name: &str, raw: bool) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    if !raw {
        let transcript = store.projection::<Transcript>(Transcript::NAME, name)?;
        let mut w = io::BufWriter::new(io::stdout().lock());
        transcript
            .state
            .write(name, &mut w)
            .and_then(|()| w.flush())
            .or_else(|e| {
                // A closed pipe (`| head`) ends the command quietly.
                if e.kind() == io::ErrorKind::BrokenPipe {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
        return Ok(0);
    }
    let state = store.session_state(name)?;
    let on_surface: std::collections::HashSet<sessionlog::Seq> =
        state.surface().into_iter().collect();
    let mut w = io::BufWriter::new(io::stdout().lock());
    out(
        &mut w,
        format!(
            "session {name}: {} events, {} on the surface, {} replacements\n",
            state.next_seq().get(),
            on_surface.len(),
            state.replace_generation()
        )
        .as_bytes(),
    )?;
    let version = state.version();
    for e in store.loaded_events(name, sessionlog::session::Seq(0))? {
        let e = &e?;
        let seq = e.seq().get();
        let line = if version.surface_type(e.event_type()).is_some() {
            let mark = if on_surface.contains(&e.seq()) {
                " "
            } else {
                "~"
            };
            let text = sessionlog::session::derive_message(version, e)
                .map_or_else(|| "(no message)".to_owned(), brief);
            let replaced = match e.surface_op() {
                Some(sessionlog::session::SurfaceOp::Replace { start, end }) => {
                    format!(" [replaces {start}..={end}]")
                }
                _ => String::new(),
            };
            format!("{mark}{seq:>6} {}{replaced}: {text}\n", e.event_type())
        } else {
            format!("  {seq:>6} · {}\n", e.event_type())
        };
        out(&mut w, line.as_bytes())?;
    }
    out(
        &mut w,
        b"(~ marks surface events shadowed by a replacement; \xc2\xb7 marks structural events)\n",
    )?;
    w.flush()?;
    Ok(0)
}

fn brief(message: &str) -> String {
    let one_line: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() > SHOW_TEXT_CHARS {
        let cut: String = one_line.chars().take(SHOW_TEXT_CHARS).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

pub(crate) fn cache_verify(dir: &Path) -> Result<u8, Failure> {
    let store = open_store(dir, Access::ReadOnly)?;
    let mut bad = 0;
    let mut w = io::stdout().lock();
    for (name, verdict) in store.cache_verify()? {
        let line = match verdict {
            CacheCheck::Ok => format!("{name}: ok\n"),
            CacheCheck::Missing => format!("{name}: no cache (the next view writes one)\n"),
            CacheCheck::Unusable(why) => {
                bad += 1;
                format!("{name}: {why}\n")
            }
        };
        out(&mut w, line.as_bytes())?;
    }
    for c in store.cache_verify_projections()? {
        let whose = c.session.as_deref().unwrap_or("(store)");
        let line = match c.check {
            CacheCheck::Ok => format!("{whose}: projection {}: ok\n", c.projection),
            CacheCheck::Missing => format!(
                "{whose}: projection {}: no checkpoint (the next read writes one)\n",
                c.projection
            ),
            CacheCheck::Unusable(why) => {
                bad += 1;
                format!("{whose}: projection {}: {why}\n", c.projection)
            }
        };
        out(&mut w, line.as_bytes())?;
    }
    Ok(if bad == 0 { 0 } else { 1 })
}

pub(crate) fn cache_rebuild(dir: &Path) -> Result<u8, Failure> {
    let n = open_store(dir, Access::Existing)?.cache_rebuild()?;
    out(
        &mut io::stdout().lock(),
        format!("rebuilt the cache of {n} sessions\n").as_bytes(),
    )?;
    Ok(0)
}
