// Package testenv starts the real control plane that integration tests run
// against: kube-apiserver and etcd built by hack/k8s-binaries.sh, found through
// KUBEBUILDER_ASSETS, with Elasti's CRDs and admission policies installed.
package testenv
