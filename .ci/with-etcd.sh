#!/usr/bin/env bash
# Runs a command beside a real 3-member etcd cluster on loopback (Debian's etcd-server, which
# is installed when missing and which Debian does not start by itself), each member in a fresh
# directory under target/, ready once a write succeeds, and always stopped and deleted
# afterwards. The command sees SESSIONLOG_ETCD_ENDPOINTS, so the ownership tests of
# crates/remote run against it.
#
#   bash .ci/with-etcd.sh cargo test -p sessionlog-remote
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if ! command -v etcd >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null
fi
if ! command -v curl >/dev/null; then
    apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi
base="${SESSIONLOG_ETCD_PORT:-23790}"
mkdir -p "$root/target"
data=$(mktemp -d "$root/target/etcd-data.XXXXXX")
pids=()
stop_cluster() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$data"
}
trap stop_cluster EXIT

cluster=""
for i in 1 2 3; do
    cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:$((base + 10 + i))"
done
endpoints=""
for i in 1 2 3; do
    client="http://127.0.0.1:$((base + i))"
    peer="http://127.0.0.1:$((base + 10 + i))"
    etcd --name "m$i" --data-dir "$data/m$i" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --initial-cluster-token "sessionlog-ci-$$" >"$data/m$i.log" 2>&1 &
    pids+=("$!")
    endpoints="${endpoints:+$endpoints,}$client"
done

ready=""
for _ in $(seq 1 60); do
    if curl -s -m 2 -X POST "http://127.0.0.1:$((base + 1))/v3/kv/put" \
        -d '{"key": "cmVhZHk=", "value": "MQ=="}' | grep -q '"revision"'; then
        ready=1
        break
    fi
    sleep 0.5
done
if [ -z "$ready" ]; then
    echo "etcd did not accept a write within 30 s; its logs:" >&2
    cat "$data"/m*.log >&2
    exit 1
fi
echo "etcd $(etcd --version | sed -n 's/^etcd Version: //p') ready: 3 members at $endpoints"

export SESSIONLOG_ETCD_ENDPOINTS="$endpoints"
"$@"
