"""Times DeepSeek Harness's own V0 -> V4 migration of one session file: the file is laid out in
a fresh DSH home, the runtime is started (not timed), and `resume_session` is timed until it
returns, by which time DSH has written the migrated `session.v4.jsonl` beside the V0 file.

Usage: time_dsh_migration.py V0_FILE WORK_DIR  (with the venv holding deepseek-harness-sdk)
Prints one JSON object: {"seconds": ..., "v4_bytes": ...} or {"error": ...}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dshlib


def main(argv: list[str]) -> int:
    source, work = Path(argv[1]), Path(argv[2])
    home = work / "home"
    with source.open("rb") as f:
        header = json.loads(f.readline())
    target = dshlib.session_path(home, header, "session.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    from deepseek_harness import DeepSeekHarness  # the venv's SDK

    cwd = work / "runtime-cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {}
    with DeepSeekHarness(
        profile=dshlib.PLAIN_PROFILE,
        dsh_home=str(home),
        base_url=f"http://127.0.0.1:{dshlib.closed_port()}",
        api_key="bench-no-key",
        cwd=str(cwd),
        env=dshlib.runtime_env(home),
        request_timeout_seconds=3600.0,
        shutdown_timeout_seconds=30.0,
    ) as dsh:
        started = time.monotonic()
        try:
            dsh.resume_session(header["id"])
            result["seconds"] = time.monotonic() - started
        except Exception as error:  # the SDK raises its own and transport errors
            result["error"] = " ".join(str(error).split())[:500]
    migrated = target.with_name("session.v4.jsonl")
    if migrated.is_file():
        result["v4_bytes"] = migrated.stat().st_size
    print(json.dumps(result))
    return 0 if "seconds" in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
