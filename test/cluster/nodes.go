package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// A cluster of more than one node: the first node (Config itself) runs the
// control plane, a kubelet and kube-proxy, and is linked to the host. Each
// further node n (2, 3, ...) is a network namespace of its own, elasti-node-n,
// with its own containerd, kubelet, kube-proxy and kube-router, linked to the
// first node by a veth pair of its own. The first node routes each further
// node's pod subnet to it, and each further node routes the rest of the
// cluster's ranges to the first, as a host-gateway network plugin routes a
// cluster whose nodes share one router.
//
//	host 10.250.0.1 ── 10.250.0.2 elasti-node ── 10.250.0.5 │ 10.250.0.6 elasti-node-2
//	                   pods 10.244.0.0/24        10.250.0.9 │ 10.250.0.10 elasti-node-3
//	                                                        pods 10.244.1.0/24, 10.244.2.0/24, ...

// workerLink is the name of a further node's end of its link to the first.
const workerLink = "elasti-up"

// worker returns the Config of further node n (2 ≤ n ≤ MaxNodes). Its state
// lives in nodes/<name>/ under the first node's state directory, its
// cgroups under the first node's CgroupRoot. HostLink and HostIP are the
// link's end in the first node's namespace.
func (c Config) worker(n int) Config {
	w := c
	w.NodeName = fmt.Sprintf("%s-%d", c.NodeName, n)
	w.NetNS = fmt.Sprintf("%s-%d", c.NetNS, n)
	w.StateDir = c.path("nodes", w.NodeName)
	w.CgroupRoot = c.CgroupRoot + "/" + w.NodeName
	w.HostLink = fmt.Sprintf("%s-%d", c.NodeLink, n)
	w.NodeLink = workerLink
	base := c.NodeRange.Addr().As4()
	base[3] += byte(4 * (n - 1))
	w.LinkPrefix = netip.PrefixFrom(netip.AddrFrom4(base), 30)
	w.HostIP = w.LinkPrefix.Addr().Next()
	w.NodeIP = w.HostIP.Next()
	pods := c.PodCIDR.Addr().As4()
	pods[2] += byte(n - 1)
	w.PodCIDR = netip.PrefixFrom(netip.AddrFrom4(pods), c.PodCIDR.Bits())
	w.Nodes = 1
	w.apiServerIP = c.NodeIP
	w.adminKubeconfig = c.Kubeconfig()
	return w
}

// workerNumber parses n out of a further node's namespace or node name.
func (c Config) workerNumber(name string) (int, bool) {
	for _, prefix := range []string{c.NetNS + "-", c.NodeName + "-"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			n, err := strconv.Atoi(rest)
			return n, err == nil && n >= 2 && n <= MaxNodes
		}
	}
	return 0, false
}

// existingWorkers returns the further nodes that exist on the machine: those
// with a state directory or a network namespace, in order.
func (c Config) existingWorkers() []Config {
	seen := map[int]bool{}
	if entries, err := os.ReadDir(c.path("nodes")); err == nil {
		for _, e := range entries {
			if n, ok := c.workerNumber(e.Name()); ok {
				seen[n] = true
			}
		}
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if n, ok := c.workerNumber(e.Name()); ok {
				seen[n] = true
			}
		}
	}
	var out []Config
	for n := 2; n <= MaxNodes; n++ {
		if seen[n] {
			out = append(out, c.worker(n))
		}
	}
	return out
}

// NodeNames lists the cluster's nodes: the first, then the further ones that
// exist on the machine.
func (c Config) NodeNames() []string {
	names := []string{c.NodeName}
	for _, w := range c.existingWorkers() {
		names = append(names, w.NodeName)
	}
	return names
}

// Node returns the Config of the node called name, for its network
// namespace (NodeDialer), address and components.
func (c Config) Node(name string) (Config, error) {
	if name == c.NodeName {
		return c, nil
	}
	if n, ok := c.workerNumber(name); ok {
		return c.worker(n), nil
	}
	return Config{}, fmt.Errorf("no node %q in this cluster (nodes: %s)", name, strings.Join(c.NodeNames(), ", "))
}

// workerComponents are the processes a further node needs, in start order;
// its kube-router is optional (optionalComponents).
func (c Config) workerComponents() []component {
	var out []component
	for _, comp := range c.components() {
		if slices.Contains([]string{"containerd", "kubelet", "kube-proxy"}, comp.name) {
			out = append(out, comp)
		}
	}
	return out
}

// workerCerts are the certificates a further node has of its own; the
// others stay with the first node.
var workerCerts = []string{"kubelet", "kubelet-serving", "kube-proxy"}

