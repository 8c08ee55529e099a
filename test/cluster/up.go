package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Logf receives progress lines.
type Logf func(format string, args ...any)

// requiredCommands are the machine's tools the cluster runs
// (hack/install-deps.sh installs them).
var requiredCommands = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip", "nft", "iptables", "conntrack", "ipset"}

// lock serializes Up and Down across processes.
func (c Config) lock() (func(), error) {
	f, err := os.OpenFile(c.StateDir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Running reports whether every component's recorded process is alive.
func (c Config) Running() bool {
	for _, comp := range c.components() {
		if _, ok := c.runningPID(comp.name); !ok {
			return false
		}
	}
	return c.workersRunning() && fileExists(c.Kubeconfig())
}

// hasLeftovers reports whether anything of an earlier cluster remains.
func (c Config) hasLeftovers() bool {
	if fileExists(c.StateDir) || fileExists(c.NetNSPath()) || len(c.existingWorkers()) > 0 || len(c.cgroupDirs()) > 0 {
		return true
	}
	return exec.Command("nft", "list", "table", "inet", c.GuardTable).Run() == nil
}

func (c Config) preflight() error {
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return fmt.Errorf("%d nodes: the local cluster runs 1 to %d", c.Nodes, MaxNodes)
	}
	if os.Geteuid() != 0 {
		return errors.New("the local cluster needs root (network namespaces, cgroups, mounts)")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		if !fileExists(c.bin(b)) {
			return fmt.Errorf("%s missing in %s: run hack/k8s-binaries.sh", b, c.BinDir)
		}
	}
	for _, cmd := range requiredCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s not found: run hack/install-deps.sh", cmd)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if !fileExists(filepath.Join("/usr/lib/cni", p)) {
			return fmt.Errorf("CNI plugin %s missing in /usr/lib/cni: run hack/install-deps.sh", p)
		}
	}
	return nil
}

// Up brings the cluster up and waits until the node is Ready and the
// cluster's DNS answers. On a running cluster it does nothing. Leftovers of a
// cluster that did not come up, or was not taken down, are removed first.
func (c Config) Up(ctx context.Context, logf Logf) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if c.Running() {
		logf("cluster already running")
		if err := c.addNodes(ctx, logf); err != nil {
			return err
		}
		// Optional components built since the cluster came up (make demo's
		// cluster, reused by make test-e2e) start now.
		if err := c.startOptional(ctx, logf); err != nil {
			return err
		}
		return c.StartPrometheus(ctx, logf)
	}
	if err := c.preflight(); err != nil {
		return err
	}
	if c.hasLeftovers() {
		logf("removing leftovers of an earlier cluster")
		if err := c.down(ctx, logf); err != nil {
			return fmt.Errorf("remove leftovers: %w", err)
		}
	}
	start := time.Now()
	sysImages, err := c.systemImageTarballs(ctx, logf)
	if err != nil {
		return err
	}
	logf("images built (%s)", time.Since(start).Round(time.Millisecond))

	if err := c.recordBaseline(); err != nil {
		return fmt.Errorf("record machine state: %w", err)
	}
	if err := c.setupNetwork(ctx); err != nil {
		return fmt.Errorf("set up network: %w", err)
	}
	if err := c.createCgroups(); err != nil {
		return err
	}
	if err := c.writePKI(); err != nil {
		return fmt.Errorf("write PKI: %w", err)
	}
	if err := c.writeKubeconfigs(); err != nil {
		return fmt.Errorf("write kubeconfigs: %w", err)
	}
	if err := c.writeConfigs(); err != nil {
		return fmt.Errorf("write configs: %w", err)
	}
	comps := map[string]component{}
	for _, comp := range c.components() {
		comps[comp.name] = comp
	}
	startAndWait := func(name string, ready func(context.Context) error) error {
		if err := c.spawn(comps[name]); err != nil {
			return err
		}
		if ready == nil {
			return nil
		}
		if err := c.waitFor(ctx, name, 2*time.Minute, ready); err != nil {
			return err
		}
		logf("%s ready (%s)", name, time.Since(start).Round(time.Millisecond))
		return nil
	}
	nodeHTTP := c.nodeHTTPClient()
	if err := startAndWait("etcd", httpOK(nodeHTTP, "http://127.0.0.1:2379/health")); err != nil {
		return err
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	apiReady := func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
	if err := startAndWait("kube-apiserver", apiReady); err != nil {
		return err
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if err := startAndWait(name, nil); err != nil {
			return err
		}
	}
	if err := startAndWait("containerd", c.containerdReady); err != nil {
		return err
	}
	c.linkContainerdSocket(logf)
	for _, p := range sysImages {
		if err := c.importImage(ctx, p); err != nil {
			return err
		}
	}
	if err := startAndWait("kubelet", nil); err != nil {
		return err
	}
	if err := startAndWait("kube-proxy", nil); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kubelet", 3*time.Minute, c.nodeReady(cs)); err != nil {
		return err
	}
	logf("node %s Ready (%s)", c.NodeName, time.Since(start).Round(time.Millisecond))
	// kube-router looks its node up when it starts.
	if err := c.startKubeRouter(ctx, logf); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, c.corednsManifest(), "apply", "-f", "-"); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "coredns", 3*time.Minute, c.dnsAnswers); err != nil {
		return err
	}
	logf("cluster DNS answers (%s)", time.Since(start).Round(time.Millisecond))
	// Further nodes come after the first node's system pods are placed,
	// so those stay on the node that is never stopped.
	for n := 2; n <= c.Nodes; n++ {
		if err := c.upWorker(ctx, c.worker(n), sysImages, cs, logf, start); err != nil {
			return err
		}
	}
	if err := c.startMetricsServer(ctx, logf); err != nil {
		return err
	}
	if err := c.StartPrometheus(ctx, logf); err != nil {
		return err
	}
	logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// systemImageTarballs builds the images the cluster itself needs (pause,
