#!/usr/bin/env bash
# Runs a command with a real, quorum-replicated S3 server on loopback: a 3-node Garage 2.5.0
# cluster (replication factor 3), started in a fresh directory under target/, ready once a
# signed PUT succeeds, and always stopped and deleted afterwards. The command sees
# SESSIONLOG_S3_ENDPOINT, SESSIONLOG_S3_BUCKET and the AWS_* credentials, as under
# .ci/with-seaweedfs.sh. Garage ignores conditional writes; the tests meant for it are those of
# the manifest pointer (see .ci/garage-job.sh).
#
# Garage is built from crates.io the first time (`cargo install --locked garage@2.5.0`, about
# 15 minutes on 2 cores) into target/garage, or taken from $GARAGE_BIN.
#
#   bash .ci/with-garage.sh bash .ci/with-etcd.sh cargo test -p sessionlog-remote --test X
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
garage="${GARAGE_BIN:-$root/target/garage/bin/garage}"
if [ ! -x "$garage" ]; then
    echo "building Garage 2.5.0 from crates.io into target/garage (about 15 minutes)..."
    cargo install --locked --quiet garage@2.5.0 --root "$root/target/garage"
fi
if ! command -v curl >/dev/null; then
    apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi

mkdir -p "$root/target"
data=$(mktemp -d "$root/target/garage-data.XXXXXX")
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

secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
base="${SESSIONLOG_GARAGE_PORT:-3900}"
for n in 1 2 3; do
    s3=$((base + 10 * (n - 1)))
    mkdir -p "$data/node$n/meta" "$data/node$n/data"
    cat > "$data/node$n.toml" <<TOML
metadata_dir = "$data/node$n/meta"
data_dir = "$data/node$n/data"
db_engine = "sqlite"
replication_factor = 3
rpc_bind_addr = "127.0.0.1:$((s3 + 1))"
rpc_public_addr = "127.0.0.1:$((s3 + 1))"
rpc_secret = "$secret"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3"
root_domain = ".s3.garage.localhost"
TOML
    "$garage" -c "$data/node$n.toml" server >"$data/node$n.log" 2>&1 &
    pids+=("$!")
done

g() { "$garage" -c "$data/node1.toml" "$@"; }
node_id() { "$garage" -c "$data/node$1.toml" node id -q 2>/dev/null; }
ids=()
for n in 1 2 3; do
    id=""
    for _ in $(seq 1 100); do
        id=$(node_id "$n" || true)
        [ -n "$id" ] && break
        sleep 0.1
    done
    if [ -z "$id" ]; then
        echo "Garage node $n did not start:" >&2
        cat "$data/node$n.log" >&2
        exit 1
    fi
    ids+=("$id")
done
for n in 2 3; do
    g node connect "${ids[$((n - 1))]}" >/dev/null
done
for id in "${ids[@]}"; do
    g layout assign -z dc1 -c 1G "${id%%@*}" >/dev/null
done
g layout apply --version 1 >/dev/null
key=$(g key create sessionlog-ci)
export AWS_ACCESS_KEY_ID=$(echo "$key" | awk '/Key ID/ {print $NF}')
export AWS_SECRET_ACCESS_KEY=$(echo "$key" | awk '/Secret key/ {print $NF}')
export AWS_REGION=garage
bucket=sessionlog-ci
g bucket create "$bucket" >/dev/null
g bucket allow --read --write --owner "$bucket" --key sessionlog-ci >/dev/null

endpoint="http://127.0.0.1:$base"
sign=(--silent --output /dev/null --write-out '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3"
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
ready=""
for _ in $(seq 1 100); do
    code=$(curl "${sign[@]}" -X PUT --data-binary ready "$endpoint/$bucket/ready" || true)
    if [ "$code" = "200" ]; then
        ready=1
        break
    fi
    sleep 0.2
done
if [ -z "$ready" ]; then
    echo "Garage did not accept a PUT at $endpoint/$bucket (last status $code)" >&2
    g status >&2 || true
    exit 1
fi
curl "${sign[@]}" -X DELETE "$endpoint/$bucket/ready" >/dev/null || true
echo "Garage 2.5.0 ready: 3 nodes, replication factor 3, S3 at $endpoint (bucket $bucket)"

export SESSIONLOG_S3_ENDPOINT="$endpoint"
export SESSIONLOG_S3_BUCKET="$bucket"
export SESSIONLOG_S3_SERVER=garage
# The node a test may SIGKILL (the third: the S3 endpoint is the first's), to check that the
# cluster serves on with one node lost.
export SESSIONLOG_GARAGE_EXPENDABLE_PID="${pids[2]}"
"$@"
