//! DSH session JSONL import and export (spec §2, §3, §7).
//!
//! Import runs DSH's load pipeline: the physical scan keeps the contiguous good prefix
//! (a torn or damaged tail is cut and reported; damage followed by a later `turn/end` is
//! corruption), then the semantic load upgrades legacy shapes, checks the vocabulary,
//! validates every event and, optionally, appends restart closers. Export writes the
//! header line verbatim and the events as DSH's writer does, packing chunk runs.

use crate::chunks::{unpack_row, write_packed, ROW_TYPES};
use crate::error::{Error, Rule};
use crate::event::{Event, Seq};
use crate::header::SessionHeader;
use crate::json::{self, JsonKind, JsonRef};
pub use crate::migrate::ChildFact;
use crate::session::Session;
use crate::version::{DshFormat, FormatVersion};
use crate::zstd_file;

/// How to import.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ImportOptions {
    /// The format version (vocabulary and surface table).
    pub version: FormatVersion,
    /// Append restart closers when the final turn is open (a cold load does).
    pub repair: bool,
    /// Apply DSH's strict header rules (fixtures' placeholder headers fail them).
    pub strict_header: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            version: FormatVersion::dsh_v0(),
            repair: true,
            strict_header: false,
        }
    }
}

/// Builders, so code outside this crate can set fields although the struct is
/// `#[non_exhaustive]`: `ImportOptions::default().with_...(...)`.
impl ImportOptions {
    /// Sets [`version`](Self::version).
    #[must_use]
    pub fn with_version(mut self, version: FormatVersion) -> Self {
        self.version = version;
        self
    }

    /// Sets [`repair`](Self::repair).
    #[must_use]
    pub fn with_repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Sets [`strict_header`](Self::strict_header).
    #[must_use]
    pub fn with_strict_header(mut self, strict_header: bool) -> Self {
        self.strict_header = strict_header;
        self
    }
}

/// The part of a file that the physical scan cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    /// Bytes kept: the header and every committed line, each with its line feed.
    pub committed_bytes: usize,
    /// Size of the file.
    pub file_bytes: usize,
    /// The first problem found in the cut region.
    pub reason: String,
}

/// An imported session.
#[derive(Debug, Clone)]
pub struct DshImport {
    /// The session, including any closers appended by repair.
    pub session: Session,
    /// Where the file was cut, if it was. For a compressed file the byte counts are of the
    /// decompressed stream.
    pub tail: Option<TailCut>,
    /// Seqs of the closers appended by repair.
    pub closers: Vec<Seq>,
    /// Whether the file was zstd-compressed.
    pub zstd: bool,
}

/// The physical scan's output: header, committed event envelopes, cut.
#[derive(Debug, Clone)]
pub struct ScannedLog {
    /// The header.
    pub header: SessionHeader,
    /// The envelopes of the retained prefix, rows unpacked.
    pub events: Vec<String>,
    /// Where the tail was cut, if it was.
    pub tail: Option<TailCut>,
}

