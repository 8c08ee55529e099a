// Package e2e runs end-to-end tests on the local cluster (test/cluster).
//
// A test package's TestMain calls Main, which brings the cluster up once per
// `go test` run (or reuses one that `make cluster-up` started), builds and
// imports the project's images, runs the tests, and then takes the cluster
// down and checks that the machine is exactly as it was before. Set
// ELASTI_E2E_KEEP=1 to leave a cluster the run started running.
//
// Tests reach the cluster through Env: a controller-runtime client and a
// clientset for the API, and a dialer and HTTP client whose connections start
// inside the node's network namespace, so ClusterIPs, pod IPs and cluster DNS
// names work as they do for a host-network pod.
//
// The tests themselves carry the build tag e2e: `make test-e2e`.
package e2e
