#!/usr/bin/env bash
# Builds the Kubernetes control-plane and node binaries that the tests and the
# local cluster run, from the Go module proxy, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/k8s-<version>/
#
# etcd comes from its own throwaway module (built once, for every version); the
# Kubernetes binaries from a throwaway module that requires k8s.io/kubernetes
# and replaces every staging module with its v0.<minor>.<patch> twin
# (upstream's own replace directives point into its source tree, which a
# dependency cannot use).
#
# Only what the local cluster and envtest need is built by default: etcd and
# the Kubernetes binaries. With the argument "addons" it also builds the
# components only some tests use (`make test-e2e`, `make test-multinode` and
# `make bench` ask for them; `make demo` does not):
#
# - kube-router's network policy controller (the local cluster's NetworkPolicy
#   enforcement, docs/local-cluster.md), from a third throwaway module. Its
#   last release under the v1 module path is served by the module proxy; the
#   newer /v2 releases are not. Its pinned gobgp v3.14.0 is not in the
#   checksum database, so the build requires a served gobgp instead (only the
#   BGP router, which the cluster does not run, uses it);
# - the Prometheus adapter (the local cluster's external.metrics.k8s.io, for an
#   HPA fed by a real External metric), from a fourth throwaway module;
# - metrics-server (metrics.k8s.io, for an HPA on CPU), from a fifth.
#
# Each binary's version is recorded in $OUT/.stamp, one name=version a line.
# Idempotent: when the cache already holds every binary asked for at these
# versions it prints the directory and exits; while another process builds
# them, it waits for that build. Prints the directory on stdout, progress
# (without Go's "go: downloading" lines) on stderr.
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
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# ELASTI_K8S_ENVTEST_ONLY=1 builds only what envtest runs (etcd and the
# kube-apiserver): the oldest supported version is tested with envtest only.
ENVTEST_ONLY=${ELASTI_K8S_ENVTEST_ONLY:-}
[[ -n $ENVTEST_ONLY ]] && K8S_CMDS=(kube-apiserver)
ADDONS=
[[ ${1:-} == addons && -z $ENVTEST_ONLY ]] && ADDONS=1

NAME=k8s-binaries
source "$(dirname "$0")/lib/module-release.sh" # its Go settings and log

# progress runs a long build and says every minute that it is still going, so
# that a first run does not look hung.
progress() {
  local what=$1 typical=$2 start=$SECONDS
  shift 2
  log "building $what (a cold build takes $typical on 2 CPUs; cached afterwards in $OUT)"
  ( while sleep 60; do log "  still building $what: $(((SECONDS - start) / 60)) min so far"; done ) &
  local ticker=$! rc=0
  { "$@" 2>&1 1>&3 | sed -u '/^go: downloading /d' >&2; } 3>&1 || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  ((rc == 0)) && log "built $what in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"
  return "$rc"
}

# built NAME VERSION: NAME is in the cache, built at VERSION. A stamp written
# before the binaries had a line each says k8s=VERSION for all of Kubernetes.
built() {
  [[ -x "$OUT/$1" && -f "$STAMP" ]] || return 1
  local have
  have=$(tr ' ' '\n' <"$STAMP")
  grep -qxF "$1=$2" <<<"$have" && return 0
  [[ $1 == kube* && $2 == "$K8S_VERSION" ]] && grep -qxF "k8s=$2" <<<"$have"
}

# stamp NAME VERSION records that NAME was built at VERSION (under a lock of
# its own: etcd and Kubernetes build at the same time).
stamp() {
  (
    flock 8
    local others=
    [[ -f "$STAMP" ]] && others=$(tr ' ' '\n' <"$STAMP" | grep -v -e "^$1=" -e '^$' || true)
    printf '%s\n' $others "$1=$2" | sort >"$STAMP.new"
    mv "$STAMP.new" "$STAMP"
  ) 8>"$STAMP.lock"
}

