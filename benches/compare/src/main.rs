//! `sessionlog-compare`: sessionlog against the stores agent platforms use today (SQLite,
//! JSONL per session, raft-engine, okaywal), same workloads, same machine, same run,
//! reported as ratios next to a probe of the disk. See `README.md`.

mod appends;
mod crash;
mod feed;
mod probe;
mod replay;
mod report;
mod stats;
mod stores;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use feed::FeedKind;
use stores::Kind;

const USAGE: &str =
    "usage: sessionlog-compare [--quick] [--out DIR] [--dir DIR] [--only appends,agent,replay,crash]

  --quick   small sizes and short windows (under 2 minutes)
  --out     where results.md and results.png go (default: benches/compare/results)
  --dir     where the stores are built; must be a real disk, not tmpfs
            (default: <cargo target dir>/sessionlog-compare/stores)
  --only    run only these workloads (for development; the report shows what ran)
  --stores  only these stores: sessionlog,sessionlog-fallocated,sessionlog-store,sqlite-full,
            sqlite-normal,jsonl,raft-engine,okaywal
  --sessions  only these concurrency levels for the appends, e.g. 1,64";

#[derive(Debug)]
struct Args {
    quick: bool,
    out: PathBuf,
    dir: PathBuf,
    appends: bool,
    agent: bool,
    replay: bool,
    crash: bool,
    stores: Vec<Kind>,
    levels: Vec<usize>,
}

