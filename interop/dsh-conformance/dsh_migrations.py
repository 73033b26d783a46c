"""Records DeepSeek Harness's own V0 -> V4 migration of V0 session files.

For each `NAME.jsonl` (a DSH format V0 file) in IN_DIR, lays it out in a DSH home, resumes it in
the real runtime (no model reachable), and writes into OUT_DIR either `NAME.v4.jsonl`, DSH's
migrated file without the `session/end-seed` a resume appends (and what it appends after), or `NAME.refused`, DSH's reason
for refusing the file. sessionlog's migration tests compare against these.

Usage: dsh_migrations.py IN_DIR OUT_DIR   (run with the venv holding deepseek-harness-sdk==0.2.1rc2)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import dshlib
from resume_exports import resume_all

V0_FILE = "session.jsonl"
V4_FILE = "session.v4.jsonl"


def main(argv: list[str]) -> int:
    source_dir, out_dir = Path(argv[1]), Path(argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dsh-migrations.") as tmp:
        work = Path(tmp)
        home = work / "home"
        placed: dict[str, tuple[str, Path]] = {}
        for path in sorted(source_dir.glob("*.jsonl")):
            data = path.read_bytes()
            header = dshlib.header_of(data.decode())
            target = dshlib.session_path(home, header, V0_FILE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            placed[header["id"]] = (path.name[: -len(".jsonl")], target)
        outcome = resume_all(sorted(placed), dshlib.PLAIN_PROFILE, home, work)
        for session_id, error in sorted(outcome.items()):
            name, v0_path = placed[session_id]
            if error is not None:
                (out_dir / f"{name}.refused").write_text(error + "\n")
                continue
            lines = dshlib.lines_of(v0_path.with_name(V4_FILE).read_bytes())
            # A resume appends its `session/end-seed` (data {}) and may go on to append live
            # events (cancelling a queued message, say): the migration is what precedes it.
            resumed_at = max(
                (i for i, line in enumerate(lines) if json.loads(line).get("type") == "session/end-seed"
                 and json.loads(line).get("data") == {}),
                default=None,
            )
            if resumed_at is None:
                (out_dir / f"{name}.refused").write_text("(unexpected) no end-seed of the resume\n")
                continue
            lines = lines[:resumed_at]
            (out_dir / f"{name}.v4.jsonl").write_text("".join(line + "\n" for line in lines))
        print(f"{len(outcome)} resumed, {sum(e is not None for e in outcome.values())} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