fn line_text(bytes: &[u8]) -> &[u8] {
    // `JSON.parse` skips a CR before the LF as whitespace.
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// The header of a DSH session file's text, and where its first event line starts.
fn header_line(file: &[u8]) -> Result<(SessionHeader, usize), Error> {
    let header_end = file.iter().position(|b| *b == b'\n');
    let header_bytes = line_text(&file[..header_end.unwrap_or(file.len())]);
    let header_text = std::str::from_utf8(header_bytes).map_err(|_| Error::Header {
        detail: "the header line is not UTF-8".into(),
    })?;
    if header_text.trim().is_empty() {
        let detail = if file.iter().all(u8::is_ascii_whitespace) {
            "the file is empty; a DSH session file starts with its header line"
        } else {
            "the first line is blank; a DSH session file starts with its header line"
        };
        return Err(Error::Header {
            detail: detail.into(),
        });
    }
    // The header is its JSON value, as an event line's envelope is (`parse_line`): the
    // whitespace around it (carriage returns before the line feed included) is not kept, so
    // an export, which ends the line with a line feed alone, imports to the same header.
    let header = SessionHeader::parse(JsonRef::new(header_text).raw())?;
    Ok((header, header_end.map_or(file.len(), |e| e + 1)))
}

/// The header of a DSH session file, plain or zstd-compressed (recognised by its magic
/// number), read as an import reads it, without reading its events.
pub fn file_header(file: &[u8]) -> Result<SessionHeader, Error> {
    if zstd_file::is_zstd(file) {
        return header_line(&zstd_file::decode(file)?.plain).map(|(header, _)| header);
    }
    header_line(file).map(|(header, _)| header)
}

/// The physical scan of spec §7.
pub fn scan(file: &[u8]) -> Result<ScannedLog, Error> {
    scan_checked(file).map(|(scanned, _)| scanned)
}

/// [`scan`], also telling for each retained envelope whether the scan found its whole text
/// lossless JSON (a line kept as it was, or an envelope unpacked from a row that was), so
/// parsing it need not check that again.
fn scan_checked(file: &[u8]) -> Result<(ScannedLog, Vec<bool>), Error> {
    let (header, start) = header_line(file)?;
    let packed_rows = header.format() <= DshFormat::V1;
    // Each line is read on its own, half of them on each of two threads; what the lines
    // mean together (gaps, a torn tail, damage before a later turn end) is decided after,
    // in order. A final line without its line feed is not read: it is the torn tail.
    let mut lines: Vec<(usize, usize)> = Vec::new();
    let mut pos = start;
    for end in memchr::memchr_iter(b'\n', file.get(start..).unwrap_or_default()) {
        lines.push((pos, start + end + 1));
        pos = start + end + 1;
    }
    let read = on_two_threads(lines, |_, half| {
        half.into_iter()
            .map(|(from, to)| (to, read_line(line_text(&file[from..to - 1]), packed_rows)))
            .collect::<Vec<_>>()
    });
    let mut committed = start;
    let mut events: Vec<String> = Vec::new();
    let mut checked: Vec<bool> = Vec::new();
    let mut issue: Option<(usize, String)> = None;
    // DSH numbers the lines after the header from 1.
    for (line_no, (line_end, line)) in (1..).zip(read.0.into_iter().chain(read.1)) {
        let line = match line {
            Ok(line) => line,
            Err(LineError::Null) => {
                return Err(Error::invalid(
                    events.len() as u64,
                    "no type",
                    Rule::Envelope,
                    format!("line {line_no} is JSON null{}", file_line(line_no)),
                ))
            }
            Err(LineError::Unparsable) => {
                issue.get_or_insert((
                    line_no,
                    format!("unparsable at line {line_no}{}", file_line(line_no)),
                ));
                continue;
            }
        };
        if let Some((issue_line, detail)) = &issue {
            if line.has_turn_end {
                let detail = format!(
                    "{detail}, yet line {} of the file holds a later turn/end, so this is not a torn tail",
                    line_no + 1
                );
                return Err(Error::Corrupt {
                    line: *issue_line,
                    detail,
                });
            }
            continue;
        }
        let expected = events.len() as u64;
        let gap = line.seqs.iter().enumerate().find_map(|(k, got)| {
            (*got != Some((expected + k as u64) as f64)).then(|| (expected + k as u64, *got))
        });
        if let Some((want, got)) = gap {
            let got = got.map_or_else(|| "no seq".to_owned(), json::js_number);
            let detail = format!(
                "seq gap in committed region at line {line_no} (expected {want}, got {got}){}",
                file_line(line_no)
            );
            if line.has_turn_end {
                return Err(Error::Corrupt {
                    line: line_no,
                    detail,
                });
            }
            issue = Some((line_no, detail));
            continue;
        }
        checked.extend(std::iter::repeat_n(line.lossless, line.records.len()));
        events.extend(line.records);
        committed = line_end;
    }
    let tail = (committed < file.len()).then(|| TailCut {
        committed_bytes: committed,
        file_bytes: file.len(),
        reason: issue.map_or_else(|| "torn final record (no line feed)".to_owned(), |(_, d)| d),
    });
    Ok((
        ScannedLog {
            header,
            events,
            tail,
        },
        checked,
    ))
}

/// `work` on each half of `items` (the first half here, the second on a thread of its
/// own when the halves are large enough to pay for it and the system gives one), with the
/// index of the half's first item; the two results in order.
fn on_two_threads<T: Send, R: Send>(
    mut items: Vec<T>,
    work: impl Fn(usize, Vec<T>) -> R + Sync,
) -> (R, R) {
    let half = items.len() / 2;
    let second = items.split_off(half);
    if half < TWO_THREADS_FROM {
        // A thread costs more than a few lines' parse.
        return (work(0, items), work(half, second));
    }
    // The second half waits here until its thread takes it, so that a thread the system
    // refuses (a limit on threads) leaves it to this one instead of losing it.
    let slot = std::sync::Mutex::new(Some(second));
    std::thread::scope(|scope| {
        let (work, slot) = (&work, &slot);
        let take = move || {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            slot.take().unwrap_or_default()
        };
        let later = std::thread::Builder::new().spawn_scoped(scope, move || work(half, take()));
        let first = work(0, items);
        let second = match later {
            Ok(later) => later
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => work(half, take()),
        };
        (first, second)
    })
}

/// Fewer lines than this in each half are parsed on the calling thread alone.
const TWO_THREADS_FROM: usize = 512;

/// One event line, read apart from the others: its envelopes, whether it is lossless
/// JSON as a whole, whether one of them is a `turn/end`, and each one's seq.
struct LineRead {
    records: Vec<String>,
    lossless: bool,
    has_turn_end: bool,
    seqs: Vec<Option<f64>>,
}

fn read_line(line: &[u8], packed_rows: bool) -> Result<LineRead, LineError> {
    let (records, lossless) = parse_line(line, packed_rows)?;
    let mut has_turn_end = false;
    let seqs = records
        .iter()
        .map(|r| {
            let envelope = JsonRef::new(r);
            has_turn_end |= envelope
                .get("type")
                .is_some_and(|t| t.as_str().as_deref() == Some("turn/end"));
            envelope.get("seq").and_then(|s| s.as_f64())
        })
        .collect();
    Ok(LineRead {
        records,
        lossless,
        has_turn_end,
        seqs,
    })
}

/// DSH numbers the lines after the header from 1, and its messages (kept word for word, so
/// they match DSH's) use that number; this names the same line as an editor counts it.
fn file_line(record_line: usize) -> String {
    format!(
        "; that is line {} of the file (DSH counts the lines after the header)",
        record_line + 1
    )
}

enum LineError {
    Unparsable,
    Null,
}

fn type_of(raw: &str) -> Option<String> {
    JsonRef::new(raw)
        .get("type")
        .and_then(|t| t.as_str())
        .map(|t| t.into_owned())
}

/// The envelopes of one line, and whether the line is lossless JSON as a whole.
fn parse_line(line: &[u8], packed_rows: bool) -> Result<(Vec<String>, bool), LineError> {
    let (text, lossless) = match json::validate(line) {
        Ok(text) => (text, true),
        // A lossless-rule violation still parses; the semantic load refuses it later.
        Err(e) if !e.kind.is_syntax() => (
            std::str::from_utf8(line).map_err(|_| LineError::Unparsable)?,
            false,
        ),
        Err(_) => return Err(LineError::Unparsable),
    };
    let value = JsonRef::new(text);
    if value.kind() == JsonKind::Null {
        return Err(LineError::Null);
    }
    match type_of(text) {
        // Packed chunk rows exist in V0 and V1 only; a later reader finds no seq in one.
        Some(t) if value.is_object() && ROW_TYPES.contains(&t.as_str()) && !packed_rows => {
            Err(LineError::Unparsable)
        }
        // The envelopes unpacked from a lossless row are lossless too: fixed keys, and
        // values that are the row's own text or safe integers made from its numbers.
        Some(t) if value.is_object() && ROW_TYPES.contains(&t.as_str()) => unpack_row(value)
            .map(|rows| (rows, lossless))
            .ok_or(LineError::Unparsable),
        _ => Ok((vec![value.raw().to_owned()], lossless)),
    }
}

/// Imports a DSH session file of any format, `session.jsonl` or `session.vN.jsonl`, plain
/// or zstd-compressed (recognised by its magic number, whatever the file is called).
/// A V0 file is read with `options.version`; a later one with its own format's rules
/// ([`FormatVersion::for_dsh`]), and the session keeps declaring that format.
pub fn import_jsonl(file: &[u8], options: &ImportOptions) -> Result<DshImport, Error> {
    let (imported, ()) = with_plain_text(file, |plain, zstd| {
        let (scanned, checked) = scan_checked(plain)?;
        Ok((import_scanned(scanned, checked, options, zstd)?, ()))
    })?;
    Ok(imported)
}

/// Runs `import` on the text of `file`, decompressed first when the file is zstd
/// (recognised by its magic number; `import` is told which), and reports a torn final
/// frame as the import's cut tail.
fn with_plain_text<T>(
    file: &[u8],
    import: impl FnOnce(&[u8], bool) -> Result<(DshImport, T), Error>,
) -> Result<(DshImport, T), Error> {
    if !zstd_file::is_zstd(file) {
        return import(file, false);
    }
    let decoded = zstd_file::decode(file)?;
    let (mut imported, more) = import(&decoded.plain, true)?;
    note_torn_frame(&mut imported, &decoded);
    Ok((imported, more))
}

/// A compressed file whose last frame was torn, and whose decompressed stream was not cut
/// otherwise, reports the torn frame as its cut tail.
fn note_torn_frame(imported: &mut DshImport, decoded: &zstd_file::Decoded) {
    if decoded.torn_frame_bytes > 0 && imported.tail.is_none() {
        imported.tail = Some(TailCut {
            committed_bytes: decoded.plain.len(),
            file_bytes: decoded.plain.len(),
            reason: format!(
                "torn final zstd frame ({} compressed bytes that end inside the frame)",
                decoded.torn_frame_bytes
            ),
        });
    }
}

/// The import of a file's scanned text (`checked[i]`: event line `i` was found lossless).
fn import_scanned(
    scanned: ScannedLog,
    checked: Vec<bool>,
    options: &ImportOptions,
    zstd: bool,
) -> Result<DshImport, Error> {
    let (header, events) = parse_scanned(scanned.header, scanned.events, checked, options)?;
    // A header declaring V1 or later is read with its own format's rules
    // (`SessionState::new` picks them); V0 with the caller's.
    let session = Session::from_events(header, options.version.clone(), events)?;
    finish_import(session, scanned.tail, options, zstd)
}

/// The events of a scanned file, parsed; the header checked as `options` asks.
fn parse_scanned(
    header: SessionHeader,
    raw: Vec<String>,
    checked: Vec<bool>,
    options: &ImportOptions,
) -> Result<(SessionHeader, Vec<Event>), Error> {
    if options.strict_header {
        header.validate_strict()?;
    }
    // A line the scan found lossless is not scanned again, and its text moves into the event.
    // Half of the events are parsed on another thread; the first error in order is reported.
    let raw: Vec<(String, bool)> = raw.into_iter().zip(checked).collect();
    let (first, second) = on_two_threads(raw, |offset, half| {
        half.into_iter()
            .enumerate()
            .map(|(i, (raw, lossless))| Event::parse_checked(raw, (offset + i) as u64, !lossless))
            .collect::<Result<Vec<_>, _>>()
    });
    let mut events = first?;
    events.extend(second?);
    Ok((header, events))
}

fn finish_import(
    mut session: Session,
    tail: Option<TailCut>,
    options: &ImportOptions,
    zstd: bool,
) -> Result<DshImport, Error> {
    let closers = if options.repair {
        session.repair()?
    } else {
        Vec::new()
    };
    Ok(DshImport {
        session,
        tail,
        closers,
        zstd,
    })
}

/// [`import_jsonl`] of `file`, then [`export_dsh`] of the imported session with `export`:
/// the same session, file and errors (an import error before any export error). When the
/// export is DSH's migration to the latest format, the file is migrated while its events
/// are validated and folded, side by side on two threads, instead of after.
pub fn import_and_export(
    file: &[u8],
    import: &ImportOptions,
    export: &ExportOptions,
) -> Result<(DshImport, Vec<u8>), Error> {
    with_plain_text(file, |plain, zstd| {
        let (scanned, checked) = scan_checked(plain)?;
        if needs_migration(scanned.header.format(), export.format) {
            return import_and_migrate(scanned, checked, import, export, zstd, None);
        }
        let imported = import_scanned(scanned, checked, import, zstd)?;
        let out = export_dsh(&imported.session, export)?;
        Ok((imported, out))
    })
}

/// [`import_and_export`] with the file written to `out`, from its current position: a
/// migration hands its text to the file while it runs instead of collecting it first, so
/// writing overlaps the work. On an error, what was written is not a whole file: the
/// caller removes it. When repair adds closers, the file is cut back to the position it had
/// at the call and written again, so `out` must not be opened in append mode (its position
/// would read 0 and the cut would remove what the file held before).
pub fn import_and_export_to(
    file: &[u8],
    import: &ImportOptions,
    export: &ExportOptions,
    out: &mut std::fs::File,
) -> Result<DshImport, Error> {
    let (imported, ()) = with_plain_text(file, |plain, zstd| {
        let (scanned, checked) = scan_checked(plain)?;
        if needs_migration(scanned.header.format(), export.format) {
            let (imported, _) =
                import_and_migrate(scanned, checked, import, export, zstd, Some(&mut *out))?;
            return Ok((imported, ()));
        }
        let imported = import_scanned(scanned, checked, import, zstd)?;
        write_out(out, &export_dsh(&imported.session, export)?)?;
        Ok((imported, ()))
    })?;
    Ok(imported)
}

fn write_out(out: &mut std::fs::File, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    out.write_all(bytes).map_err(|e| Error::Output {
        detail: e.to_string(),
    })
}

/// [`import_and_export`] of a scanned file that DSH's migration exports: the events are
/// folded on one thread while the other migrates them. With `out`, the migrated file is
/// written there (and the bytes returned are empty).
fn import_and_migrate(
    scanned: ScannedLog,
    checked: Vec<bool>,
    import: &ImportOptions,
    export: &ExportOptions,
    zstd: bool,
    mut out: Option<&mut std::fs::File>,
) -> Result<(DshImport, Vec<u8>), Error> {
    use std::io::Seek;
    let (header, mut events) = parse_scanned(scanned.header, scanned.events, checked, import)?;
    Session::upgrade_all(&header, &mut events)?;
    let version = import.version.clone();
    let output = |e: std::io::Error| Error::Output {
        detail: e.to_string(),
    };
    let start = match out.as_mut() {
        Some(file) => Some(file.stream_position().map_err(output)?),
        None => None,
    };
    let (folded, migrated) = std::thread::scope(|scope| {
        let fold = scope.spawn(|| Session::fold_all(header.clone(), version, &events));
        let migrated = match out.as_mut() {
            Some(file) => crate::migrate::write_latest(
                &header,
                &events,
                &export.children,
                export.zstd,
                &mut **file,
            )
            .map(|()| Vec::new()),
            None => crate::migrate::export_latest(&header, &events, &export.children, export.zstd),
        };
        let folded = fold
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (folded, migrated)
    });
    let session = Session::from_folded(folded?, events);
    let imported = finish_import(session, scanned.tail, import, zstd)?;
    if imported.closers.is_empty() {
        return Ok((imported, migrated?));
    }
    // Closers joined the session: they are migrated with it.
    let bytes = export_dsh(&imported.session, export)?;
    match (out, start) {
        (Some(file), Some(start)) => {
            file.set_len(start).map_err(output)?;
            file.seek(std::io::SeekFrom::Start(start)).map_err(output)?;
            write_out(file, &bytes)?;
            Ok((imported, Vec::new()))
        }
        _ => Ok((imported, bytes)),
    }
}

/// How to export a session as a DSH file.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExportOptions {
    /// The format to write; `None` picks [`export_format`]'s choice.
    pub format: Option<DshFormat>,
    /// Write DSH's zstd layout (header frame, then an event frame) instead of plain JSONL.
    pub zstd: bool,
    /// The session's direct child sessions, for its migration to V4: DSH ends a migrated
    /// parent's log with a `subagent/catalog` entry for each child its catalog lacks, so a
    /// parent exported without them is the file DSH writes when it finds no children.
    /// [`ChildFact::of`] reads a child; `Store` exports find them in the store.
    pub children: Vec<ChildFact>,
}