// CoreDNS) and returns their tarballs, for every node's containerd.
func (c Config) systemImageTarballs(ctx context.Context, logf Logf) ([]string, error) {
	corednsBin, err := EnsureCoreDNS(ctx, c.CacheDir, c.RepoRoot, logf)
	if err != nil {
		return nil, err
	}
	var tarballs []string
	for _, im := range c.systemImages(corednsBin) {
		p, err := c.BuildImage(ctx, im)
		if err != nil {
			return nil, err
		}
		tarballs = append(tarballs, p)
	}
	return tarballs, nil
}

// addNodes brings up the further nodes a running cluster lacks, so that
// `up --nodes 2` (and a session that needs two nodes, as make
// test-multinode) grows the single-node cluster `make demo` left running.
// A running cluster never loses nodes here.
func (c Config) addNodes(ctx context.Context, logf Logf) error {
	have := len(c.NodeNames())
	if c.Nodes <= have {
		return nil
	}
	start := time.Now()
	sysImages, err := c.systemImageTarballs(ctx, logf)
	if err != nil {
		return err
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	for n := have + 1; n <= c.Nodes; n++ {
		if err := c.upWorker(ctx, c.worker(n), sysImages, cs, logf, start); err != nil {
			return err
		}
	}
	logf("cluster grown from %d to %d nodes in %s", have, c.Nodes, time.Since(start).Round(time.Millisecond))
	return nil
}

// containerdReady answers once this node's containerd serves its socket.
func (c Config) containerdReady(ctx context.Context) error {
	return exec.CommandContext(ctx, "ctr", "--address", c.ContainerdSocket(), "version").Run()
}

// kubeRouterReady answers once this node's network policy controller
// answers its health check.
func (c Config) kubeRouterReady(ctx context.Context) error {
	return httpOK(c.nodeHTTPClient(), fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeRouterHealthPort))(ctx)
}

// Clientset returns a client for the admin kubeconfig.
func (c Config) Clientset() (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

// nodeHTTPClient makes its requests from inside the node's namespace, to the
// node's own loopback services, with a short timeout for readiness checks.
func (c Config) nodeHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: c.NodeDialer().DialContext}, Timeout: 5 * time.Second}
}

func httpOK(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func (c Config) nodeReady(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not Ready: %s", c.NodeName, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", c.NodeName)
	}
}

// dnsAnswers asks the cluster's DNS, from inside the node, for the kubernetes
// Service and expects its ClusterIP.
func (c Config) dnsAnswers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := c.NodeDialer().Resolver().LookupHost(ctx, "kubernetes.default.svc.cluster.local.")
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a == c.APIServiceIP.String() {
			return nil
		}
	}
	return fmt.Errorf("kubernetes.default resolved to %v, want %s", addrs, c.APIServiceIP)
}

// waitFor polls ready until it succeeds, component name dies, or timeout
// passes. The error carries the end of the component's log.
func (c Config) waitFor(ctx context.Context, name string, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		if fileExists(c.pidFile(name)) {
			if _, ok := c.runningPID(name); !ok {
				return fmt.Errorf("%s exited: %w\n%s", name, last, c.logTail(name, 30))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w\n%s", name, timeout, last, c.logTail(name, 30))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTail returns the last n lines of component name's log.
func (c Config) logTail(name string, n int) string {
	data, err := os.ReadFile(c.LogFile(name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- " + c.LogFile(name) + " (last lines)\n" + strings.Join(lines, "\n")
}

// cadvisorContainerdSocket is where the kubelet's built-in cAdvisor looks
// for containerd (cAdvisor's own --containerd flag, which the kubelet does
// not expose).
const cadvisorContainerdSocket = "/run/containerd/containerd.sock"

// linkContainerdSocket points cadvisorContainerdSocket at this cluster's
// containerd, before the kubelet starts, as a node whose containerd
// listens at its usual path has it. Without it cAdvisor cannot read pods'
// network, and the Summary API has none. The kubelet could take the stats
// from containerd over CRI instead (the PodAndContainerStatsFromCRI
// feature gate), but Debian 12's containerd 1.6.20 then dies of a
// concurrent map write in ListPodSandboxStats under concurrent requests.
// Down removes the link with the others pointing into the state directory
// (restoreBaseline). A socket already there (a containerd of the
// machine's own) is left alone, and said.
func (c Config) linkContainerdSocket(logf Logf) {
	if target, err := os.Readlink(cadvisorContainerdSocket); err == nil && target == c.ContainerdSocket() {
		return
	}
	if _, err := os.Lstat(cadvisorContainerdSocket); err == nil {
		logf("%s belongs to another containerd: the kubelet's Summary API will have no pod network stats (network triggers report NetworkStatsUnavailable)", cadvisorContainerdSocket)
		return
	}
	err := os.MkdirAll(filepath.Dir(cadvisorContainerdSocket), 0o700)
	if err == nil {
		err = os.Symlink(c.ContainerdSocket(), cadvisorContainerdSocket)
	}
	if err != nil {
		logf("link %s: %v: the kubelet's Summary API will have no pod network stats", cadvisorContainerdSocket, err)
	}
}