complete() {
  local b
  built etcd "$ETCD_VERSION" || return 1
  for b in "${K8S_CMDS[@]}"; do built "$b" "$K8S_VERSION" || return 1; done
  [[ -z $ADDONS ]] || { built kube-router "$KUBE_ROUTER_VERSION" && built prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" && built metrics-server "$METRICS_SERVER_VERSION"; }
}

# Wait for the lock (another process's build), unless what this caller asks
# for is complete meanwhile: a binary counts only once its stamp line is
# written, so a caller that needs only etcd and Kubernetes does not wait for
# another process that goes on to build the addons.
mkdir -p "$CACHE"
exec 9>"$CACHE/.${OUT##*/}.lock"
until flock -n 9; do
  if complete; then
    echo "$OUT"
    exit 0
  fi
  sleep 2
done
if complete; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/elasti-k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# build_etcd puts etcd into $OUT. Every Kubernetes version here runs the same
# etcd release, so it is built once, into $CACHE/etcd-<version>/ under a lock
# of its own (the envtest tiers of two versions ask for it at the same time),
# and linked into each version's directory.
build_etcd() {
  built etcd "$ETCD_VERSION" && return 0
  local shared="$CACHE/etcd-$ETCD_VERSION"
  (
    flock 7
    [[ -x "$shared/etcd" ]] && exit 0
    local d="$work/etcd" patch=${ETCD_VERSION##*.}
    mkdir -p "$d" "$shared"
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
    # A lower CPU priority: etcd builds beside Kubernetes, whose longer build
    # decides when both are ready.
    progress "etcd $ETCD_VERSION" "about a minute (longer beside Kubernetes)" \
      nice -n 10 bash -c 'cd "$1" && go mod download go.etcd.io/etcd/server/v3 && go build -mod=mod -trimpath -o "$2/etcd.tmp" go.etcd.io/etcd/server/v3' _ "$d" "$shared"
    mv "$shared/etcd.tmp" "$shared/etcd"
  ) 7>"$CACHE/.etcd-$ETCD_VERSION.lock"
  ln -f "$shared/etcd" "$OUT/etcd" 2>/dev/null || cp "$shared/etcd" "$OUT/etcd"
  stamp etcd "$ETCD_VERSION"
}

build_kubernetes() {
  local cmds=() b
  for b in "${K8S_CMDS[@]}"; do built "$b" "$K8S_VERSION" || cmds+=("$b"); done
  ((${#cmds[@]} > 0)) || return 0
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
  for b in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  progress "${cmds[*]} $K8S_VERSION" "7 to 12 minutes" \
    bash -c 'cd "$1" && shift && go build -mod=mod -trimpath -ldflags "$1" -o "$2/" "${@:3}"' _ "$d" "$ldflags" "$OUT" "${pkgs[@]}"
  for b in "${cmds[@]}"; do stamp "$b" "$K8S_VERSION"; done
}

build_kube_router() {
  built kube-router "$KUBE_ROUTER_VERSION" && return 0
  local d="$work/kube-router"
  mkdir -p "$d"
  # go get resolves the rest of the build list from these two exact versions
  # (the same list every time: released modules do not change).
  (cd "$d" && go mod init elasti.local/kube-router-build >/dev/null 2>&1 &&
    go get "github.com/cloudnativelabs/kube-router@$KUBE_ROUTER_VERSION" "github.com/osrg/gobgp/v3/pkg/server@$GOBGP_VERSION" >/dev/null 2>&1) ||
    { log "could not resolve kube-router $KUBE_ROUTER_VERSION with gobgp $GOBGP_VERSION from the module proxy"; return 1; }
  progress "kube-router $KUBE_ROUTER_VERSION" "about two minutes" \
    bash -c 'cd "$1" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$2/kube-router" github.com/cloudnativelabs/kube-router/cmd/kube-router' _ "$d" "$OUT"
  stamp kube-router "$KUBE_ROUTER_VERSION"
}

# build_tool NAME VERSION MODULE PKG TYPICAL builds the command PKG of MODULE
# at VERSION, as released, into $OUT/NAME, from a throwaway module that
# requires it (its own go.mod has no replace directives that matter).
build_tool() {
  local name=$1 version=$2 module=$3 pkg=$4 typical=$5
  built "$name" "$version" && return 0
  local d="$work/$name"
  mkdir -p "$d"
  (cd "$d" && go mod init "elasti.local/$name-build" >/dev/null 2>&1 &&
    go get "$module@$version" >/dev/null 2>&1) ||
    { log "could not resolve $name $version from the module proxy"; return 1; }
  progress "$name $version" "$typical" \
    bash -c 'cd "$1" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$2/$3" "$4"' _ "$d" "$OUT" "$name" "$pkg"
  stamp "$name" "$version"
}

# What the cluster needs first, then what only some tests use.
# etcd builds beside Kubernetes: one build alone leaves the CPUs idle while
# it downloads modules and links.
build_etcd &
etcd_build=$!
build_kubernetes
wait "$etcd_build"
if [[ -n $ADDONS ]]; then
  build_kube_router
  build_tool prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" sigs.k8s.io/prometheus-adapter sigs.k8s.io/prometheus-adapter/cmd/adapter "about three minutes"
  build_tool metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server "about two minutes"
fi
log "binaries ready in $OUT"
echo "$OUT"