impl ExportOptions {
    /// Sets [`format`](Self::format).
    #[must_use]
    pub fn with_format(mut self, format: Option<DshFormat>) -> Self {
        self.format = format;
        self
    }

    /// Sets [`children`](Self::children).
    #[must_use]
    pub fn with_children(mut self, children: Vec<ChildFact>) -> Self {
        self.children = children;
        self
    }

    /// Sets [`zstd`](Self::zstd).
    #[must_use]
    pub fn with_zstd(mut self, zstd: bool) -> Self {
        self.zstd = zstd;
        self
    }
}

/// The choice of a DSH format for an export, made after seeing every event: which
/// formats hold them all, and why the others do not. Lets a store that streams events
/// choose before it writes anything.
#[derive(Debug, Clone)]
pub struct FormatChoice {
    declared: DshFormat,
    refusals: [Option<String>; 5],
}

impl FormatChoice {
    /// No event seen yet, for a session whose header declares `declared`.
    pub fn new(declared: DshFormat) -> FormatChoice {
        FormatChoice {
            declared,
            refusals: Default::default(),
        }
    }

    /// Notes which formats do not hold `event` (the first reason for each is kept).
    pub fn observe(&mut self, event: &Event) {
        for (format, refusal) in DshFormat::ALL.iter().zip(self.refusals.iter_mut()) {
            if refusal.is_none() {
                *refusal = format.holds(event).err();
            }
        }
    }

