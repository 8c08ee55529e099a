#!/usr/bin/env bash
# `make demo`: build what is needed, bring the local cluster up (docs/local-cluster.md),
# build and import the images, then let test/demo narrate a scale to zero and a wake.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# quiet runs a go command without its "go: downloading" lines (hundreds on a
# first run); everything else it prints still shows.
quiet() { "$@" 2> >(sed -u '/^go: downloading /d' >&2); }

step "1/4 Kubernetes binaries and images (the first run compiles etcd, Kubernetes, CoreDNS and Elasti from the Go module proxy: about 10 minutes on 2 CPUs; later runs reuse ~/.cache/elasti)"
mkdir -p bin
# Kubernetes first: its build is the longest (the harness's own build would
# otherwise come before it, and its module downloads leave CPUs idle).
setsid hack/k8s-binaries.sh >bin/.k8s-bin-dir &
k8s=$!
trap 'kill -- "-$k8s" 2>/dev/null || true' EXIT
# The harness and the narrator build as the images do (static, -trimpath:
# test/cluster/gobuild.go), so the images and CoreDNS reuse the packages
# compiled here instead of compiling their own set.
static() { quiet env CGO_ENABLED=0 "$@"; }
static go build -trimpath -o bin/elasti-cluster ./test/cluster/cmd/elasti-cluster
# The images (CoreDNS, the demo app, the operator, the resolver) build beside
# Kubernetes, at the lowest CPU priority, so that they take the CPU time
# Kubernetes leaves unused and do not slow it down.
(nice -n 19 bin/elasti-cluster prebuild --k8s-bin-dir /nonexistent && static nice -n 19 go build -trimpath -o bin/elasti-demo ./test/demo) >bin/demo-prebuild.log 2>&1 &
prebuild=$!
wait "$k8s" || { echo "demo: building Kubernetes failed (above)" >&2; exit 1; }
ELASTI_K8S_BIN=$(cat bin/.k8s-bin-dir)
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
