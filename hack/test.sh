#!/usr/bin/env bash
# `make test`: every test tier, each timed, with a summary at the end.
#
#   unit          go test -race ./... and each fuzz target (make test-unit)
#   integration   envtest on K8S_VERSION, integration tests only (make
#                 test-integration), at a lower CPU priority beside unit
#   oldest        envtest on OLDEST_K8S_VERSION (make test-integration-oldest),
#                 the same, beside them; both go on beside e2e and multinode,
#                 joined after them
#   e2e           the local cluster, one node (make test-e2e)
#   multinode     the local cluster, two nodes (make test-multinode)
#
# While the first tiers run, what the end-to-end tiers need and a fresh
# machine lacks (the cluster's optional components, Argo Rollouts, KEDA) is
# built in the background, at the foreground's CPU priority (the end-to-end
# tier waits for it), above the envtest tiers (whose kube-apiserver build
# for the oldest version is not needed before they are joined); the later
# tiers' scripts wait for those builds (each script locks its output)
# instead of starting their own. On a warm machine every one of them finds
# its cache and returns at once.
#
# The first tier that fails stops the run; the summary still prints.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/goenv.sh
: "${OLDEST_K8S_VERSION:?set by the Makefile}"
mkdir -p bin
start=$SECONDS
summary=()

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

summarize() {
  echo
  echo "::: make test: tier times"
  printf '  %s\n' "${summary[@]}"
  echo "  total       $(mmss $((SECONDS - start)))"
}

# tier NAME COMMAND...: runs one tier in the foreground.
tier() {
  local name=$1 t=$SECONDS rc=0
  shift
  echo
  echo "::: tier $name (at $(mmss $((SECONDS - start))))"
  "$@" || rc=$?
  summary+=("$(printf '%-11s %s %s' "$name" "$(mmss $((SECONDS - t)))" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")")")
  if ((rc != 0)); then
    summarize
    exit "$rc"
  fi
}

# Work beside the tiers runs in process groups of its own (setsid), so that
# a run that stops early stops it too, children and all.
background=()
trap 'for p in "${background[@]}"; do kill -- "-$p" 2>/dev/null || true; done' EXIT
# One build after another, in the order the tiers need them.
setsid bash -c '
  for build in "hack/k8s-binaries.sh addons" hack/argo-rollouts.sh hack/keda.sh; do
    $build >/dev/null 2>&1 || echo "the background build \"$build\" failed; the tier that needs it builds it again"
  done' >bin/prebuild.log 2>&1 &
background+=($!)

# The unit tier and both envtest tiers start together and compile the same
# packages under the race detector (client-go, controller-runtime, envtest,
# ...). The go command does not share a compile in progress between
# processes, so on a fresh machine each of the three would compile them, at
# the same time. Compile them once, first (every non-main package the tests
# import, none of the test binaries); on a warm machine this takes a second.
echo "::: compiling the tests' packages once, under the race detector"
t=$SECONDS
pkgs=$(go list -deps -test -tags integration \
  -f '{{if and (not .Standard) (ne .Name "main")}}{{.ImportPath}}{{end}}' ./... |
  grep -v -e '\.test$' -e ' \[')
# shellcheck disable=SC2086 # one argument per package
go build -race -tags integration $pkgs
echo "::: compiled in $(mmss $((SECONDS - t)))"

# beside NAME COMMAND...: runs one tier in the background, at a lower CPU
# priority, its output kept for join.
beside() {
  local name=$1
  shift
  echo
  echo "::: tier $name starts beside the next (at $(mmss $((SECONDS - start))))"
  rm -f "bin/tier-$name.log" "bin/tier-$name.log.result"
  setsid bash -c '
    log=$1 t=$SECONDS rc=0
    shift
    nice -n 10 "$@" >"$log" 2>&1 || rc=$?
    echo "$((SECONDS - t)) $rc" >"$log.result"' _ "bin/tier-$name.log" "$@" &
  background+=($!)
  eval "beside_$name=$!"
}

# join NAME: waits for a tier started with beside, prints its output and
# records its time.
join() {
  local name=$1 pid took rc
  pid=$(eval "echo \$beside_$name")
  echo
  echo "::: tier $name (ran beside; its output follows)"
  wait "$pid" || true
  cat "bin/tier-$name.log"
  read -r took rc <"bin/tier-$name.log.result" 2>/dev/null || { took=$((SECONDS - start)) rc=1; }
  summary+=("$(printf '%-11s %s %s' "$name" "$(mmss "$took")" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")") (beside)")
  if ((rc != 0)); then
    summarize
    exit "$rc"
  fi
}

# The envtest tiers use little CPU (their API servers mostly wait), so both
# run beside the unit tier and then the end-to-end tiers, at a lower
# priority, and are joined after them. (Joined before the end-to-end tier,
# they cost a warm run about three minutes of waiting; beside it, two
# integration tests once failed under its load, and both were made
# timing-independent: docs/local-cluster.md.)
beside integration make --no-print-directory test-integration
beside oldest make --no-print-directory test-integration-oldest
tier unit make --no-print-directory test-unit
tier e2e make --no-print-directory test-e2e
tier multinode make --no-print-directory test-multinode
join integration
join oldest

# The background builds are done by now (the last tier needed the last of
# them); wait, so that nothing outlives the run.
for p in "${background[@]}"; do wait "$p" 2>/dev/null || true; done
background=()
summarize