    fn refusal(&self, format: DshFormat) -> Option<&String> {
        self.refusals.get(usize::from(format.number()))?.as_ref()
    }

    /// The format to write: `requested` when it holds every event; by default the declared
    /// format when it does (the version the session was imported at), else the lowest one
    /// that does.
    pub fn choose(&self, requested: Option<DshFormat>) -> Result<DshFormat, Error> {
        if let Some(format) = requested {
            return match self.refusal(format) {
                None => Ok(format),
                Some(reason) => Err(Error::Export {
                    format,
                    reason: reason.clone(),
                }),
            };
        }
        if self.refusal(self.declared).is_none() {
            return Ok(self.declared);
        }
        DshFormat::ALL
            .into_iter()
            .find(|f| self.refusal(*f).is_none())
            .ok_or_else(|| Error::Export {
                format: DshFormat::LATEST,
                reason: format!(
                    "no DSH format holds every event as it is (at {}: {})",
                    DshFormat::LATEST,
                    self.refusal(DshFormat::LATEST).map_or("", String::as_str)
                ),
            })
    }
}

/// The format a session exports at by default (see [`FormatChoice::choose`]).
pub fn export_format(session: &Session) -> Result<DshFormat, Error> {
    choice_for(session).choose(None)
}

fn choice_for(session: &Session) -> FormatChoice {
    let mut choice = FormatChoice::new(session.header().format());
    for event in session.events() {
        choice.observe(event);
    }
    choice
}

