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
	start := time.Now()
	if started, err := c.spawnOptional(comp, "node "+c.NodeName+" does not enforce NetworkPolicies", logf); !started || err != nil {
		return err
	}
	if err := c.waitFor(ctx, comp.name, 2*time.Minute, c.kubeRouterReady); err != nil {
		return err
	}
	logf("%s on node %s ready (%s)", comp.name, c.NodeName, time.Since(start).Round(time.Millisecond))
	return nil
}

// spawnOptional starts optional component comp unless it is not built (then
// it says what the cluster lacks, and why) or already runs. started is true
// when it was spawned now and the caller should wait for it.
func (c Config) spawnOptional(comp component, lacking string, logf Logf) (started bool, err error) {
	if !fileExists(comp.bin) {
		logf("no %s in %s: %s (hack/k8s-binaries.sh addons builds it)", comp.name, c.BinDir, lacking)
		return false, nil
	}
	if _, ok := c.runningPID(comp.name); ok {
		return false, nil
	}
	return true, c.spawn(comp)
}
