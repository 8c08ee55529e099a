// Package cluster runs a real single-node Kubernetes cluster on this machine
// for the demo and the end-to-end tests: etcd, the control plane, containerd,
// the kubelet, kube-proxy and CoreDNS, all inside a network namespace the
// harness creates, with every file under one state directory.
//
// Up brings it up (a no-op when it already runs), Down removes everything it
// created and restores what it changed, and Snapshot records the machine state
// that Down must leave as it found it. docs/local-cluster.md describes the
// layout.
package cluster
