//! The report: Markdown tables (`results.md`) and a chart (`results.png`).

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;

use crate::appends::{AppendResult, EVENT_BYTES};
use crate::crash::CrashResult;
use crate::probe::Probe;
use crate::replay::Replay;
use crate::stats::{human_ns, thousands};
use crate::stores::Kind;

/// Everything one run measured.
#[derive(Debug)]
pub struct Report {
    /// Date (UTC) of the run.
    pub date: String,
    /// `nproc`.
    pub nproc: usize,
    /// Directory the stores were built in.
    pub dir: String,
    /// The command line.
    pub command: String,
    /// Whether `--quick`.
    pub quick: bool,
    /// Seconds measured per store and concurrency (after warm-up).
    pub window_secs: f64,
    /// Slices the window is cut into, run round-robin over the stores.
    pub rounds: u32,
    /// The machine probe, at the start.
    pub probe: Probe,
    /// The fdatasync floor (p50, p99 ns) measured right before each concurrency level.
    pub floors: Vec<(usize, u64, u64)>,
    /// Durable appends of 1 KiB events.
    pub appends: Vec<AppendResult>,
    /// Durable appends of agent traffic.
    pub agent: Vec<AppendResult>,
    /// Replay.
    pub replay: Option<Replay>,
    /// Restart after a crash.
    pub crash: Vec<CrashResult>,
    /// Events per session in the crash test.
    pub crash_per_session: usize,
    /// Wall time of the run, seconds.
    pub total_secs: f64,
    /// `/proc/loadavg` (1-minute) at the start and the end of the run.
    pub load: (String, String),
}

