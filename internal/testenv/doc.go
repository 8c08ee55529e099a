// Package testenv starts the real control plane that integration tests run
// against: kube-apiserver and etcd built by hack/k8s-binaries.sh, found through
// KUBEBUILDER_ASSETS, with Elasti's CRDs and admission policies installed (and,
// on request, KEDA's and Argo Rollouts' CRDs).
//
// A test package's TestMain is one call to Main, which starts the control
// plane once per package, hands it to the package, runs the tests and stops
// it. Only tests import this package; its subpackage fixture builds the
// ElastiServices that every test tier starts from.
package testenv
