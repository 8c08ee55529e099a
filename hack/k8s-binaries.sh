#!/usr/bin/env bash
# Builds the Kubernetes control-plane and node binaries that the tests and the
# local cluster run, from the Go module proxy, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/k8s-<version>/
#
# etcd comes from its own throwaway module; the Kubernetes binaries from a
# throwaway module that requires k8s.io/kubernetes and replaces every staging
# module with its v0.<minor>.<patch> twin (upstream's own replace directives
# point into its source tree, which a dependency cannot use).
#
# kube-router's network policy controller (the local cluster's NetworkPolicy
# enforcement, docs/local-cluster.md) comes from a third throwaway module. Its
# last release under the v1 module path is served by the module proxy; the
# newer /v2 releases are not. Its pinned gobgp v3.14.0 is not in the checksum
# database, so the build requires a served gobgp instead (only the BGP
# router, which the cluster does not run, uses it).
#
# The Prometheus adapter (the local cluster's external.metrics.k8s.io, for an
# HPA fed by a real External metric) comes from a fourth throwaway module, and
# metrics-server (metrics.k8s.io, for an HPA on CPU) from a fifth.
#
# Idempotent: when the cache already holds every binary for these versions it
# prints the directory and exits; while another process builds them, it waits
# for that build. Prints the directory on stdout, progress on
# stderr.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.5.35}
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v1.6.1}
GOBGP_VERSION=v3.37.0
PROMETHEUS_ADAPTER_VERSION=${PROMETHEUS_ADAPTER_VERSION:-v0.12.0}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.8.0}
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/k8s-$K8S_VERSION"
STAMP="$OUT/.stamp"
WANT="k8s=$K8S_VERSION etcd=$ETCD_VERSION kube-router=$KUBE_ROUTER_VERSION prometheus-adapter=$PROMETHEUS_ADAPTER_VERSION metrics-server=$METRICS_SERVER_VERSION"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# ELASTI_K8S_ENVTEST_ONLY=1 builds only what envtest runs (etcd and the
# kube-apiserver): the oldest supported version is tested with envtest only.
ENVTEST_ONLY=${ELASTI_K8S_ENVTEST_ONLY:-}
[[ -n $ENVTEST_ONLY ]] && K8S_CMDS=(kube-apiserver)

NAME=k8s-binaries
source "$(dirname "$0")/lib/module-release.sh" # its Go settings, log and release_lock

# progress runs a long build and says every minute that it is still going, so
# that a first run does not look hung.
progress() {
  local what=$1 typical=$2 start=$SECONDS
  shift 2
  log "building $what (a cold build takes $typical on 2 CPUs; cached afterwards in $OUT)"
  ( while sleep 60; do log "  still building $what: $(((SECONDS - start) / 60)) min so far"; done ) &
  local ticker=$! rc=0
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc == 0)) && log "built $what in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"
  return "$rc"
}

complete() {
  [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] || return 1
  local b
  for b in etcd "${K8S_CMDS[@]}"; do [[ -x "$OUT/$b" ]] || return 1; done
  [[ -n $ENVTEST_ONLY || (-x "$OUT/kube-router" && -x "$OUT/prometheus-adapter" && -x "$OUT/metrics-server") ]]
}

release_lock

if complete; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/elasti-k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

build_etcd() {
  [[ -x "$OUT/etcd" ]] && "$OUT/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}" && return 0
  local d="$work/etcd" patch=${ETCD_VERSION##*.}
  mkdir -p "$d"
  cat >"$d/go.mod" <<MOD
module elasti.local/etcd-build

go 1.23

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v2 => go.etcd.io/etcd/client/v2 v2.305.$patch
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/raft/v3 => go.etcd.io/etcd/raft/v3 $ETCD_VERSION
)
MOD
  progress "etcd $ETCD_VERSION" "about a minute" \
    bash -c 'cd "$1" && go mod download go.etcd.io/etcd/server/v3 && go build -mod=mod -trimpath -o "$2/etcd" go.etcd.io/etcd/server/v3' _ "$d" "$OUT"
}

