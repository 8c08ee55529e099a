package cluster

import (
	"context"
	"fmt"
	"io"
)

// PrintStatus writes whether each component runs and how to use the cluster.
func (c Config) PrintStatus(ctx context.Context, w io.Writer) error {
	running := 0
	comps := c.components()
	for _, comp := range comps {
		state := "stopped"
		if pid, ok := c.runningPID(comp.name); ok {
			state = fmt.Sprintf("running (pid %d)", pid)
			running++
		}
		fmt.Fprintf(w, "%-24s %s\n", comp.name, state)
	}
	for _, comp := range c.optionalComponents() {
		fmt.Fprintf(w, "%-24s %s\n", comp.name, optionalState(c, comp))
	}
	for _, node := range c.existingWorkers() {
		fmt.Fprintf(w, "%-24s %s\n", node.NodeName+"/kube-router", optionalState(node, node.kubeRouter()))
		for _, comp := range node.workerComponents() {
			comps = append(comps, comp)
			state := "stopped"
			if pid, ok := node.runningPID(comp.name); ok {
				state = fmt.Sprintf("running (pid %d)", pid)
				running++
			}
			fmt.Fprintf(w, "%-24s %s\n", node.NodeName+"/"+comp.name, state)
		}
	}
	for _, comp := range c.addons() {
		state := "stopped (optional)"
		if pid, ok := c.runningPID(comp.name); ok {
			state = fmt.Sprintf("running (pid %d)", pid)
			if comp.name == PrometheusComponent {
				state += " at " + c.PrometheusURL()
			}
		}
		fmt.Fprintf(w, "%-24s %s\n", comp.name, state)
	}
	switch {
	case running == 0:
		fmt.Fprintln(w, "cluster: down")
		return nil
	case running < len(comps):
		fmt.Fprintln(w, "cluster: partly running; `make cluster-up` starts it over, `make cluster-down` removes it")
		return nil
	}
	out, err := c.Kubectl(ctx, "", "get", "nodes,pods", "-A", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Fprint(w, out)
	c.PrintUsage(w)
	return nil
}

// PrintUsage says how to reach the cluster.
func (c Config) PrintUsage(w io.Writer) {
	fmt.Fprintf(w, `
The cluster is up. Use it with:
  export KUBECONFIG=%s
  %s/kubectl get nodes
API server %s; node %s (%s) in network namespace %s.
Pods %s, Services %s, DNS %s. Logs in %s.
Enter the node's network: ip netns exec %s <command>
`, c.Kubeconfig(), c.BinDir, c.APIServerURL(), c.NodeName, c.NodeIP, c.NetNS,
		c.PodCIDR, c.ServiceCIDR, c.DNSServiceIP, c.logDir(), c.NetNS)
	for _, n := range c.existingWorkers() {
		fmt.Fprintf(w, "Node %s (%s): network namespace %s, pods %s, logs in %s.\n", n.NodeName, n.NodeIP, n.NetNS, n.PodCIDR, n.logDir())
	}
}

// optionalState says whether an optional component runs on node, and when
// it does not, whether it was built.
func optionalState(node Config, comp component) string {
	if pid, ok := node.runningPID(comp.name); ok {
		return fmt.Sprintf("running (pid %d)", pid)
	}
	if !fileExists(comp.bin) {
		return "not built (optional: hack/k8s-binaries.sh addons)"
	}
	return "stopped (optional)"
}
