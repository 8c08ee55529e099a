#!/usr/bin/env bash
# `make bench`: measures what Elasti adds on the local cluster and writes
# bench/results/latest.md (printed at the end) and latest.json, the
# headline table in README.md and the full one in docs/benchmarks.md. The measurements are bench/ (build tag bench); this
# script is the glue: build, then `elasti-cluster run` (cluster.Session):
# the running cluster, or one brought up for the run and taken down after
# (unless BENCH_KEEP_CLUSTER is set); images; the bench.
#
#   BENCH_MICRO_ONLY=1  only the Go microbenchmarks, no cluster
#   BENCH_RUNS=N        cold-start runs (default 30)
#   BENCH_TAIL_RUNS=N   wakes for the tails of (a) and (b) (default 200)
#   BENCH_DOZE_RUNS=N   runs of the warm sleep, each of (a) scale from zero
#                       and (b) Doze (default 5, about 70 s a run)
#   BENCH_KEEP_CLUSTER=1 leave a cluster this run started running
#   BENCH_ONLY=scale    the install and the scale figures only, into
#                       bench/results/scale/ (README and docs untouched)
#   BENCH_ONLY=hpa      the install, the cold starts and those with an HPA
#                       only, into bench/results/hpa/ (likewise)
#   BENCH_ONLY=doze     the install and the warm sleep only, into
#                       bench/results/doze/ (likewise)
#
# Benchmarks are not tests: this never fails on numbers (`make bench-check`
# compares them with the goals).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
start=$(date +%s)
mkdir -p bin bench/results
go build -tags bench -o bin/elasti-bench ./bench

if [[ -n ${BENCH_MICRO_ONLY:-} ]]; then
  bin/elasti-bench run -micro-only -out bench/results -readme README.md -since "$start"
else
  ELASTI_K8S_BIN=$(hack/k8s-binaries.sh addons)
  export ELASTI_K8S_BIN
  go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
  # The cluster session rule (reuse a running cluster, or bring one up and
  # take it down after) is cluster.Session's, in Go.
  if [[ -n ${BENCH_ONLY:-} ]]; then
    out=bench/results/$BENCH_ONLY
    set -- -out "$out" -only "$BENCH_ONLY"
  else
    out=bench/results
    set -- -out "$out" -readme README.md
  fi
  bin/elasti-cluster run --images ${BENCH_KEEP_CLUSTER:+--keep} -- \
    bin/elasti-bench run "$@" -since "$start" -runs "${BENCH_RUNS:-30}" -tail-runs "${BENCH_TAIL_RUNS:-200}" \
      -doze-runs "${BENCH_DOZE_RUNS:-5}"
fi
echo "bench: done in $(( $(date +%s) - start ))s"
cat "${out:-bench/results}/latest.md"
