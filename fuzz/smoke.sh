#!/usr/bin/env bash
# Builds every fuzz target and runs each for a short smoke time, so the targets cannot rot.
# Longer runs are for maintainers (see README.md). Needs a nightly toolchain and cargo-fuzz.
#
#   fuzz/smoke.sh            # 20 s per target
#   FUZZ_SECONDS=60 fuzz/smoke.sh
#   FUZZ_SEED=7 fuzz/smoke.sh  # libFuzzer seed (default 1, so CI runs are repeatable)
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-20}"
targets=$(cargo +nightly fuzz list)
start=$(date +%s)
cargo +nightly fuzz build -O
for target in $targets; do
    mkdir -p "corpus/$target"
    echo "== $target (${seconds} s)"
    # Seeds are read but never written: new inputs go to corpus/ (gitignored).
    log="target/smoke-$target.log"
    status=0
    cargo +nightly fuzz run -O "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -seed="${FUZZ_SEED:-1}" -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^stat::number_of_executed_units|panicked at|SUMMARY' "$log" || true
    if [ "$status" -ne 0 ]; then
        grep -A12 'panicked at' "$log" >&2 || tail -30 "$log" >&2
        echo "fuzz target $target failed (exit $status); see fuzz/artifacts/$target and fuzz/$log" >&2
        exit 1
    fi
done
echo "smoke run took $(( $(date +%s) - start )) s"
