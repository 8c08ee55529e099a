#!/usr/bin/env bash
# `make bench`: measures what Elasti adds on the local cluster and writes
# bench/results/latest.md (printed at the end) and latest.json, and the
# table in README.md. The measurements are bench/ (build tag bench); this
# script is the glue: build, cluster up (unless one already runs), images,
# run, cluster down (only if this run brought it up, unless
# BENCH_KEEP_CLUSTER is set).
#
#   BENCH_MICRO_ONLY=1  only the Go microbenchmarks, no cluster
#   BENCH_RUNS=N        cold-start runs (default 30)
#   BENCH_KEEP_CLUSTER=1 leave a cluster this run started running
#
# Benchmarks are not tests: this never fails on numbers (`make bench-check`
# compares them with the goals).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
start=$(date +%s)
mkdir -p bin bench/results
go build -tags bench -o bin/elasti-bench ./bench

if [[ -n ${BENCH_MICRO_ONLY:-} ]]; then
  bin/elasti-bench run -micro-only -out bench/results -readme README.md -since "$start"
else
  ELASTI_K8S_BIN=$(hack/k8s-binaries.sh)
  export ELASTI_K8S_BIN
  go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
  state=${ELASTI_CLUSTER_DIR:-/tmp/elasti-cluster}
  started=0
  cleanup() {
    if [[ $started == 1 && -z ${BENCH_KEEP_CLUSTER:-} ]]; then
      echo "bench: taking down the cluster this run started"
      bin/elasti-cluster down --k8s-bin-dir "$ELASTI_K8S_BIN" || true
    fi
  }
  trap cleanup EXIT
  if [[ ! -e $state/kubeconfig ]]; then
    started=1
    bin/elasti-cluster up --k8s-bin-dir "$ELASTI_K8S_BIN" >/dev/null
  else
    echo "bench: reusing the running cluster; it stays up"
  fi
  bin/elasti-cluster images --k8s-bin-dir "$ELASTI_K8S_BIN"
  # A cluster this run takes down needs no cleanup of the bench's namespaces.
  cleanup_ns=true
  [[ $started == 1 && -z ${BENCH_KEEP_CLUSTER:-} ]] && cleanup_ns=false
  bin/elasti-bench run -out bench/results -readme README.md -since "$start" -runs "${BENCH_RUNS:-30}" -cleanup="$cleanup_ns"
fi
echo "bench: done in $(( $(date +%s) - start ))s"
cat bench/results/latest.md
