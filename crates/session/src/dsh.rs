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
use crate::session::Session;
use crate::version::FormatVersion;

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
    /// Where the file was cut, if it was.
    pub tail: Option<TailCut>,
    /// Seqs of the closers appended by repair.
    pub closers: Vec<Seq>,
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

/// The physical scan of spec §7.
pub fn scan(file: &[u8]) -> Result<ScannedLog, Error> {
    let header_end = file.iter().position(|b| *b == b'\n');
    let header_bytes = line_text(&file[..header_end.unwrap_or(file.len())]);
    let header_text = std::str::from_utf8(header_bytes).map_err(|_| Error::Header {
        detail: "the header line is not UTF-8".into(),
    })?;
    let header = SessionHeader::parse(header_text)?;
    let mut pos = header_end.map_or(file.len(), |e| e + 1);
    let mut committed = pos;
    let mut events: Vec<String> = Vec::new();
    let mut issue: Option<(usize, String)> = None;
    // DSH numbers the lines after the header from 1.
    let mut line_no = 0;
    while let Some(len) = file
        .get(pos..)
        .and_then(|rest| rest.iter().position(|b| *b == b'\n'))
    {
        line_no += 1;
        let line = line_text(&file[pos..pos + len]);
        let line_end = pos + len + 1;
        pos = line_end;
        let records = match parse_line(line) {
            Ok(records) => records,
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
        let has_turn_end = records
            .iter()
            .any(|r| type_of(r).as_deref() == Some("turn/end"));
        if let Some((issue_line, detail)) = &issue {
            if has_turn_end {
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
        let gap = records.iter().enumerate().find_map(|(k, r)| {
            let got = JsonRef::new(r).get("seq").and_then(|s| s.as_f64());
            (got != Some((expected + k as u64) as f64)).then(|| (expected + k as u64, got))
        });
        if let Some((want, got)) = gap {
            let got = got.map_or_else(|| "no seq".to_owned(), json::js_number);
            let detail = format!(
                "seq gap in committed region at line {line_no} (expected {want}, got {got}){}",
                file_line(line_no)
            );
            if has_turn_end {
                return Err(Error::Corrupt {
                    line: line_no,
                    detail,
                });
            }
            issue = Some((line_no, detail));
            continue;
        }
        events.extend(records);
        committed = line_end;
    }
    let tail = (committed < file.len()).then(|| TailCut {
        committed_bytes: committed,
        file_bytes: file.len(),
        reason: issue.map_or_else(|| "torn final record (no line feed)".to_owned(), |(_, d)| d),
    });
    Ok(ScannedLog {
        header,
        events,
        tail,
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

fn parse_line(line: &[u8]) -> Result<Vec<String>, LineError> {
    let text = match json::validate(line) {
        Ok(text) => text,
        // A lossless-rule violation still parses; the semantic load refuses it later.
        Err(e) if !e.kind.is_syntax() => {
            std::str::from_utf8(line).map_err(|_| LineError::Unparsable)?
        }
        Err(_) => return Err(LineError::Unparsable),
    };
    let value = JsonRef::new(text);
    if value.kind() == JsonKind::Null {
        return Err(LineError::Null);
    }
    match type_of(text) {
        Some(t) if value.is_object() && ROW_TYPES.contains(&t.as_str()) => {
            unpack_row(value).ok_or(LineError::Unparsable)
        }
        _ => Ok(vec![value.raw().to_owned()]),
    }
}

/// Imports a DSH `session.jsonl` (uncompressed).
pub fn import_jsonl(file: &[u8], options: &ImportOptions) -> Result<DshImport, Error> {
    let scanned = scan(file)?;
    if options.strict_header {
        scanned.header.validate_strict()?;
    }
    let events = scanned
        .events
        .iter()
        .enumerate()
        .map(|(i, raw)| Event::parse(raw, i as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let mut session = Session::from_events(scanned.header, options.version.clone(), events)?;
    let closers = if options.repair {
        session.repair()?
    } else {
        Vec::new()
    };
    Ok(DshImport {
        session,
        tail: scanned.tail,
        closers,
    })
}

/// Exports a session as DSH JSONL: the header line verbatim, then the events as one
/// write batch (chunk runs packed). [`PackedLines`](crate::PackedLines) writes the same
/// lines from a stream of events.
pub fn export_jsonl(session: &Session) -> Vec<u8> {
    let mut out = String::with_capacity(
        session
            .events()
            .iter()
            .map(|e| e.raw().len() + 1)
            .sum::<usize>()
            + 256,
    );
    out.push_str(session.header().raw());
    out.push('\n');
    write_packed(&mut out, session.events());
    out.into_bytes()
}
