//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoNamespacedInstallsSideBySide: two Helm installs, each watching
// one namespace that holds a workload, with the same resolver port range
// (of one port). Each operator hands out ports among its own ElastiServices
// only, so both ElastiServices get the same resolver port. Each install's resolvers
// must then see only their operator's namespaces: when every resolver
// watched all namespaces, the port was claimed twice, counted as unmapped,
// and both sleeping Services answered 404 or closed connections while their
// status said Ready. This also runs the chart's operators under
// namespace-scoped RBAC through a full sleep and wake.
//
// Two operators must never reconcile the same ElastiServices, so the
// kustomize install's operator (which watches every namespace) is scaled
// to zero and its webhook configuration and status-writers policy binding
// removed for the test; all are re-applied afterwards.
func TestTwoNamespacedInstallsSideBySide(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	helm := buildHelm(t, e.Cluster.RepoRoot)
	h := &helmCLI{bin: helm, kubeconfig: e.Cluster.Kubeconfig(), home: t.TempDir(), dir: e.Cluster.RepoRoot}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	const sharedPort = 20500
	type install struct{ release, ns, appNS string }
	var installs []install
	for range 2 {
		ns, appNS := e.NewNamespace(t), e.NewNamespace(t)
		in := install{release: "elasti-" + strings.TrimPrefix(ns, "e2e-"), ns: ns, appNS: appNS}
		installs = append(installs, in)
		t.Cleanup(func() {
			if out, err := h.run(context.Background(), "uninstall", in.release, "--namespace", in.ns, "--wait", "--timeout", "2m"); err != nil {
				t.Errorf("helm uninstall %s: %v\n%s", in.release, err, out)
			}
		})
		out, err := h.run(ctx, "install", in.release, filepath.Join("charts", "elasti"),
			"--namespace", in.ns,
			"--set", "operator.image.repository=elasti/operator,operator.image.tag=dev,operator.image.pullPolicy=IfNotPresent",
			"--set", "resolver.image.repository=elasti/resolver,resolver.image.tag=dev,resolver.image.pullPolicy=IfNotPresent",
			"--set", "operator.replicas=1,resolver.replicas=1,operator.pollingInterval=1s",
			// One port: an operator starts its allocation cursor at a
			// random place in its range, and the test needs both first
			// ElastiServices on the same port.
			"--set", fmt.Sprintf("portRange.start=%d,portRange.end=%d", sharedPort, sharedPort),
			"--set", "prometheusAddress="+e.Cluster.PrometheusURL(),
			"--set", "watchNamespaces={"+in.appNS+"}",
			"--timeout", "4m")
		if err != nil {
			t.Fatalf("helm install %s: %v\n%s", in.release, err, out)
		}
		if err := e.WaitRolledOut(ctx, in.ns, in.release+"-operator", in.release+"-resolver"); err != nil {
			t.Fatalf("install %s did not become ready: %v", in.release, err)
		}
	}

	setSharedOperatorAside(ctx, t, e) // see above

	const app = "demoapp"
	for _, in := range installs {
		e.Create(t, DemoAppDeployment(in.appNS, app, 1), DemoAppHTTPService(in.appNS, app))
	}
	for _, in := range installs {
		e.WaitReadyEndpoints(t, in.appNS, app, 1, 2*time.Minute)
		e.Create(t, e.ElastiServiceFor(in.appNS, app, IdleQuery))
	}
	for _, in := range installs {
		e.WaitAsleep(t, in.appNS, app, 3*time.Minute)
	}
	var ports []int32
	for _, in := range installs {
		es, err := e.GetElastiService(ctx, in.appNS, app)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, resolverPort(t, es, "http"))
	}
	if ports[0] != ports[1] {
		t.Fatalf("the two installs allocated resolver ports %d and %d: the test needs both on one port to show that each resolver serves only its own install's namespaces", ports[0], ports[1])
	}
	t.Logf("both installs put their ElastiService on resolver port %d", ports[0])

	// Wake each through its Service: each install's resolvers hold and
	// forward its own request.
	for _, in := range installs {
		e.SetQuery(t, in.appNS, app, BusyQuery)
	}
	for _, in := range installs {
		reqCtx, cancel := context.WithTimeout(ctx, wakeTimeout)
		body, err := GetWith(reqCtx, e.LongHTTPClient(), fmt.Sprintf("http://%s.%s.svc.cluster.local:%d/", app, in.appNS, DemoHTTPPort), "")
		cancel()
		if err != nil {
			t.Fatalf("request to the sleeping %s/%s: %v", in.appNS, app, err)
		}
		if !strings.HasPrefix(body, "hello from "+app+"-") {
			t.Fatalf("request to %s/%s answered %q", in.appNS, app, body)
		}
		e.WaitAwake(t, in.appNS, app, 2*time.Minute)
	}
}
