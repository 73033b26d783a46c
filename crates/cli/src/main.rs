//! `sessionlog`: the command-line tool for sessionlog stores.
//!
//! The command names, flags, output lines and exit codes are a stable contract that scripts
//! and tests outside the project drive. Exit codes: 0 success; 1 damage (found by `verify`,
//! or met by any command); 2 usage, environment or I/O error (a missing session or store, a
//! store or session held elsewhere); 3 refused input. Errors are one line on stderr; the code
//! follows from the error's [`ErrorClass`] alone (see [`exit_code`]).

#![forbid(unsafe_code)]

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use sessionlog_log::{Access, Durability, ErrorClass, RealStorage};

// The CLI's imports, exports and migrations allocate and free millions of small values
// across threads; jemalloc does that with about a quarter less CPU time than the system
// allocator (`benches/benches/migrate.rs` measures both). It is built with thread caches
// that keep freed blocks up to 128 KiB (`.cargo/config.toml`): with its default of 32 KiB,
// the 24 to 76 KiB buffers the log reads the active segment into came back as fresh pages,
// and the demo spent half its CPU time more, most of it in page faults. The library takes
// the allocator of the program that links it.
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod demo;
mod dump;
mod gc;
mod migrate;
mod remote;
mod sessions;
mod tokens;
mod views;

