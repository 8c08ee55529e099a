package cluster

import (
	"context"
	"time"
)

// startOptional starts each optional component (optionalComponents) whose
// binary is in BinDir and that does not run yet: kube-router on every node,
// metrics-server on the first. Up calls it on a running cluster, so a
// cluster that `make demo` brought up before they were built gets them when
// the tests that need them run on it.
func (c Config) startOptional(ctx context.Context, logf Logf) error {
	for _, node := range append([]Config{c}, c.existingWorkers()...) {
		if err := node.startKubeRouter(ctx, logf); err != nil {
			return err
		}
	}
	return c.startMetricsServer(ctx, logf)
}

// startKubeRouter starts this node's kube-router, when it is built and not
// running yet, and waits until its health check answers.
func (c Config) startKubeRouter(ctx context.Context, logf Logf) error {
	comp := c.kubeRouter()
	if !fileExists(comp.bin) {
		logf("no kube-router in %s: node %s does not enforce NetworkPolicies (hack/k8s-binaries.sh addons builds it)", c.BinDir, c.NodeName)
		return nil
	}
	if _, ok := c.runningPID(comp.name); ok {
		return nil
	}
	start := time.Now()
	if err := c.spawn(comp); err != nil {
		return err
	}
	if err := c.waitFor(ctx, comp.name, 2*time.Minute, c.kubeRouterReady); err != nil {
		return err
	}
	logf("%s on node %s ready (%s)", comp.name, c.NodeName, time.Since(start).Round(time.Millisecond))
	return nil
}
