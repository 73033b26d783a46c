"""Part B: sessions DeepSeek Harness writes itself, read by sessionlog.

DSH (Python SDK, real runtime) runs scripted turns against a fake Anthropic Messages server on
127.0.0.1 (text replies and a tool call it executes), and writes its own V4 sessions: plain
(`sdk-minimal` profile) and zstd (`sdk` profile). For each session:
- `sessionlog import` must accept DSH's file;
- the messages `sessionlog derive` returns, put in the shape of an Anthropic request, must equal
  the history DSH sent the model in its last request of that session, followed by the last
  reply;
- sessionlog's export of a plain file (at the format it was imported at) must equal it.
A check of the comparison itself runs first: the same history folded naively from DSH's own
file (append-only surface) must equal what DSH sent, so a mismatch with sessionlog is
sessionlog's.

Usage: dsh_turns.py SESSIONLOG_BIN WORK_DIR
Exit: 0 when every failure is a listed known gap, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import dshlib
from fake_anthropic import FakeAnthropic, text, tool_use
from known_gaps import KnownGaps


@dataclass
class Scenario:
    session_id: str
    profile: str
    prompts: list[str]
    # One list of content blocks per model request the prompts cause, in order.
    replies: list[list[dict]]


SCENARIOS = [
    Scenario(
        "turns-text",
        dshlib.PLAIN_PROFILE,
        ["Say hello.", "Say it again."],
        [[text("Hello from the scripted model.")], [text("Hello once more.")]],
    ),
    Scenario(
        "turns-tool",
        dshlib.PLAIN_PROFILE,
        ["Run the check.", "Thanks."],
        [
            [text("Running it."), tool_use("toolu_conformance_1", "bash", {"command": "echo conformance-ok"})],
            [text("The command printed conformance-ok.")],
            [text("You are welcome.")],
        ],
    ),
    Scenario(
        "turns-zstd",
        dshlib.COMPRESSED_PROFILE,
        ["Say hello compressed."],
        [[text("Hello, written compressed.")]],
    ),
]


def home_of(work: Path, profile: str) -> Path:
    """One DSH home per profile: a home holds plain or compressed sessions, never both."""
    return work / f"dsh-home-{profile}"


def run_scenarios(work: Path) -> dict[str, list[dict]]:
    """Runs every scenario in DSH; returns session id -> the request bodies DSH sent for it."""
    requests: dict[str, list[dict]] = {}
    for profile in sorted({s.profile for s in SCENARIOS}):
        chosen = [s for s in SCENARIOS if s.profile == profile]
        fake = FakeAnthropic([reply for s in chosen for reply in s.replies])
        try:
            home = home_of(work, profile)
            with dshlib.harness(home, work / "agent-cwd", fake.base_url, profile) as dsh:
                for scenario in chosen:
                    session = dsh.start_session(scenario.session_id)
                    for prompt in scenario.prompts:
                        session.run(prompt)
        finally:
            fake.close()
        for body in fake.requests:
            session_id = body.get("dsh_session_log", {}).get("session", {}).get("id")
            requests.setdefault(str(session_id), []).append(body)
    return requests


def dsh_file(home: Path, session_id: str) -> Path | None:
    for name in ("session.v4.jsonl", "session.v4.jsonl.zstd"):
        found = sorted(home.glob(f"sessions/*/{dshlib.session_dir(session_id)}/{name}"))
        if found:
            return found[0]
    return None


def anthropic_history(messages: list[dict]) -> tuple[list[str], list[dict]]:
    """Model messages in DSH's shape -> (system texts, Anthropic request messages).

    Consecutive messages of one role are one request message; system messages go to `system`.
    """
    system: list[str] = []
    out: list[dict] = []
    for message in messages:
        role = message.get("role")
        blocks = [anthropic_block(b) for b in message.get("content", [])]
        if role == "tool":
            # A tool result (format V4's shape) is a user turn carrying one tool_result block.
            role, blocks = "user", [{
                "type": "tool_result",
                "tool_use_id": message.get("toolCallId"),
                "content": blocks,
                "is_error": bool(message.get("isError", False)),
            }]
        if role == "system":
            system.extend(b["text"] for b in blocks if b.get("type") == "text")
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def anthropic_block(block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text")}
    if kind == "tool-call":
        arguments = block.get("arguments")
        return {
            "type": "tool_use",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
        }
    if kind == "tool-result":
        return {
            "type": "tool_result",
            "tool_use_id": block.get("toolCallId"),
            "content": [anthropic_block(b) for b in block.get("content", [])],
            "is_error": bool(block.get("isError", False)),
        }
    return {"type": f"(unmapped {kind})"}


def naive_history(lines: list[str]) -> list[dict]:
    """The surface of an append-only DSH log: each appended event's message, in order."""
    messages = []
    for line in lines[1:]:
        event = json.loads(line)
        if event.get("surfaceOp") != "append":
            continue
        data = event.get("data", {})
        messages.append(data.get("message", data))
    return messages