/// The header line of an export at `format` (see [`SessionHeader::for_format`]).
pub fn header_for_format(
    header: &SessionHeader,
    format: DshFormat,
) -> Result<SessionHeader, Error> {
    header.for_format(format).map_err(|e| Error::Export {
        format,
        reason: e.to_string(),
    })
}

/// Exports a session as a DSH file of the chosen format, plain or compressed. At the
/// format the session declares, the header and every event are written byte for byte as
/// stored (an imported file comes back identical; for `.zstd`, its decompressed stream).
/// At another format, the header is rewritten for that format and cited sources are
/// written as its writer does; a format that lacks an event, or would need the event's
/// shape changed (a migration), is refused with the reason.
pub fn export_dsh(session: &Session, options: &ExportOptions) -> Result<Vec<u8>, Error> {
    let declared = session.header().format();
    if needs_migration(declared, options.format) {
        return crate::migrate::export_latest(
            session.header(),
            session.events(),
            &options.children,
            options.zstd,
        );
    }
    let plain = export_unmigrated(session, options.format)?;
    if options.zstd {
        zstd_file::encode(&plain)
    } else {
        Ok(plain)
    }
}

/// Whether an export asked for `requested` of a session declaring `declared` goes through
/// DSH's migration: an older session written as the latest format is the file DSH's own
/// migration writes, since DSH never reads a file of the latest format that it did not so
/// migrate or write natively.
pub fn needs_migration(declared: DshFormat, requested: Option<DshFormat>) -> bool {
    requested == Some(DshFormat::LATEST) && declared < DshFormat::LATEST
}

