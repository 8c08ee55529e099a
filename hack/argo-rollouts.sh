#!/usr/bin/env bash
# Builds Argo Rollouts' controller, pinned, from the Go module proxy, with its
# CRDs beside it, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/argo-rollouts-<version>/
#     rollouts-controller
#     crds/*.yaml          (the release's manifests/crds)
#
# The end-to-end tests run it on the local cluster (elasti-cluster
# rollouts-start) to sleep and wake a real Rollout. v1.10.2 and v1.9.3 need a
# newer Go than this project's; v1.10.1 is the newest release that builds
# with it.
#
# Idempotent: when the directory is complete it prints it and exits; while
# another process builds it, it waits for that build. The build
# goes to a temporary directory beside it, moved into place only once it is
# complete. Prints the directory on stdout, progress on stderr.
set -euo pipefail

VERSION=${ARGO_ROLLOUTS_VERSION:-v1.10.1}
MODULE=github.com/argoproj/argo-rollouts
NAME=argo-rollouts
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/argo-rollouts-$VERSION"
source "$(dirname "$0")/lib/module-release.sh"

release_lock
if [[ -x "$OUT/rollouts-controller" && -f "$OUT/crds/rollout-crd.yaml" ]]; then
  echo "$OUT"
  exit 0
fi

release_src "$MODULE" "$VERSION"
log "building rollouts-controller $VERSION (a cold build takes about five minutes on 2 CPUs, most of it module downloads; cached afterwards in $OUT)"
release_build -ldflags "-s -w -X $MODULE/utils/version.version=${VERSION#v}" -o "$work/out/rollouts-controller" ./cmd/rollouts-controller
mkdir -p "$work/out/crds"
cp "$work/src/manifests/crds/"*-crd.yaml "$work/out/crds/"
release_done
