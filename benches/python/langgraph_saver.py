"""LangGraph checkpointers: sessionlog's SessionlogSaver against langgraph-checkpoint-sqlite's
SqliteSaver (file-backed), measured in the same run on the same disk.

Workload per operation, on one thread of a graph: ``put`` a checkpoint (its channel values
changed: one message appended to a list of 20 plus a counter), ``put_writes`` of two writes to
it, then ``get_tuple`` of the thread's latest. N graph threads (1, 8, 64) run concurrently as
OS threads, each on its own thread id, sharing one saver (SqliteSaver serialises on its
connection; SessionlogSaver's records of different threads group-commit).

    pip install ./python langgraph-checkpoint-sqlite==3.1.2
    python benches/python/langgraph_saver.py [--seconds 3]

It prints the disk probe before and after, and removes every store and database it made.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from sessionlog.langgraph import SessionlogSaver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agents_sessions import probe  # noqa: E402


def run(saver, n: int, seconds: float) -> float:
    deadline = time.perf_counter() + seconds
    counts = [0] * n

    def worker(k: int) -> None:
        config = {"configurable": {"thread_id": f"t{n}-{k}", "checkpoint_ns": ""}}
        messages = [f"message {i}" for i in range(20)]
        version = None
        i = 0
        while time.perf_counter() < deadline:
            checkpoint = empty_checkpoint()
            messages = messages[1:] + [f"message {i}"]
            version = saver.get_next_version(version, None)
            checkpoint["channel_values"] = {"messages": messages, "count": i}
            checkpoint["channel_versions"] = {"messages": version, "count": version}
            config = saver.put(config, checkpoint, {"step": i, "source": "loop"}, {"messages": version, "count": version})
            saver.put_writes(config, [("messages", f"pending {i}"), ("count", i + 1)], task_id=f"task-{i}")
            assert saver.get_tuple(config) is not None
            i += 1
        counts[k] = i

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measurement time per row")
    parser.add_argument("--no-probe", action="store_true", help="skip the disk probe")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base = os.environ.get("SESSIONLOG_BENCH_DIR") or os.path.join(root, "target", "sessionlog-bench")
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="python-langgraph-", dir=base)
    try:
        if not args.no_probe:
            print("before:", probe(root), flush=True)
        print(f"{'threads':>8} {'SessionlogSaver ops/s':>22} {'SqliteSaver ops/s':>18} {'ratio':>7}")
        for n in (1, 8, 64):
            store_dir = os.path.join(work, f"sessionlog-{n}")
            with SessionlogSaver(store_dir, segment_bytes=16 << 20) as saver:
                rate_l = run(saver, n, args.seconds)
            shutil.rmtree(store_dir, ignore_errors=True)
            db = os.path.join(work, f"sqlite-{n}.db")
            conn = sqlite3.connect(db, check_same_thread=False)
            rate_s = run(SqliteSaver(conn), n, args.seconds)
            conn.close()
            print(f"{n:>8} {rate_l:>22.0f} {rate_s:>18.0f} {rate_l / rate_s:>6.2f}x", flush=True)
        if not args.no_probe:
            print("after:", probe(root), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
