#!/usr/bin/env bash
# Where a durable-append workload's time goes between the disk's syncs: runs one level of the
# comparison's appends for one store and records, for one second in the middle of its window,
# every pwrite64 and fdatasync of the machine (perf tracepoints), then prints how long the
# syncs took, the gaps between one sync's end and the next write and between a write's end
# and its sync, how much of the second a sync was running, and the CPUs' split (/proc/stat).
#
#   bash benches/compare/sync-timeline.sh [SESSIONS=64] [STORE=sessionlog] [BINARY]
#
# STORE is one of the comparison's --stores names (sessionlog, sessionlog-store, ...). BINARY
# defaults to this tree's release build of sessionlog-compare (built if missing); pass another
# build's binary to compare two builds under the same probe. Needs `perf` with access to
# syscall tracepoints (root, or kernel.perf_event_paranoid <= 1) and python3. The store is
# built where the comparison builds its stores and removed by it; the trace goes to a
# temporary directory removed at the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sessions="${1:-64}"
store="${2:-sessionlog}"
binary="${3:-}"
if [ -z "$binary" ]; then
    cargo build --release --quiet --manifest-path "$here/Cargo.toml"
    binary="$here/target/release/sessionlog-compare"
fi
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }

tmp="$(mktemp -d)"
pid=""
cleanup() {
    if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

"$binary" --only appends --sessions "$sessions" --stores "$store" --out "$tmp/report" \
    >"$tmp/run.txt" 2>&1 &
pid=$!
# The appends start once the disk is probed; record a second well inside the window.
for _ in $(seq 1 600); do
    grep -q '^probe' "$tmp/run.txt" && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/run.txt" >&2; exit 1; }
    sleep 0.1
done
sleep 1.5
head -1 /proc/stat >"$tmp/cpu.before"
perf record -q -a -o "$tmp/trace.data" \
    -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync \
    -e syscalls:sys_enter_pwrite64,syscalls:sys_exit_pwrite64 \
    -- sleep 1 >/dev/null 2>&1
head -1 /proc/stat >"$tmp/cpu.after"
wait "$pid"
pid=""
grep -E '^probe|^appends' "$tmp/run.txt"
perf script -i "$tmp/trace.data" -F tid,time,event 2>/dev/null >"$tmp/trace.txt"

python3 - "$tmp" <<'PY'
import statistics
import sys

tmp = sys.argv[1]
events = []
for line in open(f"{tmp}/trace.txt"):
    parts = line.split()
    if len(parts) >= 3:
        events.append((int(parts[0]), float(parts[1].rstrip(":")) * 1e6, parts[2]))
if not events:
    sys.exit("no pwrite64 or fdatasync recorded: is perf allowed to read syscall tracepoints?")

# For each call: how long each took, and the gap from the other call's last end to its start
# (a sync's end to the next write, a write's end to the next sync).
OTHER = {"fdatasync": "pwrite64", "pwrite64": "fdatasync"}
took = {call: [] for call in OTHER}
gap_before = {call: [] for call in OTHER}
began, last_end = {}, {}
for tid, t, name in events:
    phase, _, call = name.rstrip(":").split("sys_", 1)[-1].partition("_")
    if call not in OTHER:
        continue
    if phase == "enter":
        began[(call, tid)] = t
        end = last_end.pop(OTHER[call], None)
        if end is not None:
            gap_before[call].append(t - end)
    elif (call, tid) in began:
        took[call].append(t - began.pop((call, tid)))
        last_end[call] = t
syncs, writes = took["fdatasync"], took["pwrite64"]
after_sync, before_sync = gap_before["pwrite64"], gap_before["fdatasync"]


def summary(xs):
    if not xs:
        return "none"
    xs = sorted(xs)
    return (f"n={len(xs):>6}  p50 {xs[len(xs) // 2]:7.1f} us  mean {statistics.mean(xs):7.1f} us"
            f"  p90 {xs[int(len(xs) * 0.9)]:7.1f} us")


span = events[-1][1] - events[0][1]
print(f"fdatasync                   {summary(syncs)}")
print(f"a sync's end -> next write  {summary(after_sync)}")
print(f"pwrite64                    {summary(writes)}")
print(f"a write's end -> next sync  {summary(before_sync)}")
print(f"syncs per second {len(syncs) / span * 1e6:,.0f}; a sync running "
      f"{100 * sum(syncs) / span:.0f}% of the time")

before = [int(x) for x in open(f"{tmp}/cpu.before").read().split()[1:9]]
after = [int(x) for x in open(f"{tmp}/cpu.after").read().split()[1:9]]
delta = [b - a for a, b in zip(before, after)]
total = sum(delta) or 1
names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
print("CPUs: " + ", ".join(f"{n} {100 * d / total:.0f}%" for n, d in zip(names, delta) if d))
PY
