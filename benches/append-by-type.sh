#!/usr/bin/env bash
# Instructions per appended event, by event type: builds the `append_by_type` bench, runs it
# under callgrind (only its per-type appending functions and its per-turn commit counted),
# and prints each type's events, average payload size, instructions per event and share of
# all the appends' instructions, then the instructions per commit and per event overall.
#
#   bash benches/append-by-type.sh [EVENTS=50000] [BINARY]
#
# BINARY defaults to this tree's build of the bench (built if missing); pass another build's
# binary to compare two builds. Needs valgrind and python3. The bench's store is removed by
# the bench; callgrind's output goes to a temporary directory removed at the end.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
events="${1:-50000}"
binary="${2:-}"
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
if [ -z "$binary" ]; then
    binary="$(cd "$here/.." && cargo bench -p sessionlog-benches --bench append_by_type --no-run 2>&1 \
        | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)"
    [ -n "$binary" ] || { echo "could not build the append_by_type bench" >&2; exit 2; }
    case "$binary" in /*) ;; *) binary="$here/../$binary" ;; esac
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
SESSIONLOG_APPEND_BY_TYPE_EVENTS="$events" valgrind --tool=callgrind \
    --callgrind-out-file="$tmp/callgrind.out" \
    --toggle-collect='append_by_type::by_type::*' \
    --toggle-collect='append_by_type::commit_turn' \
    "$binary" >"$tmp/table.txt" 2>"$tmp/valgrind.txt" || {
    cat "$tmp/valgrind.txt" >&2
    exit 1
}
callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$tmp/callgrind.out" >"$tmp/annotate.txt"

python3 - "$tmp/table.txt" "$tmp/annotate.txt" <<'EOF'
import re, sys

table, annotate = (open(p).read().splitlines() for p in sys.argv[1:3])
# The bench's own table: type, events, average payload bytes, function.
rows = []
commits = None
for line in table:
    m = re.match(r"appended (\d+) events in (\d+) commits", line)
    if m:
        commits = int(m.group(2))
    m = re.match(r"(\S+)\s+(\d+)\s+(\d+)\s+by_type::(\w+)$", line)
    if m:
        rows.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
if not rows or commits is None:
    sys.exit("the bench printed no table:\n" + "\n".join(table))

# Inclusive instructions of each counted function: the line that names the function in its
# own binary ("... file:function [binary]"), not the lines of code inlined into it.
inclusive = {}
for line in annotate:
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+\S+:append_by_type::(by_type::\w+|commit_turn) \[", line)
    if m:
        inclusive[m.group(2)] = max(inclusive.get(m.group(2), 0), int(m.group(1).replace(",", "")))

appends = sum(inclusive.get("by_type::" + f, 0) for _, _, _, f in rows)
events = sum(n for _, n, _, _ in rows)
print(f"{'type':<20} {'events':>8} {'avg bytes':>10} {'instr/event':>12} {'share':>7}")
for ty, n, avg, f in sorted(rows, key=lambda r: -inclusive.get("by_type::" + r[3], 0)):
    ir = inclusive.get("by_type::" + f)
    if ir is None:
        sys.exit(f"callgrind counted nothing for by_type::{f}")
    print(f"{ty:<20} {n:>8} {avg:>10} {ir / n:>12,.0f} {100 * ir / appends:>6.1f}%")
commit = inclusive.get("commit_turn")
if commit is None:
    sys.exit("callgrind counted nothing for commit_turn")
print(f"appends: {appends / events:,.0f} instructions per event over {events} events")
print(f"commits: {commit / commits:,.0f} instructions per commit over {commits} commits "
      f"({commit / events:,.0f} per event)")
print(f"appends and commits: {(appends + commit) / events:,.0f} instructions per event")
EOF
