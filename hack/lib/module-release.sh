# Sourced by the scripts that build a released controller from its source on
# the Go module proxy (hack/argo-rollouts.sh, hack/keda.sh; hack/k8s-binaries.sh
# uses only its Go settings and log). Such releases pin
# their Kubernetes modules with replace directives, which apply only inside
# their own module, so `go install module@version` would refuse them: the
# release's source is downloaded and built in a copy of it.
#
# The caller sets NAME (for its log lines), CACHE and OUT (the finished
# directory), calls release_lock before it looks whether OUT is complete,
# then release_src and release_build, and release_done once OUT's content is
# in $work/out.

source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"
export CGO_ENABLED=0

log() { echo "$NAME: $*" >&2; }

# release_lock waits until no other process builds OUT (a build started in
# the background by hack/test-e2e.sh, say) and holds the lock until exit.
release_lock() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.${OUT##*/}.lock"
  flock 9
}

# release_src MODULE VERSION: a writable copy of the release's source in
# $work/src, $work being a temporary directory beside OUT (removed on exit).
release_src() {
  work=$(mktemp -d "$CACHE/.${OUT##*/}.build.XXXXXX")
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  local dir
  dir=$(cd "$work" && go mod download -json "$1@$2" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [[ -n $dir && -d $dir ]] || { log "could not download $1@$2 from the module proxy"; exit 1; }
  cp -r "$dir" "$work/src"
  chmod -R u+w "$work/src"
  mkdir -p "$work/out"
  start=$SECONDS
}

# release_build ARGS...: go build ARGS in $work/src, with a progress line
# every minute (a cold build is mostly module downloads).
release_build() {
  ( while sleep 60; do log "  still building: $(((SECONDS - start) / 60)) min so far"; done ) &
  local ticker=$! rc=0
  (cd "$work/src" && go build -trimpath "$@") || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if ((rc != 0)); then
    log "the build failed (exit $rc)"
    exit "$rc"
  fi
}

# release_done: moves $work/out into place as OUT and prints OUT.
release_done() {
  rm -rf "$OUT"
  mv "$work/out" "$OUT"
  log "built in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s: $OUT"
  echo "$OUT"
}