fn default_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            // The binary lives at `<target>/<profile>/sessionlog-compare`.
            std::env::current_exe()
                .ok()
                .and_then(|e| e.ancestors().nth(2).map(Path::to_path_buf))
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("sessionlog-compare").join("stores")
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"),
        dir: default_dir(),
        appends: true,
        agent: true,
        replay: true,
        crash: true,
        stores: Kind::ALL.to_vec(),
        levels: vec![1, 8, 64, 256],
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--out" => args.out = it.next().ok_or("--out needs a directory")?.into(),
            "--dir" => args.dir = it.next().ok_or("--dir needs a directory")?.into(),
            "--only" => {
                let list = it.next().ok_or("--only needs a list")?;
                args.appends = list.contains("appends");
                args.agent = list.contains("agent");
                args.replay = list.contains("replay");
                args.crash = list.contains("crash");
            }
            "--stores" => {
                let list = it.next().ok_or("--stores needs a list")?;
                args.stores = list
                    .split(',')
                    .map(|k| Kind::from_arg(k).ok_or(format!("unknown store {k:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--sessions" => {
                let list = it.next().ok_or("--sessions needs a list")?;
                args.levels = list
                    .split(',')
                    .map(|n| n.parse().map_err(|_| format!("bad session count {n:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// `YYYY-MM-DD HH:MM UTC` of now.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("--crash-child") {
        let (Some(kind), Some(dir), Some(n)) = (
            raw.get(2).and_then(|k| Kind::from_arg(k)),
            raw.get(3),
            raw.get(4).and_then(|n| n.parse().ok()),
        ) else {
            eprintln!("usage: sessionlog-compare --crash-child KIND DIR EVENTS_PER_SESSION");
            return ExitCode::FAILURE;
        };
        if let Err(e) = crash::child(kind, Path::new(dir), n) {
            eprintln!("crash child: {e}");
        }
        return ExitCode::FAILURE;
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The 1-minute load average.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The stores of the agent-traffic appends: sessionlog's log and `Store`, and the two ways
/// agent platforms keep sessions today.
const AGENT_STORES: [Kind; 4] = [
    Kind::Sessionlog,
    Kind::SessionlogStore,
    Kind::SqliteFull,
    Kind::Jsonl,
];

/// Durable appends of `feed`'s events at every concurrency level of `args`, for `stores`.
/// Each level's fdatasync floor, measured right before it, goes to `floors`.
fn durable_appends(
    args: &Args,
    feed: FeedKind,
    stores: &[Kind],
    (warmup, window, rounds): (Duration, Duration, u32),
    floors: &mut Vec<(usize, u64, u64)>,
) -> std::io::Result<Vec<appends::AppendResult>> {
    let mut out = Vec::new();
    let label = match feed {
        FeedKind::Fixed => "appends",
        FeedKind::Agent => "agent",
    };
    for (li, &sessions) in args.levels.iter().enumerate() {
        let floor = probe::floor_now(&args.dir, 100)?;
        floors.push((sessions, floor.p50_ns, floor.p99_ns));
        // The window is cut into slices run round-robin over the stores (a fresh store
        // each slice), so a disk that changes speed within the run weighs on every
        // store alike rather than on whichever ran at that moment.
        let mut cells: Vec<appends::Slice> =
            stores.iter().map(|_| appends::Slice::default()).collect();
        for round in 0..rounds {
            for k in 0..stores.len() {
                let i = (k + li + round as usize) % stores.len();
                let slice = appends::run(
                    stores[i],
                    feed,
                    &args.dir.join("appends"),
                    sessions,
                    warmup,
                    window / rounds,
                )?;
                cells[i].add(slice);
            }
        }
        for (kind, cell) in stores.iter().zip(cells) {
            let r = cell.finish(*kind, sessions);
            println!(
                "{label:<7} {:>3} sessions  {:<18} {:>9} events/s ({:>7} commits)  p50 {:>9}  p99 {:>9}",
                sessions,
                kind.name(),
                stats::thousands(r.per_sec),
                r.commits,
                stats::human_ns(r.latency.p50_ns),
                stats::human_ns(r.latency.p99_ns)
            );
            out.push(r);
        }
    }
    out.sort_by_key(|a| (a.sessions, Kind::ALL.iter().position(|k| *k == a.kind)));
    Ok(out)
}

fn run(args: &Args) -> std::io::Result<()> {
    let started = Instant::now();
    let load_start = loadavg();
    std::fs::create_dir_all(&args.dir)?;
    std::fs::create_dir_all(&args.out)?;
    let (warmup, window, rounds, replay_events, replay_reps, crash_per_session) = if args.quick {
        (
            Duration::from_millis(150),
            Duration::from_millis(1000),
            2u32,
            100_000,
            2,
            300,
        )
    } else {
        (
            Duration::from_millis(250),
            Duration::from_millis(4000),
            4u32,
            1_000_000,
            2,
            1_600,
        )
    };
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("stores in {} — probing the disk …", args.dir.display());
    let probe = probe::run(&args.dir)?;
    println!(
        "probe ({}): fdatasync 4 KiB p50 {} p99 {}; sequential durable {:.0} MB/s; nproc {nproc}",
        probe.fs_type,
        stats::human_ns(probe.fdatasync_4k.p50_ns),
        stats::human_ns(probe.fdatasync_4k.p99_ns),
        probe.seq_durable_mb_s
    );

    let mut floors = Vec::new();
    let appends = if args.appends {
        durable_appends(
            args,
            FeedKind::Fixed,
            &args.stores,
            (warmup, window, rounds),
            &mut floors,
        )?
    } else {
        Vec::new()
    };
    let agent_stores: Vec<Kind> = args
        .stores
        .iter()
        .copied()
        .filter(|k| AGENT_STORES.contains(k))
        .collect();
    let agent = if args.agent && !agent_stores.is_empty() {
        let mut agent_floors = Vec::new();
        durable_appends(
            args,
            FeedKind::Agent,
            &agent_stores,
            (warmup, window, rounds),
            &mut agent_floors,
        )?
    } else {
        Vec::new()
    };

    let replay = if args.replay {
        println!("replay: building a session of {replay_events} events …");
        let r = replay::run(&args.dir.join("replay"), replay_events, replay_reps)?;
        println!("replay: built in {:.1} s", r.build.as_secs_f64());
        for row in &r.rows {
            println!(
                "replay  {:<10} {:<66} {:>10}",
                row.store,
                row.what,
                stats::human_ns(stats::ns(row.time))
            );
        }
        let _ = std::fs::remove_dir_all(args.dir.join("replay"));
        Some(r)
    } else {
        None
    };

    let mut crashes = Vec::new();
    if args.crash {
        for &kind in args.stores.iter().filter(|k| k.crash_tested()) {
            let c = crash::run(kind, &args.dir.join("crash"), crash_per_session)?;
            println!(
                "crash   {:<18} reopen {:>10}  {:>6.0} B/event allocated, {:>6.0} apparent  (found {} of {})",
                kind.name(),
                stats::human_ns(stats::ns(c.reopen)),
                c.bytes_alloc as f64 / c.events.max(1) as f64,
                c.bytes_len as f64 / c.events.max(1) as f64,
                c.found,
                c.events
            );
            crashes.push(c);
        }
    }

    let report = report::Report {
        date: utc_now(),
        nproc,
        dir: args.dir.display().to_string(),
        command: format!(
            "cargo run --release --manifest-path benches/compare/Cargo.toml --{}",
            std::env::args()
                .skip(1)
                .map(|a| format!(" {a}"))
                .collect::<String>()
        ),
        quick: args.quick,
        window_secs: window.as_secs_f64(),
        rounds,
        probe,
        floors,
        appends,
        agent,
        replay,
        crash: crashes,
        crash_per_session,
        total_secs: started.elapsed().as_secs_f64(),
        load: (load_start, loadavg()),
    };
    let md = args.out.join("results.md");
    std::fs::write(&md, report.markdown())?;
    let png = args.out.join("results.png");
    report.chart(&png)?;
    println!("wrote {} and {}", md.display(), png.display());
    Ok(())
}
