#!/usr/bin/env bash
# Builds helm from the Go module proxy at a pinned version (helm is not in
# Debian's archive) and prints the path of the binary on stdout:
#
#   <repo>/bin/tools/helm-<version>
#
# Idempotent: an existing binary of that version is reused. Progress goes to
# stderr, so `HELM=$(hack/helm.sh)` is safe.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
# The Kubernetes minor version of the client-go that HELM_VERSION requires
# (v3.22.0: k8s.io/client-go v0.37.x). Helm's own release build stamps it in;
# without it `helm template` and `helm lint` assume Kubernetes v1.20 and
# refuse charts with a kubeVersion constraint.
HELM_K8S_MINOR=${HELM_K8S_MINOR:-37}

source "$(dirname "${BASH_SOURCE[0]}")/lib/goenv.sh"
export CGO_ENABLED=0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/helm-$HELM_VERSION"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$tools"
# Install into a private directory first, so that a plain "helm" never
# shadows the versioned name and two concurrent builds do not race on it.
tmp=$(mktemp -d "$tools/.helm-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "helm: building helm.sh/helm/v3/cmd/helm@$HELM_VERSION (cold: a minute or two)" >&2
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done
GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
mv "$tmp/helm" "$bin"
echo "$bin"
