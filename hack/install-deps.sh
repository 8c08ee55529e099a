#!/usr/bin/env bash
# Installs the Debian packages the tests and the local cluster need. Safe to
# run again. Packages' own services are not started: the tests start what they
# need themselves.
set -euo pipefail
PACKAGES=(
  git make ca-certificates
  prometheus   # real Prometheus for trigger tests (started by the tests)
  # The local cluster (test/cluster): a container runtime, CNI plugins, and the
  # tools kube-proxy and the harness call. None of their services is started.
  containerd runc containernetworking-plugins
  iptables nftables conntrack iproute2 util-linux
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
# Keep package postinst scripts from starting daemons.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee $policy >/dev/null
  $SUDO chmod +x $policy
  trap '$SUDO rm -f $policy' EXIT
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