def request_history(body: dict) -> tuple[list[str], list[dict]]:
    system = body.get("system")
    if isinstance(system, list):
        system = [b.get("text") for b in system if isinstance(b, dict)]
    elif isinstance(system, str):
        system = [system]
    else:
        system = []
    messages = [
        {"role": m["role"], "content": [strip_cache(b) for b in m["content"]]}
        if isinstance(m.get("content"), list)
        else {"role": m["role"], "content": [{"type": "text", "text": m.get("content")}]}
        for m in body.get("messages", [])
    ]
    return system, messages


def strip_cache(block: dict) -> dict:
    """A request block without its prompt-cache marker (transport, not history)."""
    block = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(block.get("content"), list):
        block["content"] = [strip_cache(b) for b in block["content"]]
    return block


def compare_history(
    derived: list[dict], last_request: dict
) -> str | None:
    """None when `derived` is the last request's history followed by one assistant reply."""
    system, history = anthropic_history(derived)
    sent_system, sent = request_history(last_request)
    if system != sent_system:
        return f"system prompt differs: derived {json.dumps(system)[:200]}, sent {json.dumps(sent_system)[:200]}"
    if history[: len(sent)] != sent:
        at = next((i for i, (a, b) in enumerate(zip(history, sent)) if a != b), min(len(history), len(sent)))
        ours = json.dumps(history[at])[:300] if at < len(history) else "(none)"
        theirs = json.dumps(sent[at])[:300] if at < len(sent) else "(none)"
        return f"message {at} differs: derived {ours}, sent {theirs}"
    rest = history[len(sent):]
    if len(rest) != 1 or rest[0]["role"] != "assistant":
        return f"after the last request's history, derived has {len(rest)} message(s), not the one reply"
    return None


def main(argv: list[str]) -> int:
    cli, work = dshlib.Cli(Path(argv[1])), Path(argv[2])
    started = time.monotonic()
    failures: list[tuple[str, str]] = []
    counts: dict[str, int] = {}

    def count(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    requests = run_scenarios(work)
    store = work / "turns-store"
    for scenario in SCENARIOS:
        sid = scenario.session_id
        path = dsh_file(home_of(work, scenario.profile), sid)
        sent = requests.get(sid, [])
        if path is None or not sent:
            failures.append((sid, f"DSH wrote no V4 session file or sent no request ({len(sent)} requests)"))
            continue
        count("DSH sessions written")
        compressed = path.name.endswith(".zstd")
        if not compressed:
            problem = compare_history(naive_history(dshlib.lines_of(path.read_bytes())), sent[-1])
            if problem:
                failures.append((sid, f"the comparison itself is off (DSH's own log vs its request): {problem}"))
                continue
            count("comparison checked on DSH's own log")
        out = cli.run("import", "--store", str(store), "--session", sid, str(path))
        if out.returncode != 0:
            message = out.stderr.decode().strip()
            failures.append((sid, f"sessionlog import exited {out.returncode} on DSH's {path.name}: {message}"))
            continue
        count("imported by sessionlog")
        out = cli.run("derive", "--store", str(store), "--session", sid)
        if out.returncode != 0:
            failures.append((sid, f"sessionlog derive exited {out.returncode}: {out.stderr.decode().strip()}"))
            continue
        problem = compare_history(json.loads(out.stdout), sent[-1])
        if problem:
            failures.append((sid, f"derived messages are not what DSH sent: {problem}"))
        else:
            count("derived messages equal DSH's request")
        if not compressed:
            # `export` writes a session at the format it was imported at.
            out = cli.run("export", "--store", str(store), "--session", sid)
            if out.returncode != 0 or out.stdout != path.read_bytes():
                failures.append((sid, f"sessionlog's export is not DSH's V4 file byte for byte (exit {out.returncode})"))
            else:
                count("V4 exports identical to DSH's file")
    for what, n in counts.items():
        print(f"  {what:<40} {n}")
    print(f"  model requests served                   {sum(map(len, requests.values()))}")
    print(f"  took {time.monotonic() - started:.1f} s")
    return KnownGaps.load().report("B", "part B (sessions DSH wrote, read by sessionlog)", failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
