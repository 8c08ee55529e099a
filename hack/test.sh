#!/usr/bin/env bash
# `make test`: every test tier, each timed, with a summary at the end.
#
#   unit          go test -race ./... and each fuzz target (make test-unit)
#   integration   envtest on K8S_VERSION, integration tests only (make
#                 test-integration)
#   oldest        envtest on OLDEST_K8S_VERSION (make test-integration-oldest)
#   e2e           the local cluster, one node (make test-e2e)
#   multinode     the local cluster, two nodes (make test-multinode)
#
# The end-to-end tiers run one after the other in the foreground (they share
# the one local cluster); unit and both envtest tiers run beside them, at a
# lower CPU priority, and are joined after them. A tier beside that fails
# stops the run at the next tier's start, not only at its join.
#
# While the first tiers run, what the end-to-end tiers need and a fresh
# machine lacks (the cluster's optional components, Argo Rollouts,
# Traefik, KEDA) is built in the background, at the foreground's CPU
# priority (the end-to-end tier waits for it), above the tiers beside (the oldest tier's
# kube-apiserver build is not needed before it is joined); the later
# tiers' scripts wait for those builds (each script locks its output)
# instead of starting their own. On a warm machine every one of them finds
# its cache and returns at once.
#
# The first tier found failed stops the run; the summary still prints.
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

# tier NAME COMMAND...: runs one tier in the foreground, after checking that
# no tier beside has failed yet.
tier() {
  local name=$1 t=$SECONDS rc=0
  shift
  stop_if_beside_failed
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
  for build in "hack/k8s-binaries.sh addons" hack/argo-rollouts.sh hack/traefik.sh hack/keda.sh; do
    $build >/dev/null 2>&1 || echo "the background build \"$build\" failed; the tier that needs it builds it again"
  done' >bin/prebuild.log 2>&1 &
background+=($!)

# beside NAME COMMAND...: runs one tier in the background, at a lower CPU
# priority, its output kept for join.
besides=()
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
  besides+=("$name")
  eval "beside_$name=$!"
}

# The unit tier and both envtest tiers compile the same packages under the
# race detector (client-go, controller-runtime, envtest, ...). The go
# command does not share a compile in progress between processes, so on a
# fresh machine each of the three would compile them, at the same time.
# The compile tier compiles them once (every non-main package the tests
# import, none of the test binaries; a second on a warm machine), holding
# bin/race-compile.lock, which the three wait for (flock -s).
exec 9>bin/race-compile.lock
flock 9
# shellcheck disable=SC2016 # expanded by the tier's shell
beside compile bash -c '
  pkgs=$(go list -deps -test -tags integration \
    -f "{{if and (not .Standard) (ne .Name \"main\")}}{{.ImportPath}}{{end}}" ./... |
    grep -v -e "\.test\$" -e " \[")
  go build -race -tags integration $pkgs'
exec 9>&- # the compile tier holds the lock now, until it ends
after_compile=(flock -s bin/race-compile.lock)

# stop_if_beside_failed: joins (and so stops the run at) the first tier
# beside that has already ended with a failure.
stop_if_beside_failed() {
  local name took rc
  for name in "${besides[@]}"; do
    if [[ -f bin/tier-$name.log.result ]] && read -r took rc <"bin/tier-$name.log.result" && ((rc != 0)); then
      join "$name"
    fi
  done
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

# The end-to-end tiers mostly wait (for cooldowns, wakes, pods), so the
# other tiers fill the CPU they leave: beside them, at a lower priority,
# joined after them. (In the foreground before them, the unit tier cost a
# warm run about three minutes, and on a fresh machine it held back the
# builds the end-to-end tier waits for; beside it, tests that fail under
# load are made timing-independent, as two integration tests were:
# docs/local-cluster.md.)
beside unit "${after_compile[@]}" make --no-print-directory test-unit
beside integration "${after_compile[@]}" make --no-print-directory test-integration
beside oldest "${after_compile[@]}" make --no-print-directory test-integration-oldest
tier e2e make --no-print-directory test-e2e
tier multinode make --no-print-directory test-multinode
join compile
join unit
join integration
join oldest

# The background builds are done by now (the last tier needed the last of
# them); wait, so that nothing outlives the run.
for p in "${background[@]}"; do wait "$p" 2>/dev/null || true; done
background=()
summarize