fn ratio(a: f64, b: f64) -> String {
    if b <= 0.0 || !a.is_finite() || !b.is_finite() {
        return "–".into();
    }
    let r = a / b;
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// Seconds for an axis: `250 µs`, `3 ms`, `1.5 s`.
fn axis_time(secs: f64) -> String {
    let (v, unit) = if secs < 1e-3 {
        (secs * 1e6, "µs")
    } else if secs < 1.0 {
        (secs * 1e3, "ms")
    } else {
        (secs, "s")
    };
    if v >= 10.0 || (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

fn ms(d: std::time::Duration) -> String {
    human_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn find(results: &[AppendResult], kind: Kind, sessions: usize) -> Option<&AppendResult> {
    results
        .iter()
        .find(|a| a.kind == kind && a.sessions == sessions)
}

/// A table of durable appends: a row per store, per concurrency level events/s, p50 / p99,
/// and `base`'s throughput divided by the row's.
fn appends_table(s: &mut String, results: &[AppendResult], base: Kind, base_name: &str) {
    let levels: Vec<usize> = {
        let mut l: Vec<usize> = results.iter().map(|a| a.sessions).collect();
        l.dedup();
        l
    };
    let _ = write!(s, "| Store |");
    for n in &levels {
        let _ = write!(
            s,
            " {n} sessions: events/s | p50 / p99 | {base_name} ÷ store |"
        );
    }
    let _ = writeln!(s);
    let _ = write!(s, "|---|");
    for _ in &levels {
        let _ = write!(s, "---:|---:|---:|");
    }
    let _ = writeln!(s);
    for kind in Kind::ALL {
        if !results.iter().any(|a| a.kind == kind) {
            continue;
        }
        let _ = write!(s, "| {} |", kind.name());
        for n in &levels {
            match (find(results, kind, *n), find(results, base, *n)) {
                (Some(me), Some(b)) => {
                    let _ = write!(
                        s,
                        " {} | {} / {} | {} |",
                        thousands(me.per_sec),
                        human_ns(me.latency.p50_ns),
                        human_ns(me.latency.p99_ns),
                        if kind == base {
                            "1".into()
                        } else {
                            ratio(b.per_sec, me.per_sec)
                        }
                    );
                }
                _ => {
                    let _ = write!(s, " – | – | – |");
                }
            }
        }
        let _ = writeln!(s);
    }
}

impl Report {
    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let p = &self.probe;
        let _ = writeln!(s, "# sessionlog against its peers\n");
        let _ = writeln!(
            s,
            "Measured {} on this machine (`nproc` = {}), stores in `{}` ({}), {} run; \
             command: `{}`; the whole run took {:.0} s. Load average (1 min) {} at the \
             start, {} at the end: other work shares these CPUs and this disk.\n",
            self.date,
            self.nproc,
            self.dir,
            p.fs_type,
            if self.quick { "a **quick**" } else { "a full" },
            self.command,
            self.total_secs,
            self.load.0,
            self.load.1
        );
        let _ = writeln!(
            s,
            "**Machine probe** (same run, same file system): `fdatasync` of a 4 KiB overwrite \
             p50 **{}**, p99 **{}**; sequential durable bandwidth (1 MiB `pwrite` + \
             `fdatasync`) **{:.0} MB/s**, i.e. {} records of 1 KiB per second if a store \
             could turn bandwidth into records. The floor re-measured right before each \
             concurrency level: {}.\n",
            human_ns(p.fdatasync_4k.p50_ns),
            human_ns(p.fdatasync_4k.p99_ns),
            p.seq_durable_mb_s,
            thousands(p.seq_durable_mb_s * 1e6 / EVENT_BYTES as f64),
            self.floors
                .iter()
                .map(|(n, p50, p99)| format!(
                    "{n} → p50 {} / p99 {}",
                    human_ns(*p50),
                    human_ns(*p99)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        let _ = writeln!(
            s,
            "Ratios are **sessionlog ÷ store** for throughput (above 1: sessionlog does more) \
             and **store ÷ sessionlog** for times and sizes (above 1: the store takes longer or \
             more). Figures from one run on a shared VM whose disk changes speed from minute \
             to minute: read them against the probe and each other, not against another run.\n"
        );

        // Appends.
        let _ = writeln!(
            s,
            "## Durable appends of 1 KiB events\n\nOne thread per session, one event per \
             commit, each commit durable before the next. {:.1} s measured per cell, in {} \
             slices run round-robin over the stores (each slice on a fresh store, after a \
             warm-up), so a change of disk speed weighs on every store alike.\n",
            self.window_secs, self.rounds
        );
        appends_table(&mut s, &self.appends, Kind::Sessionlog, "sessionlog");
        let _ = writeln!(
            s,
            "\nThe `sessionlog Store` row is the path an agent platform takes: one session per \
             thread, each event a `user/message` (1 KiB envelope) appended through \
             `SessionHandle::append` (validated, folded into the session state and the token \
             projection) and made durable by `SessionHandle::commit`; the `sessionlog` row \
             commits the same bytes to the log directly. The `sessionlog, zero-ahead off` row \
             is the same log with `zero_ahead_bytes = 0`, so its appends land in fallocated \
             (unwritten) extents, as every append did before zero-ahead: the baseline of that \
             change, measured in the same run."
        );
        let _ = writeln!(
            s,
            "\nSQLite WAL `NORMAL` does not sync at commit (only at checkpoints), so its \
             commits are not durable on power loss: it is listed for scale, not as a peer in \
             durability.\n"
        );

        if !self.agent.is_empty() {
            let _ = writeln!(
                s,
                "## Durable appends of agent traffic\n\nThe same measurement with the events of \
                 the seeded workload generator (turns, steps, streamed chunks, assistant \
                 messages, tool calls and results of 64 B–8 KiB; {:.1} s per cell), one event per \
                 commit. `sessionlog Store` appends each event through `SessionHandle::append` \
                 (validated and folded) and commits it; every other store gets the event's \
                 envelope line, as DeepSeek Harness writes it, with no validation. The ratio \
                 column is **Store ÷ store**.\n",
                self.window_secs
            );
            appends_table(
                &mut s,
                &self.agent,
                Kind::SessionlogStore,
                "sessionlog Store",
            );
            let _ = writeln!(s);
        }

        // Replay.
        if let Some(r) = &self.replay {
            let _ = writeln!(
                s,
                "## Replay of a long session\n\nOne session of {} events of realistic agent \
                 traffic (the seeded workload generator: turns, steps, streamed chunks, tool \
                 calls and results of 64 B–8 KiB, compactions every 8 turns; {:.0} B of \
                 envelope JSON per event on average), stored the same way in each store. \
                 Files are in the page cache (as after a process restart); best of the \
                 repetitions.\n",
                thousands(r.events as f64),
                r.payload_bytes as f64 / r.events.max(1) as f64
            );
            let base = r
                .rows
                .iter()
                .find(|x| x.store == "sessionlog" && x.what.contains("deleted"))
                .map(|x| x.time.as_secs_f64());
            let _ = writeln!(
                s,
                "| Store | What is timed | Time | Events/s | time ÷ sessionlog cold `view` |\n|---|---|---:|---:|---:|"
            );
            for row in &r.rows {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    row.store,
                    row.what,
                    ms(row.time),
                    thousands(row.events as f64 / row.time.as_secs_f64().max(1e-9)),
                    base.map_or("–".into(), |b| ratio(row.time.as_secs_f64(), b))
                );
            }
            let _ = writeln!(
                s,
                "\nBytes on disk for this session (allocated blocks; apparent length in \
                 brackets; sessionlog's active segment is preallocated to 64 MiB):\n\n\
                 | Store | Bytes per event | ÷ sessionlog |\n|---|---:|---:|"
            );
            let sl = r.disk.iter().find(|d| d.0 == "sessionlog").map(|d| d.2);
            for (name, len, alloc) in &r.disk {
                let _ = writeln!(
                    s,
                    "| {name} | {:.0} ({:.0}) | {} |",
                    *alloc as f64 / r.events as f64,
                    *len as f64 / r.events as f64,
                    sl.map_or("–".into(), |b| ratio(*alloc as f64, b as f64))
                );
            }
            let _ = writeln!(
                s,
                "\n(The envelope JSON alone is {:.0} B per event.)\n",
                r.payload_bytes as f64 / r.events as f64
            );
        }

        // Crash.
        if !self.crash.is_empty() {
            let _ = writeln!(
                s,
                "## Restart after a crash, and bytes on disk per event\n\nA child process \
                 writes {} sessions × {} events of 1 KiB in durable batches of {}, says it is \
                 done and is killed with SIGKILL (nothing closed). Reopen time: from opening the \
                 store until every session's last event is known (sessionlog: `Log::open` and \
                 the stream index; SQLite: open and `max(seq)` per session; JSONL: open each \
                 file and parse its last line; raft-engine: `Engine::open` and `last_index` per \
                 group; okaywal: recovery, which hands every entry to the manager, here \
                 configured never to checkpoint so it keeps every entry). Bytes are measured \
                 on the killed store's files.\n",
                crate::crash::SESSIONS,
                thousands(self.crash_per_session as f64),
                crate::crash::BATCH
            );
            let sl = self.crash.iter().find(|c| c.kind == Kind::Sessionlog);
            let _ = writeln!(
                s,
                "| Store | Events | Reopen | reopen ÷ sessionlog | Allocated B/event | Apparent B/event | allocated ÷ sessionlog | Found after reopen |\n|---|---:|---:|---:|---:|---:|---:|---:|"
            );
            for c in &self.crash {
                let e = c.events.max(1) as f64;
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.0} | {:.0} | {} | {} |",
                    c.kind.name(),
                    thousands(c.events as f64),
                    ms(c.reopen),
                    sl.map_or("–".into(), |b| ratio(
                        c.reopen.as_secs_f64(),
                        b.reopen.as_secs_f64()
                    )),
                    c.bytes_alloc as f64 / e,
                    c.bytes_len as f64 / e,
                    sl.map_or("–".into(), |b| ratio(
                        c.bytes_alloc as f64,
                        b.bytes_alloc as f64
                    )),
                    thousands(c.found as f64)
                );
                if let Some((len, alloc)) = c.compressed {
                    let _ = writeln!(
                        s,
                        "| {}, compressed by `gc --compress` | {} | – | – | {:.0} | {:.0} | {} | – |",
                        c.kind.name(),
                        thousands(c.events as f64),
                        alloc as f64 / e,
                        len as f64 / e,
                        sl.map_or("–".into(), |b| ratio(alloc as f64, b.bytes_alloc as f64)),
                    );
                }
            }
            let _ = writeln!(
                s,
                "\nAllocated bytes include preallocation: sessionlog's active segment is \
                 preallocated to 64 MiB, okaywal's files (here) to 64 MiB, raft-engine's not at \
                 all by default.\n"
            );
        }
        s
    }

    fn find(&self, kind: Kind, sessions: usize) -> Option<&AppendResult> {
        find(&self.appends, kind, sessions)
    }

    /// Draws the chart: durable appends per store and concurrency (log scale), crash reopen
    /// times, and replay times.
    pub fn chart(&self, path: &Path) -> io::Result<()> {
        let err = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
        // No system fonts needed: the text is drawn with DejaVu Sans from the `dejavu` crate.
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| io::Error::other("the bundled font does not parse"))?;
        let root = BitMapBackend::new(path, (1400, 1000)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (top, bottom) = root.split_vertically(560);
        let (left, right) = bottom.split_horizontally(700);
        // One colour per store, in `Kind::ALL` order.
        let colors = [
            RGBColor(0xd6, 0x27, 0x28),
            RGBColor(0xf0, 0x9a, 0x9a),
            RGBColor(0x8c, 0x56, 0x4b),
            RGBColor(0x1f, 0x77, 0xb4),
            RGBColor(0x9e, 0xc7, 0xe8),
            RGBColor(0x2c, 0xa0, 0x2c),
            RGBColor(0xff, 0x7f, 0x0e),
            RGBColor(0x94, 0x67, 0xbd),
        ];

        // Appends.
        let levels: Vec<usize> = {
            let mut l: Vec<usize> = self.appends.iter().map(|a| a.sessions).collect();
            l.dedup();
            l
        };
        let max = self
            .appends
            .iter()
            .map(|a| a.per_sec)
            .fold(1.0, f64::max)
            .max(self.probe.seq_durable_mb_s * 1e6 / EVENT_BYTES as f64);
        let mut chart = ChartBuilder::on(&top)
            .caption(
                format!(
                    "Durable 1 KiB appends, events/s (log scale); fdatasync p50 {}, seq. durable {:.0} MB/s",
                    human_ns(self.probe.fdatasync_4k.p50_ns),
                    self.probe.seq_durable_mb_s
                ),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..levels.len() as f64, (100f64..max * 2.0).log_scale())
            .map_err(|e| err(&e))?;
        let lv = levels.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(levels.len() * 2 + 1)
            .x_label_formatter(&move |x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.01 && i < lv.len() {
                    format!("{} session{}", lv[i], if lv[i] == 1 { "" } else { "s" })
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| thousands(*y))
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(|e| err(&e))?;
        let width = 0.8 / Kind::ALL.len() as f64;
        for (k, kind) in Kind::ALL.into_iter().enumerate() {
            let color = colors[k];
            let bars: Vec<Rectangle<(f64, f64)>> = levels
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    self.find(kind, *n).map(|a| {
                        let x0 = i as f64 + 0.1 + k as f64 * width;
                        Rectangle::new(
                            [(x0, 100.0), (x0 + width * 0.9, a.per_sec.max(100.0))],
                            color.filled(),
                        )
                    })
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(|e| err(&e))?
                .label(kind.name())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
        }
        // References: the disk's sequential durable bandwidth in 1 KiB records, and one
        // writer that waits one fdatasync (p50) per commit.
        let bw = self.probe.seq_durable_mb_s * 1e6 / EVENT_BYTES as f64;
        let one = 1e9 / self.probe.fdatasync_4k.p50_ns.max(1) as f64;
        let n = levels.len() as f64;
        for (y, label) in [
            (bw, "sequential durable bandwidth, in 1 KiB records/s"),
            (one, "one commit per fdatasync p50"),
        ] {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, y), (n, y)],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{label}: {}", thousands(y)),
                    (0.02, y * 1.45),
                    ("sans-serif", 14).into_font(),
                )))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(|e| err(&e))?;

        // Crash reopen.
        let bars_panel = |area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
                          title: &str,
                          rows: &[(String, f64, RGBColor)]|
         -> io::Result<()> {
            let max = rows.iter().map(|r| r.1).fold(1e-3, f64::max) * 3.0;
            let min = rows.iter().map(|r| r.1).fold(f64::MAX, f64::min).max(1e-4) / 2.0;
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(250)
                .build_cartesian_2d((min..max * 2.0).log_scale(), 0f64..rows.len() as f64)
                .map_err(|e| err(&e))?;
            let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(rows.len() * 2 + 1)
                .y_label_formatter(&move |y| {
                    let i = y.floor() as usize;
                    if (y - y.floor() - 0.5).abs() < 0.01 && i < names.len() {
                        names[names.len() - 1 - i].clone()
                    } else {
                        String::new()
                    }
                })
                .x_labels(5)
                .x_label_formatter(&|x| axis_time(*x))
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| err(&e))?;
            let n = rows.len();
            chart
                .draw_series(rows.iter().enumerate().map(|(i, r)| {
                    let y = (n - 1 - i) as f64;
                    Rectangle::new([(min, y + 0.15), (r.1.max(min), y + 0.85)], r.2.filled())
                }))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(rows.iter().enumerate().map(|(i, r)| {
                    let y = (n - 1 - i) as f64;
                    Text::new(
                        format!(" {}", axis_time(r.1)),
                        (r.1.max(min), y + 0.62),
                        ("sans-serif", 14).into_font(),
                    )
                }))
                .map_err(|e| err(&e))?;
            Ok(())
        };
        let crash_rows: Vec<(String, f64, RGBColor)> = self
            .crash
            .iter()
            .map(|c| {
                let k = Kind::ALL.iter().position(|x| *x == c.kind).unwrap_or(0);
                (c.kind.name().to_owned(), c.reopen.as_secs_f64(), colors[k])
            })
            .collect();
        if !crash_rows.is_empty() {
            bars_panel(
                &left,
                "Restart after SIGKILL: reopen time (log)",
                &crash_rows,
            )?;
        }
        if let Some(r) = &self.replay {
            let replay_rows: Vec<(String, f64, RGBColor)> = r
                .rows
                .iter()
                .map(|row| {
                    let (label, color) = match (row.store, row.what) {
                        ("sessionlog", w) if w.contains("deleted") => {
                            ("sessionlog view, cache cold", colors[0])
                        }
                        ("sessionlog", w) if w.contains("warm") => {
                            ("sessionlog view, cache warm", colors[0])
                        }
                        ("sessionlog", _) => ("sessionlog full fold", colors[0]),
                        ("JSONL", w) if w.contains("import") => ("JSONL parse + fold", colors[5]),
                        ("JSONL", _) => ("JSONL parse lines", colors[5]),
                        (_, w) if w.contains("parse") => ("SQLite SELECT + parse", colors[3]),
                        _ => ("SQLite SELECT", colors[3]),
                    };
                    (label.to_owned(), row.time.as_secs_f64(), color)
                })
                .collect();
            bars_panel(
                &right,
                &format!("Replay of {} events (log)", thousands(r.events as f64)),
                &replay_rows,
            )?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    }
}
