#!/usr/bin/env bash
# End-to-end tests on the local cluster (test/cluster), in one
# `elasti-cluster run` (cluster.Session): the running cluster, or one brought
# up for the tests and taken down after (unless ELASTI_E2E_KEEP is set), with
# the hygiene check that the machine is then as it was. The session runs in
# its own process, so a test binary that panics or times out still gets the
# cluster taken down. Packages run one at a time: they share the one cluster.
# Inside the package, the tests that touch only their own namespaces run
# eight at a time after the ones that must run alone (test/e2e/doc.go says
# which and why; more at once saturated the operator on 2 CPUs).
# ELASTI_E2E_RUN=REGEXP runs only the tests it matches (go test -run).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
# Chromium, for the waking page's test; the rest is there from `make deps`.
hack/install-deps.sh browser
ELASTI_K8S_BIN=$(hack/k8s-binaries.sh addons)
# Argo Rollouts' controller, for the test of a real Rollout target.
ELASTI_ARGO_ROLLOUTS_DIR=$(hack/argo-rollouts.sh)
export ELASTI_K8S_BIN ELASTI_ARGO_ROLLOUTS_DIR
# Traefik and the Gateway API's CRDs, the front door of the TestFrontDoor
# tests: built in the background (on a fresh machine, minutes), while the
# cluster comes up and the tests that run alone run; the front-door tests
# wait for it (hack/traefik.sh, which waits for a build in progress).
if [[ -z ${ELASTI_TRAEFIK_DIR:-} && ( -z ${ELASTI_E2E_RUN:-} || $ELASTI_E2E_RUN == *FrontDoor* ) ]]; then
  mkdir -p bin
  hack/traefik.sh >/dev/null 2>bin/traefik-build.log &
fi
go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
bin/elasti-cluster run --check-clean ${ELASTI_E2E_KEEP:+--keep} -- \
  go test -count=1 -tags e2e -p 1 -parallel 8 -timeout 40m -v ${ELASTI_E2E_RUN:+-run "$ELASTI_E2E_RUN"} ./test/e2e/...