fn export_unmigrated(session: &Session, requested: Option<DshFormat>) -> Result<Vec<u8>, Error> {
    let format = choice_for(session).choose(requested)?;
    let declared = session.header().format();
    let plain = if format == declared {
        export_jsonl(session)
    } else {
        let header = header_for_format(session.header(), format)?;
        let mut out = String::with_capacity(export_capacity(session));
        out.push_str(header.raw());
        out.push('\n');
        let events: Vec<Event> = session
            .events()
            .iter()
            .map(|e| event_for_format(e.clone(), declared, format))
            .collect::<Result<_, _>>()?;
        write_packed(&mut out, &events);
        out.into_bytes()
    };
    Ok(plain)
}

/// `event`, stored in a session declaring `declared`, as an export at `format` writes it:
/// unchanged at the declared format, else with its cited sources spelled as `format`'s
/// writer spells them. The caller has checked that `format` holds it.
pub fn event_for_format(
    event: Event,
    declared: DshFormat,
    format: DshFormat,
) -> Result<Event, Error> {
    if format == declared {
        return Ok(event);
    }
    with_sources_for(event, format)
}

/// `event` with its `sourceEventSeqs` written as `format`'s writer writes them: runs of
/// three or more consecutive seqs as `[start, end]` pairs from V2 on, every seq listed
/// before. The rest of the envelope is kept byte for byte.
fn with_sources_for(event: Event, format: DshFormat) -> Result<Event, Error> {
    let rewritten = {
        let Some(seqs) = event.source_event_seqs() else {
            return Ok(event);
        };
        let raw = event.raw();
        let Some(value) = JsonRef::new(raw).get("sourceEventSeqs") else {
            return Ok(event);
        };
        let seqs: Vec<u64> = seqs.iter().map(|s| s.get()).collect();
        let text = source_list_text(&seqs, format.writes_source_ranges());
        if text == value.raw() {
            return Ok(event);
        }
        let start = value.raw().as_ptr() as usize - raw.as_ptr() as usize;
        let end = start + value.raw().len();
        format!(
            "{}{}{}",
            raw.get(..start).unwrap_or_default(),
            text,
            raw.get(end..).unwrap_or_default()
        )
    };
    Event::parse(&rewritten, event.seq().get())
}

