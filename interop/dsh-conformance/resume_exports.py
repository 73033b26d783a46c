"""Part A: every session sessionlog exports resumes in the real DeepSeek Harness runtime.

Sources: each fixture log of `shared/fixtures/dsh/logs` that `sessionlog import` accepts (its
header's test placeholders replaced as the corpus goldens were made, and a unique id), and the
sessions `sessionlog demo` generates. Each is exported by sessionlog in every format this build
offers (V0 `session.jsonl` always; V4 plain and zstd once `export` takes `--format-version` and
`--compress`), laid out in a DSH home, and resumed by DSH with no model reachable. Resuming is
DSH's strict load: it migrates an older file to V4 and writes `session.v4.jsonl` beside it.
DSH's migrated files are imported back into sessionlog, whose export of them must give the
same bytes. When sessionlog also exports V4, DSH's migrated file (before the end-seed the resume appends)
must equal sessionlog's V4 export byte for byte.

Usage: resume_exports.py SESSIONLOG_BIN SHARED_DIR WORK_DIR GENERATED_SESSIONS
Exit: 0 when every failure is a listed known gap, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import re
import threading

import dshlib
from known_gaps import KnownGaps

V0_FILE = "session.jsonl"
V4_FILE = "session.v4.jsonl"
V4_ZSTD_FILE = "session.v4.jsonl.zstd"
RAW_LOG_PATH = re.compile(r" ?\(raw log: [^)]*\)")
TOOLS_PLACEHOLDER = b'"tools":"{{tools}}"'
NO_TOOLS = b'"tools":[]'
SAMPLE_EVERY = 25
# Of the generated sessions DSH migrated, every REIMPORT_EVERY-th is read back by sessionlog.
REIMPORT_EVERY = 10
# DSH runtimes resuming side by side (the CI machine has 2 cores).
RUNTIMES = 2


@dataclass
class Source:
    """A session in a sessionlog store, and what to call it in reports."""

    store: Path
    name: str
    label: str
    # The file it was imported from (fixtures), and whether the import changed what it keeps
    # (a torn tail cut off, closers appended to an open last turn).
    original: bytes | None = None
    changed_on_import: bool = False
    # Exported with the rest of its store in one `migrate --to dsh:` (the generated sessions).
    in_bulk: bool = False


@dataclass
class Tally:
    failures: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    # DSH's refusal of a V0 export that repeats the imported fixture (which DSH refuses too),
    # and sessionlog's refusals (exit 3) to export a source at a format, by case label: a
    # source both refuse for the same reason is refused alike, not a failure
    # (`reconcile_refusals`).
    dsh_refusals: dict[str, tuple[str, str]] = field(default_factory=dict)
    our_refusals: dict[str, dict[str, str]] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def fail(self, label: str, message: str) -> None:
        self.failures.append((label, message))


def normalized_fixture(path: Path, golden: Path, session_id: str) -> bytes:
    """The fixture with the header DSH's goldens used (placeholders replaced) and id `session_id`.

    Only the header line and the tools placeholder change.
    """
    data = path.read_bytes()
    first, rest = data.split(b"\n", 1)
    header = json.loads(first)
    if golden.is_file():
        recorded = json.loads(golden.read_text()).get("headerNormalized")
        if isinstance(recorded, dict):
            header = recorded
    if not isinstance(header, dict):
        return data
    header = dict(header)
    header["id"] = session_id
    if isinstance(header.get("cwd"), str) and "{{" in header["cwd"]:
        header["cwd"] = header["cwd"].replace("{{cwd}}", "/dshgold-placeholder-cwd")
    if isinstance(header.get("parentSession"), str) and "{{" in header["parentSession"]:
        del header["parentSession"]
    line = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    # The snapshot tests also stand `"tools":"{{tools}}"` in for a request's tool list, which
    # DSH 0.2.1 refuses ("header tools must be an array") whoever wrote the file; an empty list
    # is what a request without tools records.
    return line + b"\n" + rest.replace(TOOLS_PLACEHOLDER, NO_TOOLS)


def import_fixtures(cli: dshlib.Cli, shared: Path, work: Path, tally: Tally) -> list[Source]:
    logs = shared / "fixtures" / "dsh" / "logs"
    golden_root = shared / "fixtures" / "dsh" / "golden"
    store = work / "fixtures-store"
    staged = work / "fixtures-normalized"
    staged.mkdir(parents=True)
    sources: list[Source] = []
    for index, path in enumerate(sorted(logs.rglob("*.jsonl"))):
        rel = path.relative_to(logs)
        tally.count("fixtures")
        session_id = f"fixture-{index:03d}"
        normalized = staged / f"{session_id}.jsonl"
        normalized.write_bytes(
            normalized_fixture(path, golden_root / f"{rel}.golden.json", session_id)
        )
        out = cli.run("import", "--store", str(store), "--session", session_id, str(normalized))
        if out.returncode == 3:
            tally.count("fixtures sessionlog refuses")
            continue
        if out.returncode != 0:
            tally.fail(str(rel), f"sessionlog import exited {out.returncode}: {out.stderr.decode().strip()}")
            continue
        tally.count("fixtures imported")
        report = json.loads(out.stdout)
        changed = bool(report.get("closers")) or bool(report.get("tailDiscarded"))
        sources.append(Source(store, session_id, str(rel), normalized.read_bytes(), changed))
    return sources


def generate_sessions(cli: dshlib.Cli, work: Path, sessions: int, tally: Tally) -> list[Source]:
    store = work / "generated-store"
    out = cli.run(
        "demo", "--dir", str(store), "--sessions", str(sessions), "--turns", "3",
        "--crash-sessions", "0",
    )
    if out.returncode != 0:
        tally.fail("generated sessions", f"sessionlog demo exited {out.returncode}: {out.stderr.decode().strip()}")
        return []
    names = cli.session_names(store)
    tally.count("generated sessions", len(names))
    return [Source(store, name, f"generated {name}", in_bulk=True) for name in names]


@dataclass
class Export:
    """One export format and the DSH home its files are resumed from."""

    name: str
    file_name: str
    args: tuple[str, ...]
    profile: str


def export_formats(cli: dshlib.Cli) -> list[Export]:
    formats = [Export("V0", V0_FILE, (), dshlib.PLAIN_PROFILE)]
    offered = cli.export_options()
    if "--format-version" in offered:
        formats.append(Export("V4", V4_FILE, ("--format-version", "4"), dshlib.PLAIN_PROFILE))
        if "--compress" in offered:
            formats.append(
                Export("V4 zstd", V4_ZSTD_FILE, ("--format-version", "4", "--compress", "zstd"),
                       dshlib.COMPRESSED_PROFILE)
            )
    return formats


def export_all(
    cli: dshlib.Cli,
    sources: list[Source],
    fmt: Export,
    home: Path,
    work: Path,
    headers: dict[str, dict],
    tally: Tally,
) -> dict[str, tuple[Source, Path, bytes]]:
    """Exports each source into `home`; returns session id -> (source, file, exported bytes).

    `headers` maps a source's name to its session header; the V0 pass fills it, the later
    (possibly compressed) passes read it.
    """
    exported: dict[str, bytes] = {}
    by_store: dict[Path, list[Source]] = {}
    for source in sources:
        by_store.setdefault(source.store, []).append(source)
    for store, group in by_store.items():
        if all(s.in_bulk for s in group) and bulk_takes(cli, fmt):
            exported.update(export_in_bulk(cli, store, group, fmt, work, tally))
            continue
        for source in group:
            data = export_one(cli, source, fmt, tally)
            if data is not None:
                exported[source.name] = data
    placed: dict[str, tuple[Source, Path, bytes]] = {}
    for source in sources:
        data = exported.get(source.name)
        if data is None:
            continue
        if source.name not in headers:
            headers[source.name] = dshlib.header_of(data.decode())
        header = headers[source.name]
        path = dshlib.session_path(home, header, fmt.file_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        placed[header["id"]] = (source, path, data)
    tally.count(f"exported {fmt.name}", len(placed))
    return placed


def bulk_takes(cli: dshlib.Cli, fmt: Export) -> bool:
    """Whether `migrate --to dsh:` takes the flags of this format (else export one by one)."""
    flags = {a for a in fmt.args if a.startswith("--")}
    return flags <= cli.export_options("migrate")


def export_one(cli: dshlib.Cli, source: Source, fmt: Export, tally: Tally) -> bytes | None:
    out = cli.run("export", "--store", str(source.store), "--session", source.name, *fmt.args)
    if out.returncode == 3:
        tally.our_refusals.setdefault(source.label, {})[fmt.name] = out.stderr.decode().strip()
        return None
    if out.returncode != 0:
        tally.fail(source.label, f"sessionlog export ({fmt.name}) exited {out.returncode}: {out.stderr.decode().strip()}")
        return None
    return out.stdout


def export_in_bulk(
    cli: dshlib.Cli, store: Path, group: list[Source], fmt: Export, work: Path, tally: Tally
) -> dict[str, bytes]:
    """Every session of a large store through one `migrate --to dsh:` (one store open instead
    of one per session), with every SAMPLE_EVERY-th also through `export`, which must write
    the same bytes."""
    target = work / f"migrated-{fmt.name.replace(' ', '-').lower()}-{store.name}"
    out = cli.run("migrate", "--from", f"store:{store}", "--to", f"dsh:{target}", *fmt.args)
    if out.returncode != 0:
        tally.fail(f"store {store.name}", f"sessionlog migrate --to dsh: ({fmt.name}) exited {out.returncode}: {out.stderr.decode().strip()}")
        return {}
    exported: dict[str, bytes] = {}
    for index, source in enumerate(group):
        written = sorted(
            p for p in (target / dshlib.session_dir(source.name)).glob("session*")
            if p.name != "session.lock"
        )
        if len(written) != 1:
            tally.fail(source.label, f"migrate --to dsh: ({fmt.name}) left {len(written)} session files, not one")
            continue
        exported[source.name] = written[0].read_bytes()
        if index % SAMPLE_EVERY == 0:
            single = export_one(cli, source, fmt, tally)
            if single is None:
                continue
            tally.count(f"{fmt.name} bulk exports checked against export")
            if single != exported[source.name]:
                tally.fail(source.label, f"export and migrate --to dsh: wrote different {fmt.name} bytes")
    return exported


def resume_all(ids: list[str], profile: str, home: Path, work: Path) -> dict[str, str | None]:
    """Resumes every session of `home` named in `ids`, in RUNTIMES runtimes side by side;
    returns id -> DSH's error (None when it resumed)."""
    outcome: dict[str, str | None] = {}
    shards = [ids[i::RUNTIMES] for i in range(RUNTIMES)]
    threads = [
        threading.Thread(target=resume_shard, args=(shard, profile, home, work, outcome))
        for shard in shards
        if shard
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def resume_shard(
    ids: list[str], profile: str, home: Path, work: Path, outcome: dict[str, str | None]
) -> None:
    base_url = f"http://127.0.0.1:{dshlib.closed_port()}"
    pending = list(ids)
    while pending:
        # A runtime that dies mid-way is restarted after the session it died on.
        with dshlib.harness(home, work / "runtime-cwd", base_url, profile) as dsh:
            while pending:
                session_id = pending.pop(0)
                try:
                    dsh.resume_session(session_id)
                    outcome[session_id] = None
                except Exception as error:  # the SDK raises its own and transport errors
                    message = " ".join(str(error).split())
                    outcome[session_id] = RAW_LOG_PATH.sub("", message)
                    if "runtime closed" in message or "stdout closed" in message:
                        break


def judge_resumes(
    placed: dict[str, tuple[Source, Path, bytes]],
    fmt: Export,
    outcome: dict[str, str | None],
    source_outcome: dict[str, str | None],
    tally: Tally,
) -> set[str]:
    """Counts what DSH resumed; each refusal is a failure, named by whether DSH refuses the
    imported source file too (when sessionlog exported it unchanged)."""
    resumed = {sid for sid, error in outcome.items() if error is None}
    tally.count(f"resumed by DSH ({fmt.name})", len(resumed))
    for session_id, error in sorted(outcome.items()):
        if error is None:
            continue
        source, _, exported = placed[session_id]
        also = ""
        if session_id in source_outcome and source_outcome[session_id] is not None:
            same_bytes = source.original == exported
            also = (
                " (DSH refuses the imported fixture file too, which this export repeats byte for byte)"
                if same_bytes
                else " (DSH refuses the imported fixture file too)"
            )
            tally.count(f"{fmt.name} refusals DSH makes of the fixture itself")
            if fmt.name == "V0" and source.original == exported:
                tally.dsh_refusals[source.label] = (error, also)
                continue
        tally.fail(source.label, f"DSH refused the {fmt.name} export: {error[:400]}{also}")
    return resumed


# sessionlog's refusal names DSH's reason between these two phrases (crates/session migrate).
OUR_REASON = re.compile(r"refuses this session: (.*) \(DSH refuses the format v\d file too")
DSH_SUFFIX = re.compile(r"; source v\d artifact remains unchanged$")


def reconcile_refusals(tally: Tally, formats: list[Export]) -> None:
    """A fixture DSH refuses (its V0 export is the fixture itself) must be refused by sessionlog
    at every later format, for DSH's reason; sessionlog refuses nothing else."""
    later = [fmt.name for fmt in formats if fmt.name != "V0"]
    alike = 0
    for label in sorted(set(tally.dsh_refusals) | set(tally.our_refusals)):
        ours = tally.our_refusals.get(label, {})
        if label not in tally.dsh_refusals:
            for name, said in ours.items():
                tally.fail(label, f"sessionlog export ({name}) exited 3: {said}")
            continue
        error, also = tally.dsh_refusals[label]
        dsh_reason = DSH_SUFFIX.sub("", error)
        matched = [n for n in later if (m := OUR_REASON.search(ours.get(n, ""))) and m.group(1) == dsh_reason]
        if later and len(matched) == len(later):
            alike += 1
            continue
        detail = "; ".join(f"sessionlog {n}: {ours.get(n, 'exported it')[:300]}" for n in later if n not in matched)
        tally.fail(label, f"DSH refused the V0 export: {error[:400]}{also}; {detail}")
    tally.count("sources refused alike by DSH and sessionlog", alike)


def check_export_repeats_import(placed: dict[str, tuple[Source, Path, bytes]], tally: Tally) -> None:
    """An imported file that needed no closers is exported byte for byte as it was."""
    same = 0
    for source, _, exported in placed.values():
        if source.original is None or source.changed_on_import:
            continue
        if exported == source.original:
            same += 1
        else:
            tally.fail(source.label, "sessionlog's V0 export differs from the file it imported")
    tally.count("V0 exports identical to the imported file", same)


def compare_migrations(
    v0: dict[str, tuple[Source, Path, bytes]],
    v4: dict[str, tuple[Source, Path, bytes]],
    resumed: set[str],
    tally: Tally,
) -> None:
    """DSH's V0 -> V4 migration of each export equals sessionlog's own V4 export."""
    equal = 0
    for session_id in sorted(resumed & set(v4)):
        source, v0_path, _ = v0[session_id]
        migrated_path = v0_path.with_name(V4_FILE)
        if not migrated_path.is_file():
            tally.fail(source.label, "DSH resumed the V0 export but wrote no session.v4.jsonl")
            continue
        dsh_lines, problem = dshlib.strip_resume_end_seed(dshlib.lines_of(migrated_path.read_bytes()))
        if problem:
            tally.fail(source.label, f"DSH's migrated V4 file: {problem}")
            continue
        ours = dshlib.lines_of(v4[session_id][2])
        if dsh_lines == ours:
            equal += 1
            continue
        at = next((i for i, (a, b) in enumerate(zip(dsh_lines, ours)) if a != b), min(len(dsh_lines), len(ours)))
        dsh_line = dsh_lines[at][:300] if at < len(dsh_lines) else "(end of file)"
        our_line = ours[at][:300] if at < len(ours) else "(end of file)"
        tally.fail(source.label, f"V4 export differs from DSH's migration at line {at + 1}: DSH {dsh_line} | sessionlog {our_line}")
    tally.count("V4 exports equal to DSH's migration", equal)


def reimport_migrations(
    cli: dshlib.Cli,
    v0: dict[str, tuple[Source, Path, bytes]],
    resumed: set[str],
    work: Path,
    tally: Tally,
) -> None:
    """DSH's own V4 files (its migrations of the V0 exports, with the end-seed the resume
    appended) import into sessionlog, and export (at the format they were imported at) byte for
    byte: every fixture's and every REIMPORT_EVERY-th generated session's."""
    store = work / "dsh-migrated-store"
    for index, session_id in enumerate(sorted(resumed)):
        source, v0_path, _ = v0[session_id]
        if source.original is None and index % REIMPORT_EVERY:
            continue
        migrated = v0_path.with_name(V4_FILE)
        if not migrated.is_file():
            continue  # compare_migrations and the resume checks report a missing file
        out = cli.run("import", "--store", str(store), "--session", session_id, str(migrated))
        if out.returncode != 0:
            tally.fail(source.label, f"sessionlog import of DSH's migrated V4 file exited {out.returncode}: {out.stderr.decode().strip()}")
            continue
        tally.count("DSH V4 migrations imported by sessionlog")
        out = cli.run("export", "--store", str(store), "--session", session_id)
        if out.returncode != 0 or out.stdout != migrated.read_bytes():
            tally.fail(source.label, f"sessionlog's export of DSH's migrated V4 file is not that file byte for byte (exit {out.returncode})")
            continue
        tally.count("  ... and exported byte for byte")


def check_resume_kept_bytes(
    placed: dict[str, tuple[Source, Path, bytes]], fmt: Export, resumed: set[str], tally: Tally
) -> None:
    """A V4 file DSH resumed still starts with sessionlog's export (DSH only appends to it)."""
    kept = 0
    for session_id in sorted(resumed & set(placed)):
        source, path, exported = placed[session_id]
        if path.read_bytes().startswith(exported):
            kept += 1
        else:
            tally.fail(source.label, f"DSH rewrote the {fmt.name} export when resuming it instead of appending to it")
    tally.count(f"{fmt.name} exports DSH resumed in place", kept)


def resume_sources(sources: list[Source], work: Path) -> dict[str, str | None]:
    """DSH's verdict on the imported fixture files themselves (those given), to tell its
    refusals of the source from refusals of what sessionlog wrote."""
    home = work / "home-source"
    ids = []
    for source in sources:
        if source.original is None:
            continue
        header = dshlib.header_of(source.original.decode())
        path = dshlib.session_path(home, header, V0_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.original)
        ids.append(header["id"])
    return resume_all(ids, dshlib.PLAIN_PROFILE, home, work)


def main(argv: list[str]) -> int:
    binary, shared, work, generated = Path(argv[1]), Path(argv[2]), Path(argv[3]), int(argv[4])
    started = time.monotonic()
    cli = dshlib.Cli(binary)
    tally = Tally()
    sources = import_fixtures(cli, shared, work, tally) + generate_sessions(cli, work, generated, tally)
    formats = export_formats(cli)
    if len(formats) == 1:
        print("note: this sessionlog exports DSH format V0 only (export has no --format-version); V4 checks skipped")
    placed: dict[str, dict[str, tuple[Source, Path, bytes]]] = {}
    resumed: dict[str, set[str]] = {}
    source_checked: dict[str, str | None] = {}
    headers: dict[str, dict] = {}
    for fmt in formats:
        home = work / f"home-{fmt.name.replace(' ', '-').lower()}"
        placed[fmt.name] = export_all(cli, sources, fmt, home, work, headers, tally)
        phase = time.monotonic()
        outcome = resume_all(sorted(placed[fmt.name]), fmt.profile, home, work)
        print(f"  resumed {len(outcome)} {fmt.name} exports in {time.monotonic() - phase:.1f} s")
        refused = [placed[fmt.name][sid][0] for sid, error in outcome.items() if error]
        source_outcome = resume_sources([s for s in refused if s.name not in source_checked], work)
        source_checked.update(source_outcome)
        resumed[fmt.name] = judge_resumes(placed[fmt.name], fmt, outcome, source_checked, tally)
        if fmt.name == "V0":
            check_export_repeats_import(placed[fmt.name], tally)
        else:
            check_resume_kept_bytes(placed[fmt.name], fmt, resumed[fmt.name], tally)
    reconcile_refusals(tally, formats)
    reimport_migrations(cli, placed["V0"], resumed["V0"], work, tally)
    if "V4" in placed:
        compare_migrations(placed["V0"], placed["V4"], resumed["V0"], tally)
    for what, n in tally.counts.items():
        print(f"  {what:<40} {n}")
    print(f"  took {time.monotonic() - started:.1f} s")
    return KnownGaps.load().report("A", "part A (sessionlog exports resumed by DSH)", tally.failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
