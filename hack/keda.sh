#!/usr/bin/env bash
# Builds KEDA's operator and metrics apiserver, pinned, from the Go module
# proxy, with its CRDs beside them, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/keda-<version>/
#     keda-operator
#     keda-adapter         (the metrics apiserver: external.metrics.k8s.io)
#     crds/*.yaml          (the release's config/crd/bases)
#
# The multi-node end-to-end tests run both on the local cluster
# (elasti-cluster keda-start): a real ScaledObject that Elasti pauses at zero
# and unpauses on wake, and that scales on an external metric served by
# KEDA itself. The admission webhooks are not built.
#
# Idempotent: when the directory is complete it prints it and exits; while
# another process builds it, it waits for that build. The build
# goes to a temporary directory beside it, moved into place only once it is
# complete. Prints the directory on stdout, progress on stderr.
set -euo pipefail

VERSION=${KEDA_VERSION:-v2.21.0}
MODULE=github.com/kedacore/keda/v2
NAME=keda
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/keda-$VERSION"
source "$(dirname "$0")/lib/module-release.sh"

release_lock
if [[ -x "$OUT/keda-operator" && -x "$OUT/keda-adapter" && -f "$OUT/crds/keda.sh_scaledobjects.yaml" ]]; then
  echo "$OUT"
  exit 0
fi

release_src "$MODULE" "$VERSION"
log "building keda-operator and keda-adapter $VERSION (about six and a half minutes on 2 CPUs from empty Go caches, most of it module downloads; cached afterwards in $OUT)"
release_build -ldflags "-s -w -X $MODULE/version.Version=${VERSION#v}" -o "$work/out/keda-operator" ./cmd/operator
release_build -ldflags "-s -w -X $MODULE/version.Version=${VERSION#v}" -o "$work/out/keda-adapter" ./cmd/adapter
mkdir -p "$work/out/crds"
cp "$work/src/config/crd/bases/"*.yaml "$work/out/crds/"
release_done