build_kubernetes() {
  local missing=0 b
  for b in "${K8S_CMDS[@]}"; do [[ -x "$OUT/$b" ]] || missing=1; done
  [[ $missing == 0 && -f "$STAMP" ]] && grep -q "k8s=$K8S_VERSION" "$STAMP" && return 0
  local d="$work/kubernetes" twin="v0.${K8S_VERSION#v1.}"
  mkdir -p "$d"
  local gomod
  gomod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module elasti.local/k8s-build"
    echo
    echo "go 1.24"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"$twin"'#p' "$gomod"
    echo ")"
  } >"$d/go.mod"
  local date commit
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  commit=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Hash": "\(.*\)",/\1/p' | head -1)
  local pkg=k8s.io/component-base/version minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=${commit:-unknown}"
  local pkgs=()
  for b in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  progress "${K8S_CMDS[*]} $K8S_VERSION" "7 to 12 minutes" \
    bash -c 'cd "$1" && shift && go build -mod=mod -trimpath -ldflags "$1" -o "$2/" "${@:3}"' _ "$d" "$ldflags" "$OUT" "${pkgs[@]}"
}

build_kube_router() {
  [[ -x "$OUT/kube-router" && -f "$STAMP" ]] && grep -q "kube-router=$KUBE_ROUTER_VERSION" "$STAMP" && return 0
  local d="$work/kube-router"
  mkdir -p "$d"
  # go get resolves the rest of the build list from these two exact versions
  # (the same list every time: released modules do not change).
  (cd "$d" && go mod init elasti.local/kube-router-build >/dev/null 2>&1 &&
    go get "github.com/cloudnativelabs/kube-router@$KUBE_ROUTER_VERSION" "github.com/osrg/gobgp/v3/pkg/server@$GOBGP_VERSION" >/dev/null 2>&1) ||
    { log "could not resolve kube-router $KUBE_ROUTER_VERSION with gobgp $GOBGP_VERSION from the module proxy"; return 1; }
  progress "kube-router $KUBE_ROUTER_VERSION" "about two minutes" \
    bash -c 'cd "$1" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$2/kube-router" github.com/cloudnativelabs/kube-router/cmd/kube-router' _ "$d" "$OUT"
}

# build_tool NAME VERSION MODULE PKG TYPICAL builds the command PKG of MODULE
# at VERSION, as released, into $OUT/NAME, from a throwaway module that
# requires it (its own go.mod has no replace directives that matter).
build_tool() {
  local name=$1 version=$2 module=$3 pkg=$4 typical=$5
  [[ -x "$OUT/$name" && -f "$STAMP" ]] && grep -q "$name=$version" "$STAMP" && return 0
  local d="$work/$name"
  mkdir -p "$d"
  (cd "$d" && go mod init "elasti.local/$name-build" >/dev/null 2>&1 &&
    go get "$module@$version" >/dev/null 2>&1) ||
    { log "could not resolve $name $version from the module proxy"; return 1; }
  progress "$name $version" "$typical" \
    bash -c 'cd "$1" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$2/$3" "$4"' _ "$d" "$OUT" "$name" "$pkg"
}

build_etcd
[[ -n $ENVTEST_ONLY ]] || build_kube_router
[[ -n $ENVTEST_ONLY ]] || build_tool prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" sigs.k8s.io/prometheus-adapter sigs.k8s.io/prometheus-adapter/cmd/adapter "about three minutes"
[[ -n $ENVTEST_ONLY ]] || build_tool metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server "about two minutes"
build_kubernetes
[[ -n $ENVTEST_ONLY && -f "$STAMP" ]] || echo "$WANT" >"$STAMP"
log "binaries ready in $OUT"
echo "$OUT"
