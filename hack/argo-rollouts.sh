#!/usr/bin/env bash
# Builds Argo Rollouts' controller, pinned, from the Go module proxy, with its
# CRDs beside it, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/argo-rollouts-<version>/
#     rollouts-controller
#     crds/*.yaml          (the release's manifests/crds)
#
# The end-to-end tests run it on the local cluster (elasti-cluster
# rollouts-start) to sleep and wake a real Rollout.
#
# Argo Rollouts' go.mod pins its Kubernetes modules with replace directives,
# which apply only inside its own module, so the release's source is
# downloaded from the module proxy and built there (`go install module@version`
# would refuse them). v1.10.2 and v1.9.3 need a newer Go than this project's;
# v1.10.1 is the newest release that builds with it.
#
# Idempotent: when the directory is complete it prints it and exits. The build
# goes to a temporary directory beside it, moved into place only once it is
# complete. Prints the directory on stdout, progress on stderr.
set -euo pipefail

VERSION=${ARGO_ROLLOUTS_VERSION:-v1.10.1}
MODULE=github.com/argoproj/argo-rollouts
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/argo-rollouts-$VERSION"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { echo "argo-rollouts: $*" >&2; }

if [[ -x "$OUT/rollouts-controller" && -f "$OUT/crds/rollout-crd.yaml" ]]; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.argo-rollouts-$VERSION.build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

dir=$(cd "$work" && go mod download -json "$MODULE@$VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
[[ -n $dir && -d $dir ]] || { log "could not download $MODULE@$VERSION from the module proxy"; exit 1; }
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"

log "building rollouts-controller $VERSION (a cold build takes about five minutes on 2 CPUs, most of it module downloads; cached afterwards in $OUT)"
start=$SECONDS
( while sleep 60; do log "  still building: $(((SECONDS - start) / 60)) min so far"; done ) &
ticker=$!
rc=0
mkdir -p "$work/out/crds"
(cd "$work/src" && go build -trimpath -ldflags "-s -w -X $MODULE/utils/version.version=${VERSION#v}" -o "$work/out/rollouts-controller" ./cmd/rollouts-controller) || rc=$?
kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
if ((rc != 0)); then
  log "the build failed (exit $rc)"
  exit "$rc"
fi
cp "$work/src/manifests/crds/"*-crd.yaml "$work/out/crds/"
rm -rf "$OUT"
mv "$work/out" "$OUT"
log "built in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s: $OUT"
echo "$OUT"