/// A source list as JSON text; with `ranges`, DSH's V2 encoding: only a strictly
/// increasing list is compacted, a run of three or more becomes `[start, end]`.
pub(crate) fn source_list_text(seqs: &[u64], ranges: bool) -> String {
    let mut items: Vec<String> = Vec::with_capacity(seqs.len());
    let increasing = seqs.windows(2).all(|w| w[0] < w[1]);
    let mut i = 0;
    while let Some(&start) = seqs.get(i) {
        let mut end = start;
        if ranges && increasing {
            while seqs.get(i + 1) == Some(&(end + 1)) {
                i += 1;
                end += 1;
            }
        }
        match end - start {
            0 => items.push(start.to_string()),
            1 => {
                items.push(start.to_string());
                items.push(end.to_string());
            }
            _ => items.push(format!("[{start},{end}]")),
        }
        i += 1;
    }
    format!("[{}]", items.join(","))
}

fn export_capacity(session: &Session) -> usize {
    session
        .events()
        .iter()
        .map(|e| e.raw().len() + 1)
        .sum::<usize>()
        + 256
}

/// Exports a session as DSH JSONL: the header line verbatim, then the events as one
/// write batch (chunk runs packed). [`PackedLines`](crate::PackedLines) writes the same
/// lines from a stream of events.
pub fn export_jsonl(session: &Session) -> Vec<u8> {
    let mut out = String::with_capacity(export_capacity(session));
    out.push_str(session.header().raw());
    out.push('\n');
    write_packed(&mut out, session.events());
    out.into_bytes()
}
