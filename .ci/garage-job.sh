#!/usr/bin/env bash
# The optional Garage job: the object-store tests against a 3-node Garage 2.5.0 cluster
# (replication factor 3) on loopback, with the 3-member etcd cluster beside it. Garage ignores
# conditional writes; these tests check that it still does, and that a store shipped there
# through a manifest pointer in etcd fences a stale owner all the same. Not part of `.ci/run`:
# building Garage takes about 15 minutes the first time (kept in target/garage after that).
#
#   bash .ci/garage-job.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/with-garage.sh bash .ci/with-etcd.sh cargo test -p sessionlog-remote \
    --test s3_server \
    --test a_manifest_pointer_fences_stores_without_conditional_writes
