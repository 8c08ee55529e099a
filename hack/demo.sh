#!/usr/bin/env bash
# `make demo`: build what is needed, bring the local cluster up (docs/local-cluster.md),
# build and import the images, then let test/demo narrate a scale to zero and a wake.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# quiet runs a go command without its "go: downloading" lines (hundreds on a
# first run); everything else it prints still shows.
quiet() { "$@" 2> >(sed -u '/^go: downloading /d' >&2); }

step "1/4 Kubernetes binaries and images (the first run compiles etcd, Kubernetes, CoreDNS and Elasti from the Go module proxy: about 10 minutes on 2 CPUs; later runs reuse ~/.cache/elasti)"
quiet go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
# The images (CoreDNS, the demo app, the operator, the resolver) build beside
# Kubernetes: its build alone keeps two CPUs busy only about half the time.
# They build at the lowest CPU priority, so that they take the CPU time
# Kubernetes leaves unused and do not slow it down.
mkdir -p bin
(nice -n 19 bin/elasti-cluster prebuild --k8s-bin-dir /nonexistent && quiet nice -n 19 go build -o bin/elasti-demo ./test/demo) >bin/demo-prebuild.log 2>&1 &
prebuild=$!
ELASTI_K8S_BIN=$(hack/k8s-binaries.sh)
export ELASTI_K8S_BIN
if ! wait "$prebuild"; then
  cat bin/demo-prebuild.log >&2
  echo "demo: building the images failed (above)" >&2
  exit 1
fi
echo "images built (bin/demo-prebuild.log)"
step "2/4 Local cluster: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet, kube-proxy, CoreDNS, Prometheus"
bin/elasti-cluster up --k8s-bin-dir "$ELASTI_K8S_BIN" >/dev/null
step "3/4 Images: demo app, operator, resolver"
bin/elasti-cluster images --k8s-bin-dir "$ELASTI_K8S_BIN"
step "4/4 Elasti, live"
bin/elasti-demo