// writeWorkerPKI gives further node w its kubelet's client and serving
// certificates and kube-proxy's, signed by the first node's CA, and a copy of
// the CA's certificate.
func (c Config) writeWorkerPKI(w Config) error {
	dir := w.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, caCert, err := loadOrCreateCA(c.pkiDir())
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(c.pkiDir(), "ca.crt"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
		return err
	}
	for _, s := range w.certSpecs() {
		if !slices.Contains(workerCerts, s.name) || fileExists(filepath.Join(dir, s.name+".crt")) {
			continue
		}
		if err := issue(dir, s, caKey, caCert); err != nil {
			return fmt.Errorf("issue %s certificate for %s: %w", s.name, w.NodeName, err)
		}
	}
	for _, name := range []string{"kubelet", "kube-proxy"} {
		if err := w.writeKubeconfig(w.componentKubeconfig(name), w.APIServerURL(), name); err != nil {
			return err
		}
	}
	return nil
}

// setupWorkerNetwork creates further node w's namespace, its link to the
// first node, the routes both ways and its guard.
func (c Config) setupWorkerNetwork(ctx context.Context, w Config) error {
	if err := run(ctx, "ip", "netns", "add", w.NetNS); err != nil {
		return err
	}
	if err := setNodeSysctls(w.NetNSPath()); err != nil {
		return err
	}
	first, ns := c.NetNS, w.NetNS
	steps := [][]string{
		{"ip", "-n", first, "link", "add", w.HostLink, "type", "veth", "peer", "name", w.NodeLink, "netns", ns},
		{"ip", "-n", first, "addr", "add", netip.PrefixFrom(w.HostIP, w.LinkPrefix.Bits()).String(), "dev", w.HostLink},
		{"ip", "-n", first, "link", "set", w.HostLink, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", netip.PrefixFrom(w.NodeIP, w.LinkPrefix.Bits()).String(), "dev", w.NodeLink},
		{"ip", "-n", ns, "link", "set", w.NodeLink, "up"},
		// The first node is this node's router to everything else in
		// the cluster: the other nodes' pods, the links, the host.
		{"ip", "-n", ns, "route", "add", c.ClusterPodCIDR.String(), "via", w.HostIP.String()},
		{"ip", "-n", ns, "route", "add", c.NodeRange.String(), "via", w.HostIP.String()},
		{"ip", "-n", ns, "route", "add", c.ServiceCIDR.String(), "dev", w.NodeLink, "src", w.NodeIP.String()},
		{"ip", "-n", first, "route", "add", w.PodCIDR.String(), "via", w.NodeIP.String(), "dev", w.HostLink},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	guard := fmt.Sprintf(`table inet %[1]s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		oifname %[2]q ip daddr != { %[3]s, %[4]s } counter drop
		oifname %[2]q meta nfproto ipv6 counter drop
	}
}
`, w.GuardTable, w.NodeLink, c.ClusterPodCIDR, c.NodeRange)
	if err := nftApply(ctx, ns, guard); err != nil {
		return fmt.Errorf("install %s's guard: %w", w.NodeName, err)
	}
	return nil
}

// upWorker brings further node w up and waits until it is Ready and its
// network policy controller answers. images are the system images' tarballs.
func (c Config) upWorker(ctx context.Context, w Config, images []string, cs kubernetes.Interface, logf Logf, start time.Time) error {
	if err := os.MkdirAll(w.StateDir, 0o755); err != nil {
		return err
	}
	if err := c.setupWorkerNetwork(ctx, w); err != nil {
		return fmt.Errorf("set up %s's network: %w", w.NodeName, err)
	}
	if err := w.createCgroups(); err != nil {
		return err
	}
	if err := c.writeWorkerPKI(w); err != nil {
		return fmt.Errorf("write %s's PKI: %w", w.NodeName, err)
	}
	if err := w.writeConfigs(); err != nil {
		return fmt.Errorf("write %s's configs: %w", w.NodeName, err)
	}
	return w.startWorker(ctx, images, cs, logf, start)
}

// startWorker starts further node w's components, importing images into its
// containerd first, and waits until the node is Ready and its network policy
// controller (when built) answers.
func (w Config) startWorker(ctx context.Context, images []string, cs kubernetes.Interface, logf Logf, start time.Time) error {
	comps := map[string]component{}
	for _, comp := range w.workerComponents() {
		comps[comp.name] = comp
	}
	if err := w.spawn(comps["containerd"]); err != nil {
		return err
	}
	if err := w.waitFor(ctx, "containerd", 2*time.Minute, w.containerdReady); err != nil {
		return err
	}
	for _, p := range images {
		if err := w.importImage(ctx, p); err != nil {
			return err
		}
	}
	for _, name := range []string{"kubelet", "kube-proxy"} {
		if err := w.spawn(comps[name]); err != nil {
			return err
		}
	}
	if err := w.waitFor(ctx, "kubelet", 3*time.Minute, w.nodeReady(cs)); err != nil {
		return err
	}
	logf("node %s Ready (%s)", w.NodeName, time.Since(start).Round(time.Millisecond))
	return w.startKubeRouter(ctx, logf)
}

// workersRunning reports whether every further node's components run.
func (c Config) workersRunning() bool {
	for _, w := range c.existingWorkers() {
		for _, comp := range w.workerComponents() {
			if _, ok := w.runningPID(comp.name); !ok {
				return false
			}
		}
	}
	return true
}

// downWorkers stops every further node's components. Their containers, cgroups,
// mounts and namespaces go with the first node's (see down).
func (c Config) downWorkers() []error {
	var errs []error
	for _, w := range c.existingWorkers() {
		comps := append(w.workerComponents(), w.kubeRouter())
		slices.Reverse(comps)
		for _, comp := range comps {
			if err := w.stop(comp.name, 3*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// teardownWorkerNetworks deletes every further node's namespace, and with it
// its link, its routes and rules, and the first node's routes through it.
func (c Config) teardownWorkerNetworks(ctx context.Context) []error {
	var errs []error
	for _, w := range c.existingWorkers() {
		if fileExists(w.NetNSPath()) {
			if err := run(ctx, "ip", "netns", "del", w.NetNS); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// existingWorker returns further node name, which must exist, and its number.
// The first node is not one: it runs the control plane and is never stopped.
func (c Config) existingWorker(name string) (Config, int, error) {
	if n, ok := c.workerNumber(name); ok && fileExists(c.worker(n).NetNSPath()) {
		return c.worker(n), n, nil
	}
	return Config{}, 0, fmt.Errorf("%s is not a further node of this cluster (nodes: %s); the first cannot be stopped or started", name, strings.Join(c.NodeNames(), ", "))
}

// partitionTable is the nftables table, in the first node's namespace, that
// cuts further node n off while it is stopped.
func partitionTable(n int) string { return fmt.Sprintf("elasti_node_%d_down", n) }

// StopNode stops further node name as a machine that dies would stop: the
// first node drops every packet to and from it (it is the node's only link,
// so no one hears from the node any more, and connections to it go
// unanswered rather than refused), its components are killed, and so is
// every container on it. The API server still lists its Node and pods until
// the node controller notices. The first node runs the control plane and
// cannot be stopped.
func (c Config) StopNode(ctx context.Context, name string) error {
	w, n, err := c.existingWorker(name)
	if err != nil {
		return err
	}
	partition := fmt.Sprintf(`table inet %[1]s {
	chain input {
		type filter hook input priority -20; policy accept;
		iifname %[2]q drop
	}
	chain forward {
		type filter hook forward priority -20; policy accept;
		iifname %[2]q drop
		oifname %[2]q drop
	}
	chain output {
		type filter hook output priority -20; policy accept;
		oifname %[2]q drop
	}
}
`, partitionTable(n), w.HostLink)
	if err := nftApply(ctx, c.NetNS, partition); err != nil {
		return fmt.Errorf("cut %s off: %w", name, err)
	}
	// The node's components run in its cgroup too.
	return w.killCgroupProcesses(30 * time.Second)
}

// StartNode starts a node StopNode stopped: its link carries traffic again,
// and its components start as at Up (its containers come back as the
// kubelet restarts its pods). It returns once the node is Ready.
func (c Config) StartNode(ctx context.Context, name string, logf Logf) error {
	w, n, err := c.existingWorker(name)
	if err != nil {
		return err
	}
	if exec.CommandContext(ctx, "ip", "netns", "exec", c.NetNS, "nft", "list", "table", "inet", partitionTable(n)).Run() == nil {
		if err := run(ctx, "ip", "netns", "exec", c.NetNS, "nft", "delete", "table", "inet", partitionTable(n)); err != nil {
			return err
		}
	}
	for _, comp := range append(w.workerComponents(), w.kubeRouter()) {
		if err := w.stop(comp.name, 3*time.Second); err != nil {
			return err
		}
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return w.startWorker(ctx, nil, cs, logf, time.Now())
}
