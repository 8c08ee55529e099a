#!/usr/bin/env bash
# Installs what `make demo`, `make test` and `make bench` need beyond Go: the
# Debian packages of the local cluster and the real Prometheus. Every one of
# those targets runs it first (`make deps`); when everything is present it
# returns in well under a second.
#
# It checks what cannot be installed from here before anything is built, so
# that a machine that cannot run the project fails in the first seconds with
# the command that fixes it, not after a 10-minute Kubernetes build.
#
# Packages' own services are not started: the tests start what they need
# themselves.
#
# With the argument "browser" it also installs Debian's Chromium and a font
# for it, which only the end-to-end tests need (the waking page is looked at
# in a real headless browser); `make demo` does without.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "install-deps: $1" >&2
  [[ -n ${2:-} ]] && echo "install-deps: fix: $2" >&2
  exit 1
}

# Go: the toolchain in go.mod or newer, used as is (GOTOOLCHAIN=local: no
# toolchain download).
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
command -v go >/dev/null || fail "go not found on PATH" "install Go $want_go or newer (https://go.dev/doc/install) and put it on PATH"
have_go=$(GOTOOLCHAIN=local go env GOVERSION)
have_go=${have_go#go}
if [[ $(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -1) != "$want_go" ]]; then
  fail "go.mod needs Go $want_go, this machine has $have_go" "install Go $want_go or newer"
fi

# The local cluster runs in a network namespace with its own cgroups and
# mounts: that takes root.
SUDO=
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
    fail "the local cluster needs root (network namespaces, cgroups, mounts) and this user cannot sudo without a password" "run as root, e.g. 'sudo -E make demo'"
  SUDO=sudo
fi
[[ -d /sys/fs/cgroup ]] || fail "no /sys/fs/cgroup: the local cluster's kubelet needs cgroups" "run on a Linux machine or VM with cgroups mounted"

PACKAGES=(
  git make ca-certificates
  prometheus   # real Prometheus for trigger tests and the local cluster (started by the tests)
  # The local cluster (test/cluster): a container runtime, CNI plugins, and the
  # tools kube-proxy and the harness call. None of their services is started.
  containerd runc containernetworking-plugins
  iptables nftables conntrack iproute2 util-linux
  ipset        # kube-router's network policy controller (NetworkPolicy enforcement)
)
if [[ ${1:-} == browser ]]; then
  # The waking page's end-to-end test (test/e2e/wakingpage_e2e_test.go).
  PACKAGES+=(chromium fonts-dejavu-core)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: Go $have_go, root, and every Debian package present"
  exit 0
fi
command -v apt-get >/dev/null ||
  fail "missing packages ${missing[*]} and no apt-get: the project's scripts install from Debian's archive" "install the equivalents of: ${missing[*]}"

# Keep package postinst scripts from starting daemons.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee $policy >/dev/null
  $SUDO chmod +x $policy
  trap '$SUDO rm -f $policy' EXIT
fi
start=$(date +%s)
echo "install-deps: installing ${missing[*]} from Debian (usually under a minute)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed in $(($(date +%s) - start))s"
