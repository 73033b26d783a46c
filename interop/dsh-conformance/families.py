"""Part C: parents migrated with their children.

DSH's V3 -> V4 stage ends a parent's log with a `subagent/catalog` entry for each direct child
session (a `subagent` session whose header names the parent) that the parent's catalog lacks,
so a parent's migrated file depends on the sessions beside it. Each fixture directory holding a
parent (`session.jsonl`) and its children (`session.N.jsonl`) is laid out whole, with its real
ids, in a fresh DSH home and in one sessionlog store: DSH resumes the parent (migrating it to
V4), and sessionlog's V4 export of the parent from the store must be DSH's file byte for byte
(before the end-seed the resume appends), or refused by both for the same reason.

Usage: families.py SESSIONLOG_BIN SHARED_DIR WORK_DIR
Exit: 0 when every family agrees, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dshlib
from resume_exports import DSH_SUFFIX, OUR_REASON, RAW_LOG_PATH, normalized_fixture

V0_FILE = "session.jsonl"
V4_FILE = "session.v4.jsonl"


def families(logs: Path) -> list[Path]:
    """Fixture directories holding a parent log and at least one child log."""
    return sorted(
        d for d in {p.parent for p in logs.rglob("session.*.jsonl")} if (d / V0_FILE).is_file()
    )


def names_parent(data: bytes, parent_id: str) -> bool:
    """Whether a log's header says it is a sub-agent child of `parent_id`."""
    header = json.loads(data.split(b"\n", 1)[0])
    return header.get("origin") == "subagent" and header.get("parentSession") == parent_id


def resume(home: Path, work: Path, session_id: str) -> str | None:
    """DSH resumes `session_id` from `home`: None, or its refusal."""
    with dshlib.harness(home, work / "runtime-cwd", f"http://127.0.0.1:{dshlib.closed_port()}") as dsh:
        try:
            dsh.resume_session(session_id)
        except Exception as error:  # the SDK raises its own and transport errors
            return " ".join(str(error).split())
    return None


def check_family(cli: dshlib.Cli, shared: Path, family: Path, work: Path) -> tuple[str, str | None]:
    """One family: (what happened, a failure or None)."""
    logs = shared / "fixtures" / "dsh" / "logs"
    golden = shared / "fixtures" / "dsh" / "golden"
    home, store, staged = work / "home", work / "store", work / "staged"
    staged.mkdir(parents=True)
    parent_id = json.loads((family / V0_FILE).read_bytes().split(b"\n", 1)[0])["id"]
    children = 0
    skipped: list[str] = []
    parent_refused = None
    for path in sorted(family.glob("session*.jsonl")):
        rel = path.relative_to(logs)
        header = json.loads(path.read_bytes().split(b"\n", 1)[0])
        data = normalized_fixture(path, golden / f"{rel}.golden.json", header["id"])
        normalized = staged / path.name
        normalized.write_bytes(data)
        target = dshlib.session_path(home, dshlib.header_of(data.decode()), V0_FILE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if path.name != V0_FILE and names_parent(data, parent_id):
            children += 1
        out = cli.run("import", "--store", str(store), "--session", header["id"], str(normalized))
        if out.returncode == 3 and path.name != V0_FILE and not names_parent(data, parent_id):
            # A log sessionlog refuses (DSH's own reader refuses it too: the corpus goldens
            # say so) stays out of the store; it is no child of this parent, so DSH's
            # migration of the parent does not read it either.
            skipped.append(f"{path.name} (not importable, not a child of the parent)")
            continue
        if out.returncode == 3 and path.name == V0_FILE:
            parent_refused = out.stderr.decode().strip()
            continue
        if out.returncode != 0:
            return "import refused", f"sessionlog import of {rel} exited {out.returncode}: {out.stderr.decode().strip()}"
    if parent_refused is not None:
        theirs = resume(home, work, parent_id)
        if theirs is None:
            return "refused by sessionlog", f"DSH migrates the parent; sessionlog's import refuses it: {parent_refused}"
        return "refused alike (the parent does not load)", None
    ours = cli.run(
        "export", "--store", str(store), "--session", parent_id, "--format-version", "4"
    )
    theirs_refusal = resume(home, work, parent_id)
    if theirs_refusal is not None:
        if ours.returncode != 3:
            return "refused by DSH", f"DSH refuses the parent ({theirs_refusal}); sessionlog exited {ours.returncode}"
        reason = DSH_SUFFIX.sub("", RAW_LOG_PATH.sub("", theirs_refusal))
        said = OUR_REASON.search(ours.stderr.decode())
        if said is None or said.group(1) not in reason:
            return "refused by DSH", f"DSH refuses the parent ({theirs_refusal}); sessionlog for another reason: {ours.stderr.decode().strip()}"
        return "refused alike", None
    if ours.returncode != 0:
        return "refused by sessionlog", f"DSH migrates the parent; sessionlog exited {ours.returncode}: {ours.stderr.decode().strip()}"
    migrated = dshlib.session_path(home, dshlib.header_of(ours.stdout.decode()), V4_FILE)
    lines, problem = dshlib.strip_resume_end_seed(dshlib.lines_of(migrated.read_bytes()))
    if problem is not None:
        return "migrated", f"DSH's V4 file: {problem}"
    expected = "".join(line + "\n" for line in lines).encode()
    catalogs = sum(1 for line in lines if '"type":"subagent/catalog"' in line)
    if ours.stdout != expected:
        return "migrated", f"sessionlog's V4 export of the parent ({len(ours.stdout)} bytes) differs from DSH's ({len(expected)} bytes, {catalogs} catalog entries)"
    left_out = f"; left out: {', '.join(skipped)}" if skipped else ""
    return f"migrated equal, {children} children, {catalogs} catalog entries{left_out}", None


def main(argv: list[str]) -> int:
    cli = dshlib.Cli(Path(argv[1]))
    shared, work = Path(argv[2]), Path(argv[3])
    found = families(shared / "fixtures" / "dsh" / "logs")
    failures: list[tuple[str, str]] = []
    catalogs = 0
    for k, family in enumerate(found):
        label = str(family.relative_to(shared / "fixtures" / "dsh" / "logs"))
        outcome, failure = check_family(cli, shared, family, work / f"family-{k:02d}")
        print(f"   {label}: {outcome}")
        if failure is not None:
            failures.append((label, failure))
        if "catalog entries" in outcome and not outcome.endswith(" 0 catalog entries"):
            catalogs += 1
    print(f"   {len(found)} families; {catalogs} parents migrated with catalog entries for their children; {len(failures)} failures")
    for label, failure in failures:
        print(f"   FAILED {label}: {failure}")
    if not found or catalogs == 0:
        print("   FAILED: no family exercised the children's catalog")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
