#!/usr/bin/env bash
# The multi-node end-to-end scenarios (test/e2e/multinode_e2e_test.go, build
# tag multinode) on a local cluster of two nodes, in one `elasti-cluster run
# --nodes 2` with the hygiene check, as hack/test-e2e.sh runs the others. A
# cluster that already runs is reused, and must have two nodes. KEDA's
# operator is built first (hack/keda.sh) for TestMultiNodeKEDAScaledObject.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
ELASTI_K8S_BIN=$(hack/k8s-binaries.sh addons)
ELASTI_KEDA_DIR=$(hack/keda.sh)
export ELASTI_K8S_BIN ELASTI_KEDA_DIR
go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
bin/elasti-cluster run --nodes 2 --check-clean ${ELASTI_E2E_KEEP:+--keep} -- \
  go test -count=1 -tags e2e,multinode -p 1 -parallel 4 -timeout 20m -v -run '^TestMultiNode' ./test/e2e/
