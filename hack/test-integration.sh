#!/usr/bin/env bash
# `make test-integration`: the integration tests, and only those, against a
# real kube-apiserver and etcd (envtest) of K8S_VERSION.
#
# An integration test is a test function in a file with the build tag
# `integration`. Those files sit beside the unit tests of their package, so
# `go test -tags integration` would also run every unit test of the package
# again (make test-unit already runs them, under the race detector). This
# script lists the integration tests of each package from those files and
# runs exactly them (-run '^(names)$'). A unit test with the same name as an
# integration test would run too, so such a name is refused here.
#
# Each package starts its own API server in TestMain, so packages run side by
# side: ELASTI_INTEGRATION_PARALLEL of them at once (default 4; each API
# server and etcd take about 300 MiB). A package whose tests take much longer
# than the others' (ELASTI_INTEGRATION_SPLIT, default internal/controller:
# about 4.5 minutes of tests that run one after another) is run as two test
# processes, each with half of its tests and an API server of its own, so it
# does not set the pace of the whole tier.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
K8S_VERSION=${K8S_VERSION:?K8S_VERSION is set by the Makefile}
parallel=${ELASTI_INTEGRATION_PARALLEL:-4}
split=${ELASTI_INTEGRATION_SPLIT-./internal/controller}

tagged=$(grep -l --include='*_test.go' -r '^//go:build integration$' internal test cmd api 2>/dev/null | sort)
[[ -n $tagged ]] || { echo "test-integration: no file has the build tag integration" >&2; exit 1; }
pkgs=$(for f in $tagged; do echo "./$(dirname "$f")"; done | sort -u)
names=$(grep -ho '^func \(Test\|Fuzz\)[A-Za-z0-9_]*' $tagged | sed 's/^func //' | grep -vx TestMain | sort -u)
# Unit test files of the same packages must not reuse those names.
untagged=$(for p in $pkgs; do grep -L '^//go:build integration$' "$p"/*_test.go 2>/dev/null || true; done)
if [[ -n $untagged ]]; then
  clash=$(grep -ho '^func \(Test\|Fuzz\)[A-Za-z0-9_]*' $untagged | sed 's/^func //' | sort -u | comm -12 - <(echo "$names"))
  [[ -z $clash ]] || { echo "test-integration: unit tests share a name with an integration test (rename one): $clash" >&2; exit 1; }
fi

# anchored NAMES...: a -run pattern that matches exactly these test names.
anchored() { echo "^($(printf '%s\n' "$@" | paste -sd'|'))\$"; }
gotest() { go test -race -count=1 -tags integration -timeout 30m "$@"; }

hack/victoriametrics.sh >/dev/null # a failed build stops here
KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh)
ELASTI_VICTORIAMETRICS_DIR=$(hack/victoriametrics.sh)
mkdir -p bin
report="$PWD/bin/integration-apiservers-$K8S_VERSION.txt"
rm -f "$report"
export KUBEBUILDER_ASSETS ELASTI_VICTORIAMETRICS_DIR ELASTI_INTEGRATION_REPORT=$report
# shellcheck disable=SC2086 # one name per word
run=$(anchored $names)
echo "test-integration: $(echo "$names" | wc -l) tests in $(echo "$pkgs" | wc -l) packages against Kubernetes $K8S_VERSION, $parallel packages at once"

rest=$pkgs splitting=()
for p in $split; do
  if grep -qx "$p" <<<"$pkgs"; then
    rest=$(grep -vx "$p" <<<"$rest" || true)
    splitting+=("$p")
  fi
done
pids=()
# shellcheck disable=SC2086 # $rest is a list of package paths
[[ -z $rest ]] || { gotest -p "$parallel" -run "$run" $rest & pids+=($!); }
for p in "${splitting[@]}"; do
  # One test binary, built once, run twice: every other test goes to the
  # other half (neighbours in name order are often the long and short
  # variants of one feature).
  bin="$PWD/bin/integration-$(basename "$p").test"
  go test -c -race -tags integration -o "$bin" "$p"
  mapfile -t own < <(grep -ho '^func Test[A-Za-z0-9_]*' $(grep -l '^//go:build integration$' "$p"/*_test.go) | sed 's/^func //' | grep -vx TestMain | sort -u)
  for half in 0 1; do
    mine=()
    for i in "${!own[@]}"; do ((i % 2 != half)) || mine+=("${own[$i]}"); done
    ((${#mine[@]} > 0)) || continue
    (cd "$p" && "$bin" -test.count=1 -test.timeout=30m -test.run "$(anchored "${mine[@]}")" | sed -u "s|^PASS\$|ok  	$p (half $((half + 1)) of 2)|") &
    pids+=($!)
  done
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
((rc == 0)) || exit "$rc"
echo "integration tests ran against these control planes:"
sort "$report"