#[derive(Parser, Debug)]
#[command(
    name = "sessionlog",
    version,
    about = "An embedded storage engine for AI-agent sessions: inspect, verify and drive a store."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Raw streams: append and read payload lines in a namespace of their own (never a session).
    #[command(subcommand)]
    Log(LogCommand),
    /// Check every checksum, footer and index entry of a store, then decode every session
    /// event and check each session's invariants (header first, gap-free seqs, every event
    /// valid under the session's rules). Exit 1 when anything is damaged.
    Verify {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Checksums and structure only: skip decoding and folding the sessions.
        #[arg(long)]
        fast: bool,
    },
    /// Delete a session: its name is free at once; its events stay on disk until `gc`.
    Delete {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session to delete.
        #[arg(long)]
        session: String,
    },
    /// Give back the space of deleted sessions: remove the sealed segments that hold nothing
    /// live and rewrite the mostly dead ones. With a retention policy, delete the sessions it
    /// names first. Prints sessions deleted, segments removed and rewritten and the bytes
    /// before and after.
    Gc {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// First delete every session whose last event is older than this: a number and a
        /// unit, s, m, h, d or w (`30d`, `12h`).
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// First delete the sessions named in this file, one per line (`-` reads stdin).
        #[arg(long, value_name = "FILE")]
        sessions_from: Option<PathBuf>,
        /// Rewrite a sealed segment that still holds live events when they take less than
        /// this percentage of its record bytes (0 to 100; 0 never rewrites, 100 rewrites
        /// every segment that holds any deleted session's events). Default 50.
        #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
        rewrite_below: Option<u32>,
        /// Also compress every sealed segment not compressed yet (zstd blocks; reads
        /// decompress one block), sealing the active segment first so it is compressed
        /// too. Compressed segments stay compressed.
        #[arg(long)]
        compress: bool,
        /// The zstd level --compress compresses at, 1 to 19 (default 3). Higher levels store
        /// fewer bytes and compress slower: 19 took about 20% fewer bytes than 3 on a
        /// generated agent session, at about 4 MB/s against 140. Reads cost the same.
        #[arg(long, value_name = "LEVEL", requires = "compress", value_parser = zstd_level)]
        level: Option<i32>,
    },
    /// Segments, streams, records, bytes and index memory of a store; with --session, the
    /// `stats` projection of that session (events and bytes by type, turns and end reasons,
    /// tool calls and errors by tool, exact usage, estimated tokens).
    Stats {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Count this session's events instead.
        #[arg(long)]
        session: Option<String>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every tool call of a session: tool, result status, time from call to result, call
    /// id, arguments, and the replacement that shadowed its result (the `tool-audit`
    /// projection).
    Tools {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// One JSON object per call, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Import a DeepSeek Harness session file of any format version (session.jsonl,
    /// session.vN.jsonl), plain or zstd-compressed (recognised by its content).
    Import {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session file.
        file: PathBuf,
        /// Session name (default: the header's id).
        #[arg(long)]
        session: Option<String>,
    },
    /// Print a session as a DeepSeek Harness session file (session.jsonl or
    /// session.vN.jsonl, plain or zstd).
    Export {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        #[command(flatten)]
        write: DshWriteArgs,
    },
    /// Append each stdin line as an event; print `{"session":NAME,"seq":N}` once committed.
    #[command(after_long_help = APPEND_HELP)]
    Append {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// Create the session if it does not exist.
        #[arg(long)]
        create: bool,
        /// First close a turn or compaction left open by an earlier writer (restart repair),
        /// printing the closers appended on stderr.
        #[arg(long)]
        repair: bool,
        /// When each event counts as committed.
        #[arg(long, value_enum, default_value_t = DurabilityArg::Sync)]
        durability: DurabilityArg,
    },
    /// Print a session's events as JSONL, envelopes as stored.
    Events {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// First seq to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print the surface (current node seqs) as a JSON array.
    Surface {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
    },
    /// Print the derived model messages as a JSON array.
    Derive {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
    },
    /// Open a session with restart repair; print the closers appended (JSONL).
    Open {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
    },
    /// List sessions in name order, page by page.
    Sessions {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Print as JSON lines.
        #[arg(long)]
        json: bool,
        /// At most this many sessions.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Start after this session name.
        #[arg(long)]
        after: Option<String>,
    },
    /// A readable transcript: one block per surface message (role, text, tool calls and
    /// results), streamed chunks collapsed, shadowed ranges and structural events marked.
    Show {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// One line per event instead (type and abbreviated message).
        #[arg(long)]
        raw: bool,
    },
    /// Token accounting of a session: exact provider usage (per request and cumulative),
    /// estimates (labelled with their counter) and the context pressure of the next request.
    Tokens {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compact a session now: summarize all but a recent tail into one replacement, and
    /// optionally shorten oversized tool results. The originals stay in the log.
    Compact {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The session.
        #[arg(long)]
        session: String,
        /// Keep this many estimated tokens of recent surface unshadowed (default: a quarter).
        #[arg(long)]
        keep_tokens: Option<u64>,
        /// Also shorten tool results larger than this many bytes.
        #[arg(long)]
        prune_over: Option<usize>,
        /// Use this file's text as the summary instead of the built-in deterministic summarizer.
        #[arg(long)]
        summary_file: Option<PathBuf>,
    },
    /// The main job: concurrent agent sessions with durable group commits, compaction, a
    /// writer killed mid-turn and recovered, verification against what was acknowledged, and
    /// a summary table. Runs on a fresh store in a temporary directory, removed at the end
    /// unless --keep is given, or in --dir (kept).
    Demo {
        /// Store directory (must be empty or absent); default: a new temporary directory.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Concurrent agent sessions.
        #[arg(long, default_value_t = 64)]
        sessions: usize,
        /// Turns per session.
        #[arg(long, default_value_t = 24)]
        turns: usize,
        /// Sessions of the writer that is killed.
        #[arg(long, default_value_t = 8)]
        crash_sessions: usize,
        /// Seed of the generated traffic.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Keep the temporary store after the run (a --dir store is always kept).
        #[arg(long)]
        keep: bool,
    },
    /// The demo's child writer (killed by the demo).
    #[command(hide = true)]
    DemoChild {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Sessions to write.
        #[arg(long)]
        sessions: usize,
        /// Seed.
        #[arg(long)]
        seed: u64,
    },
    /// Check or rebuild the projection cache.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Ship a store to object storage: its sealed segments, the durable tail of its active
    /// segment and its session checkpoints, then a manifest that makes them one shipped state
    /// (only what is new since the last ship is uploaded). Takes the store's lock: inside an
    /// application that has the store open, ship through the library instead.
    Ship {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Where to: s3://BUCKET/PREFIX (or file://DIR for a local directory).
        #[arg(long, value_name = "URL")]
        to: String,
        #[command(flatten)]
        s3: remote::S3Args,
        #[command(flatten)]
        pointer: remote::PointerArgs,
    },
    /// Restore the newest shipped state into an empty or absent directory: every object is
    /// checked against its checksum and the store is verified before it appears there.
    Restore {
        /// Where from: s3://BUCKET/PREFIX (or file://DIR).
        #[arg(long, value_name = "URL")]
        from: String,
        /// The directory to restore into (empty or absent).
        #[arg(long)]
        store: PathBuf,
        /// Restore only this session into a store of its own (repeat for several).
        #[arg(long)]
        session: Vec<String>,
        #[command(flatten)]
        s3: remote::S3Args,
        #[command(flatten)]
        pointer: remote::PointerArgs,
    },
    /// Print the batches and records of a store's segments with their headers.
    Dump {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// Only this segment.
        #[arg(long)]
        segment: Option<u64>,
    },
    /// Copy every session from one store to another (sqlite:PATH, dsh:DIR or store:DIR).
    /// A dsh: source may be a DSH home, its sessions/ root (every project) or one project
    /// directory. The source is only read; a missing source is refused.
    Migrate {
        /// Where the sessions are.
        #[arg(long)]
        from: String,
        /// Where they go; must not hold any of them yet.
        #[arg(long)]
        to: String,
        /// Accept a source without sessions (otherwise refused with exit 3).
        #[arg(long)]
        allow_empty: bool,
        /// With a dsh: destination, how its session files are written.
        #[command(flatten)]
        write: DshWriteArgs,
    },
}

/// How `export` and `migrate --to dsh:` write DeepSeek Harness session files.
#[derive(clap::Args, Debug, Clone, Default)]
struct DshWriteArgs {
    /// The DSH format version to write, 0 to 4 (default: the version the session was
    /// imported at when it holds every event, else the lowest version that does). A version
    /// that lacks one of the session's events is refused (exit 3) with the reason.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    format_version: Option<u8>,
    /// Compress as DSH does: zstd frames, the header line alone in the first.
    #[arg(long, value_enum)]
    compress: Option<Compression>,
}

/// A DSH session file compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Compression {
    /// Concatenated, checksummed zstd frames (`.jsonl.zstd`).
    Zstd,
}

impl DshWriteArgs {
    fn options(&self) -> sessionlog::session::ExportOptions {
        sessionlog::session::ExportOptions::default()
            .with_format(
                self.format_version
                    .and_then(|n| sessionlog::session::DshFormat::from_number(u64::from(n))),
            )
            .with_zstd(self.compress == Some(Compression::Zstd))
    }

    fn is_default(&self) -> bool {
        self.format_version.is_none() && self.compress.is_none()
    }
}

/// The line format of `append`, shown by `append --help`.
const APPEND_HELP: &str = r#"Line format: one event per line, a JSON object with "type" and "data", and
"surfaceOp" for surface events; "seq" and "time" may be omitted (the next seq and the
current time are used), "sourceEventSeqs" and "ignorable" as in the session format.
Blank lines are skipped. Example (a complete turn):

  {"type":"turn/start","data":{"turn":1}}
  {"type":"step/start","data":{"turn":1,"step":1}}
  {"type":"user/message","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}
  {"type":"step/end","data":{"turn":1,"step":1}}
  {"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}

Nothing is repaired implicitly: events that continue an open turn are accepted; an event
the session's rules refuse (e.g. a new turn/start while a turn is open) exits 3 naming
the line, and that line changes nothing. Lines before it stay committed. To close a turn
left open by an earlier writer, run `sessionlog open` (prints the closers) or pass
--repair. Input that is not UTF-8 exits 3 naming the line."#;

#[derive(Subcommand, Debug)]
enum LogCommand {
    /// Append each stdin line as one record of a raw stream; print `{"stream":NAME,"seq":N}`
    /// once it is committed (durable with `--durability sync`). Refused (exit 3) when NAME
    /// is a session: raw streams live in their own namespace and never touch sessions.
    Append {
        /// The store directory (created if missing).
        #[arg(long)]
        store: PathBuf,
        /// The raw stream (created if missing).
        #[arg(long)]
        stream: String,
        /// When each line counts as committed.
        #[arg(long, value_enum, default_value_t = DurabilityArg::Sync)]
        durability: DurabilityArg,
    },
    /// Print the payloads of a raw stream, one per line, in seq order.
    Read {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The stream.
        #[arg(long)]
        stream: String,
        /// First seq to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print up to this seq, exclusive.
        #[arg(long)]
        to: Option<u64>,
    },
    /// Delete a raw stream: its name is free at once; its records stay on disk until `gc`.
    /// A name that is no raw stream exits 2, like a missing session.
    Delete {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
        /// The raw stream.
        #[arg(long)]
        stream: String,
    },
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// Compare every session's cache, every session projection's checkpoint and every
    /// store-wide projection's with a fold of the log; exit 1 if any is unusable or wrong.
    Verify {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
    },
    /// Delete every cache file and rebuild it from the log.
    Rebuild {
        /// The store directory.
        #[arg(long)]
        store: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DurabilityArg {
    Sync,
    Buffered,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// The exit code of an error of `class`; the only place the tool maps errors to exit codes.
pub(crate) fn exit_code(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Refused => 3,
        ErrorClass::Damaged => 1,
        _ => 2,
    }
}

impl From<sessionlog_log::Error> for Failure {
    fn from(e: sessionlog_log::Error) -> Self {
        Failure::new(exit_code(e.class()), e.to_string())
    }
}

impl From<sessionlog::Error> for Failure {
    fn from(e: sessionlog::Error) -> Self {
        Failure::new(exit_code(e.class()), e.to_string())
    }
}

impl From<sessionlog::StoreError> for Failure {
    fn from(e: sessionlog::StoreError) -> Self {
        Failure::new(exit_code(e.class()), e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::new(2, e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.code == 0 => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("sessionlog: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// A `--level` argument: one of the zstd levels a store compresses at.
fn zstd_level(arg: &str) -> Result<i32, String> {
    let level = arg
        .parse::<i32>()
        .map_err(|_| format!("{arg} is not a zstd level (a whole number)"))?;
    sessionlog_log::Compression::zstd(level).map(|_| level)
}

fn run(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Log(LogCommand::Append {
            store,
            stream,
            durability,
        }) => log_append(&store, &stream, durability),
        Command::Log(LogCommand::Read {
            store,
            stream,
            from,
            to,
        }) => log_read(&store, &stream, from, to),
        Command::Log(LogCommand::Delete { store, stream }) => gc::delete_raw(&store, &stream),
        Command::Verify { store, json, fast } => verify(&store, json, fast),
        Command::Stats {
            store,
            session: Some(session),
            json,
        } => views::stats(&store, &session, json),
        Command::Stats {
            store,
            session: None,
            json,
        } => stats(&store, json),
        Command::Tools {
            store,
            session,
            json,
        } => views::tools(&store, &session, json),
        Command::Delete { store, session } => gc::delete(&store, &session),
        Command::Gc {
            store,
            json,
            older_than,
            sessions_from,
            rewrite_below,
            compress,
            level,
        } => gc::gc(
            &store,
            json,
            older_than.as_deref(),
            sessions_from.as_deref(),
            gc::Rewrites {
                below_live_percent: rewrite_below,
                compress: compress.then(|| {
                    level.map_or(sessionlog_log::Compression::ZSTD, |level| {
                        sessionlog_log::Compression::Zstd { level }
                    })
                }),
            },
        ),
        Command::Dump { store, segment } => dump::dump(&store, segment),
        Command::Demo {
            dir,
            sessions,
            turns,
            crash_sessions,
            seed,
            keep,
        } => demo::demo(demo::DemoArgs {
            dir,
            sessions,
            turns,
            crash_sessions,
            seed,
            keep,
        }),
        Command::DemoChild {
            store,
            sessions,
            seed,
        } => demo::demo_child(&store, sessions, seed),
        Command::Tokens {
            store,
            session,
            json,
        } => tokens::tokens(&store, &session, json),
        Command::Compact {
            store,
            session,
            keep_tokens,
            prune_over,
            summary_file,
        } => tokens::compact(
            &store,
            &session,
            keep_tokens,
            prune_over,
            summary_file.as_deref(),
        ),
        Command::Import {
            store,
            file,
            session,
        } => sessions::import(&store, &file, session.as_deref()),
        Command::Export {
            store,
            session,
            write,
        } => sessions::export(&store, &session, &write.options()),
        Command::Append {
            store,
            session,
            create,
            repair,
            durability,
        } => sessions::append(&store, &session, create, repair, durability.into()),
        Command::Events {
            store,
            session,
            from,
        } => sessions::events(&store, &session, from),
        Command::Surface { store, session } => sessions::surface(&store, &session),
        Command::Derive { store, session } => sessions::derive(&store, &session),
        Command::Open { store, session } => sessions::open(&store, &session),
        Command::Sessions {
            store,
            json,
            limit,
            after,
        } => sessions::list(&store, json, limit, after.as_deref()),
        Command::Show {
            store,
            session,
            raw,
        } => sessions::show(&store, &session, raw),
        Command::Cache(CacheCommand::Verify { store }) => sessions::cache_verify(&store),
        Command::Cache(CacheCommand::Rebuild { store }) => sessions::cache_rebuild(&store),
        Command::Ship {
            store,
            to,
            s3,
            pointer,
        } => remote::ship(&store, &to, s3, pointer),
        Command::Restore {
            from,
            store,
            session,
            s3,
            pointer,
        } => remote::restore(&from, &store, session, s3, pointer),
        Command::Migrate {
            from,
            to,
            allow_empty,
            write,
        } => migrate::migrate(
            &from,
            &to,
            allow_empty,
            (!write.is_default()).then(|| write.options()),
        ),
    }
}

/// Opens a store as `access` allows and prints what its recovery did. Commands that only
/// read use [`Access::ReadOnly`]: they never lock, write or repair anything.
pub(crate) fn open_store(
    dir: &std::path::Path,
    access: Access,
) -> Result<sessionlog::Store, Failure> {
    open_store_with(dir, access, store_options())
}

/// [`open_store`] with options a command changed from [`store_options`].
pub(crate) fn open_store_with(
    dir: &std::path::Path,
    access: Access,
    options: sessionlog::StoreOptions,
) -> Result<sessionlog::Store, Failure> {
    let store = sessionlog::Store::open_with_access(Arc::new(RealStorage), dir, options, access)?;
    report_recovery(store.log_reader().recovery_report());
    Ok(store)
}

/// The options every command opens a store with: the shipped projections registered, so
/// writing commands keep their checkpoints and `stats --session`, `tools` and `show` read
/// them.
pub(crate) fn store_options() -> sessionlog::StoreOptions {
    sessionlog::StoreOptions::default()
        .with_projection(sessionlog::projection::Stats)
        .with_projection(sessionlog::projection::ToolAudit)
        .with_projection(sessionlog::projection::Transcript)
        .with_store_projection(sessionlog::projection::Totals)
}

/// One stderr line per thing the open cut, rebuilt or removed (or, read-only, left out).
pub(crate) fn report_recovery(report: &sessionlog_log::RecoveryReport) {
    for line in report.actions() {
        eprintln!("sessionlog: recovery: {line}");
    }
}

/// The recovery report's lines as a JSON array, for `--json` output.
pub(crate) fn recovery_json(report: &sessionlog_log::RecoveryReport) -> serde_json::Value {
    serde_json::Value::from(report.actions())
}

/// Writes to stdout; a closed pipe (e.g. `| head`) ends the command quietly.
pub(crate) fn out(w: &mut impl Write, bytes: &[u8]) -> Result<(), Failure> {
    w.write_all(bytes).map_err(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::new(0, "")
        } else {
            e.into()
        }
    })
}

fn log_append(
    store: &std::path::Path,
    stream: &str,
    durability: DurabilityArg,
) -> Result<u8, Failure> {
    let store = open_store(store, Access::CreateOrOpen)?;
    let raw = store.raw_stream(stream)?;
    let durability = Durability::from(durability);
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut w = stdout.lock();
    let name = serde_json::to_string(stream).map_err(|e| Failure::new(2, e.to_string()))?;
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let receipt = raw.append(&[&line], durability)?;
        out(
            &mut w,
            format!("{{\"stream\":{name},\"seq\":{}}}\n", receipt.seqs[0]).as_bytes(),
        )?;
        w.flush()?;
    }
    store.close()?;
    Ok(0)
}

fn log_read(
    store: &std::path::Path,
    stream: &str,
    from: u64,
    to: Option<u64>,
) -> Result<u8, Failure> {
    let store = open_store(store, Access::ReadOnly)?;
    let end = to.unwrap_or(u64::MAX);
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    for record in store.raw_read(stream, from, end)? {
        let record = record?;
        out(&mut w, &record.payload)?;
        out(&mut w, b"\n")?;
    }
    w.flush()?;
    Ok(0)
}

fn verify(store: &std::path::Path, json: bool, fast: bool) -> Result<u8, Failure> {
    let report = sessionlog_log::verify_store(Arc::new(RealStorage), store)?;
    // Sessions are read through a read-only open, which changes nothing; where the
    // structure is damaged they are checked up to the damage.
    let sessions = if fast {
        None
    } else {
        Some(
            sessionlog::Store::open_read_only(store, sessionlog::StoreOptions::default())
                .and_then(|s| s.verify_sessions())
                .map_err(|e| e.to_string()),
        )
    };
    let session_damage = match &sessions {
        Some(Ok(c)) => c.damages.len(),
        _ => 0,
    };
    let intact = report.is_intact() && session_damage == 0;
    let stdout = io::stdout();
    let mut w = stdout.lock();
    if json {
        let damages: Vec<_> = report
            .damages
            .iter()
            .map(
                |d| serde_json::json!({"segment": d.segment.0, "offset": d.offset, "what": d.what}),
            )
            .collect();
        let segments: Vec<_> = report
            .segments
            .iter()
            .map(|s| serde_json::json!({"segment": s.segment.0, "bytes": s.bytes, "sealed": s.sealed, "batches": s.batches, "records": s.records, "indexEntriesChecked": s.index_entries_checked}))
            .collect();
        let sessions = sessions.as_ref().map(|checked| match checked {
            Ok(c) => {
                let damages: Vec<_> = c
                    .damages
                    .iter()
                    .map(|d| serde_json::json!({"session": d.session, "seq": d.seq, "rule": d.rule, "detail": d.detail}))
                    .collect();
                serde_json::json!({"checked": c.sessions, "events": c.events, "damages": damages})
            }
            Err(e) => serde_json::json!({"notChecked": e}),
        });
        let v = serde_json::json!({"intact": intact, "segments": segments, "damages": damages, "liveStreams": report.live_streams, "sessions": sessions});
        out(&mut w, format!("{v}\n").as_bytes())?;
    } else {
        for s in &report.segments {
            let line = format!(
                "segment {}: {} bytes, {}, {} batches, {} records, {} index entries checked\n",
                s.segment.0,
                s.bytes,
                if s.sealed { "sealed" } else { "active" },
                s.batches,
                s.records,
                s.index_entries_checked
            );
            out(&mut w, line.as_bytes())?;
        }
        for d in &report.damages {
            out(
                &mut w,
                format!(
                    "DAMAGE segment {} offset {}: {}\n",
                    d.segment.0, d.offset, d.what
                )
                .as_bytes(),
            )?;
        }
        match &sessions {
            None => out(&mut w, b"sessions: not checked (--fast)\n")?,
            Some(Err(e)) => out(&mut w, format!("sessions: not checked: {e}\n").as_bytes())?,
            Some(Ok(c)) => {
                out(
                    &mut w,
                    format!(
                        "sessions: {} checked, {} events decoded and folded\n",
                        c.sessions, c.events
                    )
                    .as_bytes(),
                )?;
                for d in &c.damages {
                    let at = d
                        .seq
                        .map_or_else(|| "header".to_owned(), |s| format!("seq {s}"));
                    out(
                        &mut w,
                        format!(
                            "DAMAGE session {:?} {at}: {} rule: {}\n",
                            d.session, d.rule, d.detail
                        )
                        .as_bytes(),
                    )?;
                }
            }
        }
        let damaged = report.damages.len() + session_damage;
        let verdict = if intact {
            "intact".to_owned()
        } else {
            format!("{damaged} damaged places")
        };
        out(&mut w, format!("{verdict}\n").as_bytes())?;
    }
    Ok(if intact { 0 } else { 1 })
}

fn stats(store: &std::path::Path, json: bool) -> Result<u8, Failure> {
    let store = open_store(store, Access::ReadOnly)?;
    let log = store.log_reader();
    let s = log.stats();
    let pct = if s.bytes == 0 {
        0.0
    } else {
        s.index_memory_bytes as f64 * 100.0 / s.bytes as f64
    };
    // The store tells sessions and raw streams apart (staged imports are neither).
    let sessions = store.session_names().len();
    let raw_streams = store.raw_stream_names().len();
    let (totals_json, totals_text) = views::store_totals(&store)?;
    let stdout = io::stdout();
    let mut w = stdout.lock();
    if json {
        let v = serde_json::json!({
            "segments": s.segments, "sessions": sessions, "rawStreams": raw_streams,
            "records": s.records, "bytes": s.bytes,
            "indexMemoryBytes": s.index_memory_bytes, "indexMemoryPercent": pct,
            "recovery": recovery_json(log.recovery_report()),
            "totals": totals_json,
        });
        out(&mut w, format!("{v}\n").as_bytes())?;
    } else {
        let text = format!(
            "segments: {}\nsessions: {sessions}\nraw streams: {raw_streams}\nrecords: {} (of live sessions and streams; `verify` counts every record in the segments, catalog records and deleted streams' included)\nbytes: {}\nindex memory: {} bytes ({pct:.3}% of data)\n",
            s.segments, s.records, s.bytes, s.index_memory_bytes
        );
        out(&mut w, text.as_bytes())?;
        out(&mut w, totals_text.as_bytes())?;
    }
    store.close()?;
    Ok(0)
}
