"""What the conformance job needs to know about DeepSeek Harness (DSH) 0.2.1rc2 and about the
`sessionlog` CLI: where a session lives in a DSH home, how to start the real runtime without a
model, and how to run the CLI.

The layout rules are those of `shared/interop/dsh-session-format.md` section 1 (the JSONL
backend's `format.ts`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRELOAD = HERE / "worker-url-preload.cjs"

# The profile that writes uncompressed files; the others (`sdk`, `headless`, `web`) write
# `.zstd`.
PLAIN_PROFILE = "sdk-minimal"
COMPRESSED_PROFILE = "sdk"

KEY_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
MAX_PROJECT_KEY = 251


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-le")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def project_dir(cwd: str | None) -> str:
    """The project directory DSH files a session under, from its header's `cwd`."""
    if cwd is None:
        return "_no-cwd"
    key: list[str] = []
    in_separator_run = False
    for unit in _utf16_units(cwd):
        ch = chr(unit)
        if ch in "/\\:":
            if not in_separator_run:
                key.append("-")
            in_separator_run = True
            continue
        in_separator_run = False
        key.append(ch if ch in KEY_SAFE else f"~{unit:04X}")
    text = "".join(key).lstrip("-")
    text = text[:MAX_PROJECT_KEY] or "root"
    return f"--{text}--"


def session_dir(session_id: str) -> str:
    """The directory name DSH gives session `session_id`."""
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    return "".join(
        chr(u) if chr(u) in KEY_SAFE else f"~{u:04X}" for u in _utf16_units(session_id)
    )


def session_path(home: Path, header: dict, file_name: str) -> Path:
    """Where a session with this header line is stored in DSH home `home`."""
    cwd = header.get("cwd")
    return home / "sessions" / project_dir(cwd if isinstance(cwd, str) else None) / session_dir(
        header["id"]
    ) / file_name


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released), for a model that is absent."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runtime_env(home: Path) -> dict[str, str]:
    """The environment the runtime needs: its home, no telemetry, the Worker URL fix."""
    node_options = os.environ.get("NODE_OPTIONS", "")
    return {
        "DSH_HOME": str(home),
        "DSH_TELEMETRY_DISABLED": "1",
        "NODE_OPTIONS": f"{node_options} --require {PRELOAD}".strip(),
    }


def harness(home: Path, cwd: Path, base_url: str, profile: str = PLAIN_PROFILE):
    """A DeepSeekHarness SDK instance on `home`, talking to the model at `base_url`."""
    from deepseek_harness import DeepSeekHarness  # the venv's SDK

    cwd.mkdir(parents=True, exist_ok=True)
    return DeepSeekHarness(
        profile=profile,
        dsh_home=str(home),
        base_url=base_url,
        api_key="conformance-no-key",
        cwd=str(cwd),
        env=runtime_env(home),
        request_timeout_seconds=120.0,
        shutdown_timeout_seconds=5.0,
    )


def header_of(text: str) -> dict:
    return json.loads(text.split("\n", 1)[0])


def strip_resume_end_seed(lines: list[str]) -> tuple[list[str], str | None]:
    """DSH's V4 file without the `session/end-seed` a resume appends at its end.

    Returns the lines before it and None, or the lines unchanged and a description of what was
    found instead of exactly one trailing end-seed with data `{}`.
    """
    if not lines:
        return lines, "the file is empty"
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return lines, "its last line is not JSON"
    if last.get("type") != "session/end-seed" or last.get("data") != {}:
        return lines, f"its last event is {last.get('type')!r}, not the end-seed a resume appends"
    return lines[:-1], None


@dataclass
class Cli:
    """The `sessionlog` binary under test."""

    binary: Path

    def run(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.binary), *args], input=stdin, capture_output=True, timeout=300
        )

    def session_names(self, store: Path) -> list[str]:
        names: list[str] = []
        after: list[str] = []
        while True:
            out = self.run("sessions", "--store", str(store), "--json", "--limit", "1000", *after)
            if out.returncode != 0:
                raise RuntimeError(f"sessionlog sessions failed: {out.stderr.decode().strip()}")
            page = [json.loads(line)["session"] for line in out.stdout.decode().splitlines() if line]
            names.extend(page)
            if "next page" not in out.stderr.decode() or not page:
                return names
            after = ["--after", page[-1]]

    def export_options(self, command: str = "export") -> set[str]:
        """The format flags (version, compression) this build's `command` takes."""
        text = self.run(command, "--help").stdout.decode()
        return {flag for flag in ("--format-version", "--compress") if flag in text}


def lines_of(data: bytes) -> list[str]:
    text = data.decode("utf-8")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
