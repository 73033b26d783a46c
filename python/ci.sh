#!/usr/bin/env bash
# Lints the extension crate (it is not a member of the root workspace), installs the package
# with `pip install ./python` into a fresh virtualenv, as a user would, and runs its tests.
# Everything installed is pinned in python/requirements-ci.txt; the venv lives in target/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="$root/target"
started=$(date +%s)

cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --manifest-path python/Cargo.toml --all-targets -- -D warnings

venv="$root/target/python-ci-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r python/requirements-ci.txt
"$venv/bin/pip" install --quiet --disable-pip-version-check ./python

# From the repository root, so the source tree's python/sessionlog/ cannot shadow the
# installed package.
"$venv/bin/python" -m pytest -q -p no:cacheprovider -c python/pyproject.toml python/tests
# The OpenAI Agents SDK's own session tests, from its sdist, against SessionlogSession
# (python/tests/sdk_suite/sessionlog_sdk_swap.py rebinds agents.SQLiteSession).
sdk_version=$(sed -n 's/^openai-agents==//p' python/requirements-ci.txt)
sdk_dir="$root/target/openai-agents-sdist"
rm -rf "$sdk_dir"
mkdir -p "$sdk_dir"
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    "openai-agents==$sdk_version" -d "$sdk_dir"
tar -xzf "$sdk_dir"/openai_agents-"$sdk_version".tar.gz -C "$sdk_dir"
(
    cd "$sdk_dir/openai_agents-$sdk_version"
    PYTHONPATH="$root/python/tests/sdk_suite" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        -p sessionlog_sdk_swap tests/memory/test_session.py tests/memory/test_session_limit.py
)

echo "== python package took $(( $(date +%s) - started )) s"
