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

step "1/4 Kubernetes binaries (the first run compiles etcd and Kubernetes from the Go module proxy: about 8 minutes on 2 CPUs; later runs reuse ~/.cache/elasti)"
ELASTI_K8S_BIN=$(hack/k8s-binaries.sh)
export ELASTI_K8S_BIN
step "2/4 Local cluster: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet, kube-proxy, CoreDNS, Prometheus (the first run also builds CoreDNS)"
quiet go build -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
bin/elasti-cluster up --k8s-bin-dir "$ELASTI_K8S_BIN" >/dev/null
step "3/4 Images: demo app, operator, resolver"
bin/elasti-cluster images --k8s-bin-dir "$ELASTI_K8S_BIN"
step "4/4 Elasti, live"
quiet go build -o bin/elasti-demo ./test/demo
bin/elasti-demo
