"""Writes the hand-made V0 sessions of this directory (legacy shapes, an interrupted turn, a
seeded child), each derived from `reasoning-and-text.session.jsonl`, a real DSH session."""
import json
from pathlib import Path
HERE = Path(__file__).resolve().parent
src = (HERE / "reasoning-and-text.session.jsonl").read_text().splitlines()
header = json.loads(src[0]); rows = [json.loads(l) for l in src[1:]]
def dump(name, header, rows):
    with open(HERE / f"{name}.session.jsonl", "w") as f:
        f.write(json.dumps(header, separators=(",", ":"), ensure_ascii=False) + "\n")
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")
# A: legacy shapes
h = dict(header, id="crafted-legacy"); rs = json.loads(json.dumps(rows))
for r in rs:
    if r["type"] == "user/message":
        r["data"] = {"content": r["data"]["content"], "source": r["data"]["source"]}
    if r["type"] == "turn/start": r["data"] = {"turn": 1, "trigger": {"kind": "user"}}
    if r["type"] == "turn/end": r["data"]["reason"] = {"kind": "disposed"}
    if r["type"] == "assistant/message":
        m = r["data"].pop("message"); src_ = dict(m["source"]); src_.pop("kind", None)
        d = {"turn": r["data"]["turn"], "step": r["data"]["step"], "content": m["content"], "provenance": src_}
        rest = {k: v for k, v in r["data"].items() if k not in ("turn", "step")}
        d.update(rest); r["data"] = d
dump("legacy", h, rs)
# B: a turn interrupted by a queued message, then a second turn
def renumber(rows):
    out = []
    for i, r in enumerate(rows):
        r = json.loads(json.dumps(r))
        if "seq0" in r: raise SystemExit("packed")
        r["seq"] = i; out.append(r)
    return out
plain = [r for r in rows if "seq0" not in r and r["type"] != "assistant/chunk"]
for r in plain:
    r.pop("sourceEventSeqs", None)
t1 = [r for r in plain if r["type"] not in ("turn/end", "session/title")]
t1 = [r for r in t1 if not (r["type"] == "agent/inbox/spliced" and r["data"]["inserted"] == [])]
queued = {"type": "agent/inbox/spliced", "time": 1785730505711, "data": {"target": "next-turn", "start": 0, "inserted": [{"content": [{"type": "text", "text": "and again"}], "source": {"kind": "user"}, "role": "user", "id": "queued-2"}]}}
t2 = [
    {"type": "turn/start", "time": 1785730505712, "data": {"turn": 2}},
    {"type": "agent/inbox/spliced", "time": 1785730505712, "data": {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}},
    {"type": "step/start", "time": 1785730505713, "data": {"turn": 2, "step": 1}},
    {"type": "user/message", "time": 1785730505714, "data": {"content": [{"type": "text", "text": "and again"}], "source": {"kind": "user"}, "role": "user", "id": "queued-2"}, "surfaceOp": "append"},
    {"type": "step/end", "time": 1785730505715, "data": {"turn": 2, "step": 1}},
    {"type": "turn/end", "time": 1785730505716, "data": {"turn": 2, "reason": {"kind": "completed"}}},
]
for r in t1:
    if r["type"] == "assistant/message": r["data"]["message"]["id"] = "a-1"
dump("interrupted", dict(header, id="crafted-interrupted"), renumber(t1 + [queued] + t2))
# C: a seeded child: the parent's first turn inherited, then its own turn
parent = [r for r in plain if r["type"] != "session/title"]
n = len(parent)
seed = {"type": "session/end-seed", "time": 1785730505720, "data": {}}
own = [
    {"type": "turn/start", "time": 1785730505721, "data": {"turn": 2}},
    {"type": "step/start", "time": 1785730505722, "data": {"turn": 2, "step": 1}},
    {"type": "user/message", "time": 1785730505723, "data": {"content": [{"type": "text", "text": "child"}], "source": {"kind": "user"}, "role": "user", "id": "child-1"}, "surfaceOp": "append"},
    {"type": "step/end", "time": 1785730505724, "data": {"turn": 2, "step": 1}},
    {"type": "turn/end", "time": 1785730505725, "data": {"turn": 2, "reason": {"kind": "completed"}}},
]
hc = {"type": "session", "version": 0, "id": "crafted-seeded", "createdAt": header["createdAt"], "cwd": header["cwd"], "parentSession": "fixture-097", "seedLength": n, "delegationDepth": 0}
dump("seeded", hc, renumber(parent + [seed] + own))
