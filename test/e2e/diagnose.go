package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// dumpNamespace logs what a failed test's namespace looked like, so that a
// failure seen once in CI can be explained from its output alone: the
// ElastiServices, Events, pods and EndpointSlices, and the operator's and
// resolvers' log lines that name the namespace.
func (e *Env) dumpNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-n", ns, "get", "elastiservices", "-o", "yaml"},
		// kubectl events sorts the operator's events.k8s.io Events too (they
		// have no lastTimestamp, by which get events --sort-by would sort).
		{"-n", ns, "events"},
		{"-n", ns, "get", "pods,endpointslices", "-o", "wide"},
	} {
		out, err := e.Cluster.Kubectl(ctx, "", args...)
		if err != nil {
			t.Logf("kubectl %s: %v", strings.Join(args, " "), err)
			continue
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	for _, component := range []string{"operator", "resolver"} {
		args := []string{"-n", ElastiNamespace, "logs", "--all-containers", "--prefix", "--since=10m", "--tail=-1",
			"-l", "app.kubernetes.io/component=" + component}
		out, err := e.Cluster.Kubectl(ctx, "", args...)
		if err != nil {
			t.Logf("kubectl %s: %v", strings.Join(args, " "), err)
			continue
		}
		var lines []string
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, ns) {
				lines = append(lines, line)
			}
		}
		if len(lines) > 200 {
			lines = lines[len(lines)-200:]
		}
		t.Logf("%s log lines naming %s (last %d):\n%s", component, ns, len(lines), strings.Join(lines, "\n"))
	}
}
