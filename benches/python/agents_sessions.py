"""Agents SDK sessions: sessionlog's SessionlogSession against the SDK's SQLiteSession
(file-backed), measured in the same run on the same disk.

Workload per operation: ``add_items([one item])`` (durable when it returns, for both) then
``get_items()``. N sessions (1, 8, 64) run concurrently as asyncio tasks; the loop's default
executor (where SQLiteSession does its work, and sessionlog whatever would wait) has 64
threads for both. Each row alternates the two (sessionlog, SQLite, SQLite, sessionlog, ...)
over ``--rounds`` rounds and sums operations and time, so a disk that changes speed during
the run (it is shared) weighs on both alike. Each row is run twice: for ``--seconds`` (the
faster store then makes longer sessions, so its ``get_items()`` returns more items per call),
and for ``--ops`` operations per session (both stores do exactly the same work). Then ``get_items(limit=20)`` on a
100,000-item session: warm (the same object that added the items, 200 calls) and cold
(the first call of a newly opened object, 20 reopens).

Run from the repository root with the package installed (``pip install ./python``):

    python benches/python/agents_sessions.py [--seconds 3]

It prints the disk probe (``cargo run --release -p sessionlog-benches --bin probe``) before
and after, and removes every store and database it made.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from agents import SQLiteSession

from sessionlog.agents import SessionlogSession


class BenchSessionlogSession(SessionlogSession):
    store_options = {"segment_bytes": 16 << 20}


def probe(root: str) -> str:
    # The probe finds its results directory from CARGO_TARGET_DIR (a binary, unlike a bench,
    # does not live under target/<profile>/deps/).
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(root, "target"))
    out = subprocess.run(
        ["cargo", "run", "--release", "-q", "-p", "sessionlog-benches", "--bin", "probe"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def item(i: int) -> dict:
    return {"role": "user", "content": f"message {i}: " + "lorem ipsum " * 8}


async def run_workload(make, n: int, seconds: float, ops: int | None) -> tuple[int, float]:
    """Runs n sessions for `seconds`, or for `ops` operations each when it is given."""
    sessions = [make(f"s{n}-{k}") for k in range(n)]
    deadline = time.perf_counter() + seconds
    counts = [0] * n

    def more(i: int) -> bool:
        return i < ops if ops is not None else time.perf_counter() < deadline

    async def worker(k: int) -> None:
        s = sessions[k]
        i = 0
        while more(i):
            await s.add_items([item(i)])
            await s.get_items()
            i += 1
        counts[k] = i

    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(n)))
    elapsed = time.perf_counter() - start
    for s in sessions:
        s.close()
    return sum(counts), elapsed


def percentiles(samples: list) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.99) - 1)]


async def get_limit_20(make, total: int = 100_000) -> tuple[tuple, tuple]:
    """(p50, p99) of warm calls and (p50, max) of cold ones, in seconds."""
    s = make("big")
    batch = [item(i) for i in range(1000)]
    for _ in range(total // len(batch)):
        await s.add_items(batch)
    newest = await s.get_items(limit=20)
    assert newest == batch[-20:]
    warm = []
    for _ in range(200):
        t = time.perf_counter()
        await s.get_items(limit=20)
        warm.append(time.perf_counter() - t)
    s.close()
    cold = []
    for _ in range(20):
        s = make("big")
        t = time.perf_counter()
        got = await s.get_items(limit=20)
        cold.append(time.perf_counter() - t)
        assert got == newest
        s.close()
    return percentiles(warm), (statistics.median(cold), max(cold))


async def compare(n: int, seconds: float, ops: int | None, rounds: int, work: str) -> tuple[float, float]:
    """Operations per second of sessionlog and of SQLiteSession at n sessions, alternated."""
    totals = {"sessionlog": [0, 0.0], "sqlite": [0, 0.0]}
    order = []
    for r in range(rounds):
        order += ["sessionlog", "sqlite"] if r % 2 == 0 else ["sqlite", "sessionlog"]
    for i, kind in enumerate(order):
        if kind == "sessionlog":
            store_dir = os.path.join(work, f"sessionlog-{n}-{i}")
            done, t = await run_workload(lambda sid: BenchSessionlogSession(sid, store_dir), n, seconds, ops)
            shutil.rmtree(store_dir, ignore_errors=True)
        else:
            db = os.path.join(work, f"sqlite-{n}-{i}.db")
            done, t = await run_workload(lambda sid: SQLiteSession(sid, db), n, seconds, ops)
            for suffix in ("", "-wal", "-shm", ".lock"):
                if os.path.exists(db + suffix):
                    os.remove(db + suffix)
        totals[kind][0] += done
        totals[kind][1] += t
    return tuple(count / t for count, t in (totals["sessionlog"], totals["sqlite"]))


async def main_async(args, work: str) -> None:
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=64)
    )
    for ops in (None, args.ops):
        shape = f"{args.seconds:g} s per run" if ops is None else f"{ops} operations per session"
        print(f"{shape}, {args.rounds} runs of each store per row:")
        print(f"{'sessions':>8} {'sessionlog ops/s':>17} {'SQLiteSession ops/s':>20} {'ratio':>7}")
        for n in (1, 8, 64):
            rate_l, rate_s = await compare(n, args.seconds, ops, args.rounds, work)
            print(f"{n:>8} {rate_l:>17.0f} {rate_s:>20.0f} {rate_l / rate_s:>6.2f}x", flush=True)
    big_dir = os.path.join(work, "sessionlog-big")
    (p50, p99), (c50, cmax) = await get_limit_20(lambda sid: BenchSessionlogSession(sid, big_dir))
    shutil.rmtree(big_dir, ignore_errors=True)
    big_db = os.path.join(work, "sqlite-big.db")
    (q50, q99), (d50, dmax) = await get_limit_20(lambda sid: SQLiteSession(sid, big_db))
    us = 1e6
    print(
        "get_items(limit=20) on a 100,000-item session, warm: "
        f"sessionlog p50 {p50 * us:.0f} us p99 {p99 * us:.0f} us; "
        f"SQLiteSession p50 {q50 * us:.0f} us p99 {q99 * us:.0f} us"
    )
    print(
        "  cold (first call after reopening): "
        f"sessionlog p50 {c50 * us:.0f} us max {cmax * us:.0f} us; "
        f"SQLiteSession p50 {d50 * us:.0f} us max {dmax * us:.0f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time of each run")
    parser.add_argument(
        "--ops", type=int, default=100, help="operations per session of each run of the same-work rows"
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each store per row")
    parser.add_argument("--no-probe", action="store_true", help="skip the disk probe")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base = os.environ.get("SESSIONLOG_BENCH_DIR") or os.path.join(root, "target", "sessionlog-bench")
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="python-agents-", dir=base)
    try:
        if not args.no_probe:
            print("before:", probe(root), flush=True)
        asyncio.run(main_async(args, work))
        if not args.no_probe:
            print("after:", probe(root), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
