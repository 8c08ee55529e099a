#!/usr/bin/env bash
# End-to-end tests on the local cluster (test/cluster). Each test package's
# TestMain (test/e2e.Main) brings the cluster up, builds and imports the
# images, runs the tests, takes the cluster down and checks the machine is as
# it was. Packages run one at a time: they share the one cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
ELASTI_K8S_BIN=$(hack/k8s-binaries.sh)
export ELASTI_K8S_BIN
state=${ELASTI_CLUSTER_DIR:-/tmp/elasti-cluster}
was_up=0
[[ -e $state/kubeconfig ]] && was_up=1

# A test binary that panics or times out skips e2e.Main's teardown: take down
# a cluster this run started, unless asked to keep it.
cleanup() {
  if [[ $was_up == 0 && -z ${ELASTI_E2E_KEEP:-} && -e $state ]]; then
    echo "e2e: the tests left a cluster behind; taking it down"
    go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
    bin/elasti-cluster down --k8s-bin-dir "$ELASTI_K8S_BIN"
  fi
}
trap cleanup EXIT

go test -count=1 -tags e2e -p 1 -timeout 60m -v ./test/e2e/...
