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
//
// # Parallel and sequential tests
//
// All tests share one cluster and one install of Elasti (InstallElasti, once
// per test binary). A test that touches only namespaces of its own
// (NewNamespace) calls t.Parallel() first thing. A test that changes what
// other tests rely on (the shared install, Prometheus, the nodes, the
// cluster's components) does not, and so runs alone: `go test` runs the
// top-level tests that do not call t.Parallel one at a time, in source order,
// and only once all of them have finished does it let the parallel ones run,
// up to -parallel at once (8 in hack/test-e2e.sh: with all of them at once,
// the operator's reconciles of some 30 ElastiServices polled every second
// waited seconds in its queue on a 2-CPU machine, and tests that give it a
// few seconds failed). A parallel test may therefore
// do cluster-wide set-up, such as starting a cluster component with
// ClusterCLI, before it calls t.Parallel: that part runs while no other test
// does. No parallel test calls ClusterCLI after t.Parallel, changes the
// install in elasti-system or writes an object outside its namespaces.
//
// The sequential tests, and why each runs alone:
//
//   - TestInstall: it times the shared install every other test uses and
//     checks its pods.
//   - TestHelmInstall: a second install of the chart, with cluster-scoped
//     objects (ClusterRoles, an admission policy, a webhook configuration)
//     that `helm uninstall` removes again.
//   - TestTwoNamespacedInstallsSideBySide: scales the shared operator to
//     zero and deletes its webhook configuration for the test.
//   - TestPrometheusDown: stops the cluster's Prometheus, which every
//     prometheus trigger of the other tests queries.
//   - TestNetworkTriggerWithoutPrometheus: stops Prometheus for its whole
//     run (its own subtests run in parallel with each other).
//   - TestResolversDeleted: deletes the resolver Deployment, which every
//     sleeping service of the other tests is routed to.
//   - TestOperatorKilledDuringWake: kills the operator's leader, which
//     would stall every other test's reconciles and wakes until another
//     replica takes the lease.
//   - TestScaledToZeroBySomeoneElse: no request may fail between the
//     scale to zero and the operator's proxy slice while the app drains
//     (3 s), and the other tests' load on the operator stretched that
//     window beyond the drain (its two cases run in parallel with each
//     other).
//   - TestBurstAtZero: its 500 requests load both resolvers, and it checks
//     that they return their memory once their hold queues have been empty
//     for a while, which other tests' held requests would put off.
//   - TestResolverRolloutAtScale: it sets the shared operator aside for a
//     Helm release of its own, as TestTwoNamespacedInstallsSideBySide does,
//     with 500 ElastiServices asleep.
//
// The multi-node tests (build tag multinode) follow the same rule. The
// parallel ones share one placement of the resolvers (pinResolvers, on the
// first node); those that stop a node, move the resolvers or move the
// operator run alone: TestMultiNodeResolversMoveWhileHolding,
// TestMultiNodeResolversNodeStopped and TestMultiNodeOperatorLeaderNodeStopped.
package e2e
