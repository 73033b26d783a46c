#!/usr/bin/env bash
# The DeepSeek Harness conformance job: sessionlog against the real DSH 0.2.1rc2 runtime from
# PyPI, with no model (see README.md beside this file).
#
#   bash interop/dsh-conformance/run.sh
#
# Environment: SESSIONLOG_SHARED_DIR (the shared/ directory holding fixtures/dsh; default
# ../shared beside the repository), DSH_CONFORMANCE_SESSIONS (generated sessions, default 200),
# DSH_CONFORMANCE_VENV (where the runtime is installed; default target/dsh-conformance/venv).
# When the runtime cannot be installed (no route to PyPI, no wheel for this platform) the job
# prints why and is skipped, except under CI=true, where that is a failure unless
# SESSIONLOG_ALLOW_DSH_SKIP=1 says a skip is acceptable.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${SESSIONLOG_SHARED_DIR:-$repo/../shared}"
sessions="${DSH_CONFORMANCE_SESSIONS:-200}"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
venv="${DSH_CONFORMANCE_VENV:-$target_dir/dsh-conformance/venv}"
sdk_pin="deepseek-harness-sdk==0.2.1rc2"
started=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

runtime_unavailable() {
    if [ "${CI:-}" = "true" ] && [ "${SESSIONLOG_ALLOW_DSH_SKIP:-}" != "1" ]; then
        echo "DSH conformance FAILED: $1 (CI must run this job; set SESSIONLOG_ALLOW_DSH_SKIP=1 to accept a skip)" >&2
        exit 1
    fi
    echo "skipped DSH conformance: $1"
    exit 0
}

if [ ! -d "$shared/fixtures/dsh/logs" ]; then
    echo "DSH conformance FAILED: the DSH fixture corpus is not at $shared/fixtures/dsh (set SESSIONLOG_SHARED_DIR)" >&2
    exit 1
fi
python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    runtime_unavailable "the DSH Python SDK needs python3 >= 3.10, and this machine has ${python:-none}"
fi

echo "-- installing $sdk_pin into $venv"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip show deepseek-harness-sdk 2>/dev/null | grep -qx "Version: 0.2.1rc2"; then
    echo "   already installed"
else
    rm -rf "$venv"
    install_log="$(mktemp)"
    if ! { "$python" -m venv "$venv" && "$venv/bin/python" -m pip install --disable-pip-version-check -q "$sdk_pin"; } >"$install_log" 2>&1; then
        tail -5 "$install_log" >&2
        rm -f "$install_log"
        rm -rf "$venv"
        runtime_unavailable "could not install $sdk_pin from PyPI (no network to the registry?)"
    fi
    rm -f "$install_log"
fi
if ! runtime="$("$venv/bin/python" -c 'from deepseek_harness_runtime import bundled_runtime_path; print(bundled_runtime_path())' 2>&1)"; then
    runtime_unavailable "deepseek-harness-runtime-bin has no runtime executable for this platform: $runtime"
fi
echo "   runtime: $runtime ($(du -m "$runtime" | cut -f1) MiB) after $(( $(date +%s) - started )) s"

echo "-- building the sessionlog CLI"
(cd "$repo" && cargo build -q -p sessionlog-cli)
sessionlog="$target_dir/debug/sessionlog"

work="$(mktemp -d "${TMPDIR:-/tmp}/dsh-conformance.XXXXXX")"
trap 'rm -rf "$work"' EXIT

status=0
echo "-- part A: sessionlog exports resumed by DSH ($sessions generated sessions and the fixture corpus)"
mkdir "$work/a"
"$venv/bin/python" "$here/resume_exports.py" "$sessionlog" "$shared" "$work/a" "$sessions" || status=1
rm -rf "$work/a"
echo "-- part B: sessions DSH writes against a scripted model, read by sessionlog"
mkdir "$work/b"
"$venv/bin/python" "$here/dsh_turns.py" "$sessionlog" "$work/b" || status=1
rm -rf "$work/b"
echo "-- part C: parents migrated with the children beside them (the fixture corpus's families)"
mkdir "$work/c"
"$venv/bin/python" "$here/families.py" "$sessionlog" "$shared" "$work/c" || status=1

echo "-- DSH conformance took $(( $(date +%s) - started )) s"
if [ "$status" -ne 0 ]; then
    echo "DSH conformance FAILED (unexpected failures above)" >&2
fi
exit "$status"
