#!/usr/bin/env bash
# Builds VictoriaMetrics' single-node server (victoria-metrics) and its auth
# proxy (vmauth), pinned, from the Go module proxy, into a cache outside the
# repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/victoriametrics-<version>/
#
# The integration tests of internal/scaling run them as a Prometheus-compatible
# backend with tenants and authentication in front (ELASTI_VICTORIAMETRICS_DIR).
#
# VictoriaMetrics' go.mod has no replace directives, so `go install
# module/app/x@version` builds it as released. Releases after v1.151.0 need a
# newer Go than this project's; do not raise the version without checking.
# CGO_ENABLED=0 gives the pure-Go builds (no C toolchain needed).
#
# Idempotent: when the directory holds both binaries it prints it and exits;
# while another process builds them, it waits for that build.
# The build goes to a temporary directory beside it, moved into place only once
# both binaries are built, so an interrupted build is never taken for a
# finished one. Prints the directory on stdout, progress on stderr.
set -euo pipefail

VM_VERSION=${VICTORIAMETRICS_VERSION:-v1.151.0}
MODULE=github.com/VictoriaMetrics/VictoriaMetrics
APPS=(victoria-metrics vmauth)
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/victoriametrics-$VM_VERSION"

source "$(dirname "${BASH_SOURCE[0]}")/lib/goenv.sh"
export CGO_ENABLED=0

log() { echo "victoriametrics: $*" >&2; }

complete() {
  local a
  for a in "${APPS[@]}"; do [[ -x "$OUT/$a" ]] || return 1; done
}

if complete; then
  echo "$OUT"
  exit 0
fi

# One build at a time: the envtest tiers of two Kubernetes versions start
# together and both ask for it; the second waits for the first's binaries.
mkdir -p "$CACHE"
exec 9>"$CACHE/.victoriametrics-$VM_VERSION.lock"
flock 9
if complete; then
  echo "$OUT"
  exit 0
fi
work=$(mktemp -d "$CACHE/.victoriametrics-$VM_VERSION.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

pkgs=()
for a in "${APPS[@]}"; do pkgs+=("$MODULE/app/$a@$VM_VERSION"); done
# lib/buildinfo.Version is what -version prints; upstream sets it the same way.
ldflags="-s -w -X $MODULE/lib/buildinfo.Version=elasti-build-$VM_VERSION"

log "building ${APPS[*]} $VM_VERSION (a cold build takes about a minute; cached afterwards in $OUT)"
start=$SECONDS
( while sleep 60; do log "  still building: $(((SECONDS - start) / 60)) min so far"; done ) &
ticker=$!
rc=0
GOBIN="$work" go install -trimpath -ldflags "$ldflags" "${pkgs[@]}" || rc=$?
kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
if ((rc != 0)); then
  log "the build failed (exit $rc)"
  exit "$rc"
fi
log "built in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"

# A directory left without both binaries (an interrupted build of an older
# version of this script) is replaced.
rm -rf "$OUT"
chmod 755 "$work"
mv -T "$work" "$OUT"
trap - EXIT
log "binaries ready in $OUT"
echo "$OUT"
