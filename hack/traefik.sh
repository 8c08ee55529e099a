#!/usr/bin/env bash
# Builds Traefik, pinned, from the Go module proxy, with the Gateway API's
# standard CRDs beside it, into a cache outside the repo:
#
#   ${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}/traefik-<version>/
#     traefik
#     crds/*.yaml          (sigs.k8s.io/gateway-api's config/crd/standard,
#                           the version Traefik's go.mod requires)
#
# The end-to-end tests run it on the local cluster (elasti-cluster
# traefik-start) as the front door in front of sleeping Services: one
# process serving Kubernetes Ingress and Gateway API routes. Traefik's web
# UI is left out: the module ships without its built assets, which nothing
# here needs. v3.6.12, not the newest v3.7: v3.7's go.mod replaces a module
# of its own with a directory its module zip does not hold, and the ACME
# DNS clients it requires are not on the module proxy.
#
# Idempotent: when the directory is complete it prints it and exits; while
# another process builds it, it waits for that build. The build goes to a
# temporary directory beside it, moved into place only once it is complete.
# Prints the directory on stdout, progress on stderr.
set -euo pipefail

VERSION=${TRAEFIK_VERSION:-v3.6.12}
GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.4.0}
MODULE=github.com/traefik/traefik/v3
NAME=traefik
CACHE=${ELASTI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}
OUT="$CACHE/traefik-$VERSION"
source "$(dirname "$0")/lib/module-release.sh"

release_lock
if [[ -x "$OUT/traefik" && -f "$OUT/crds/gateway.networking.k8s.io_httproutes.yaml" ]]; then
  echo "$OUT"
  exit 0
fi

release_src "$MODULE" "$VERSION"
required=$(cd "$work/src" && go list -m -f '{{.Version}}' sigs.k8s.io/gateway-api)
if [[ $required != "$GATEWAY_API_VERSION" ]]; then
  log "Traefik $VERSION requires sigs.k8s.io/gateway-api $required, not $GATEWAY_API_VERSION: pin the same version in $0"
  exit 1
fi
log "building traefik $VERSION (a cold build takes several minutes on 2 CPUs, most of it module downloads and compiling its providers; cached afterwards in $OUT)"
release_build -ldflags "-s -w" -o "$work/out/traefik" ./cmd/traefik
crds=$(cd "$work" && go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
mkdir -p "$work/out/crds"
# The CRDs only: the directory may also hold a ValidatingAdmissionPolicy.
for f in "$crds/config/crd/standard/gateway.networking.k8s.io_"*.yaml; do
  [[ $f == *_vap_* ]] || cp "$f" "$work/out/crds/"
done
release_done
