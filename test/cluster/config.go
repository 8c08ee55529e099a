package cluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
)

// Config says where the cluster lives and which addresses it uses. Every
// address is private to the node's network namespace or to the veth pair that
// links it to the host; Preflight refuses to start when any of them overlaps an
// address or route the machine already has.
type Config struct {
	// StateDir holds every file the cluster writes: PKI, configs, data,
	// logs, PID files, the admin kubeconfig.
	StateDir string
	// BinDir holds etcd and the Kubernetes binaries (hack/k8s-binaries.sh).
	BinDir string
	// CacheDir holds builds reused across clusters (CoreDNS, images).
	CacheDir string
	// RepoRoot is the module root, for building the project's images.
	RepoRoot string

	// NetNS is the network namespace the whole node runs in.
	NetNS string
	// HostLink and NodeLink are the two ends of the veth pair between the
	// host and the node's namespace.
	HostLink, NodeLink string
	// HostIP and NodeIP are the addresses on HostLink and NodeLink, inside
	// LinkPrefix.
	HostIP, NodeIP netip.Addr
	LinkPrefix     netip.Prefix
	// PodCIDR is the pods' subnet on the node's CNI bridge.
	PodCIDR netip.Prefix
	// ClusterPodCIDR holds every node's PodCIDR: the first node's, then one
	// /24 per further node.
	ClusterPodCIDR netip.Prefix
	// NodeRange holds every node-to-node and host-to-node link: the host's
	// LinkPrefix first, then one /30 per further node.
	NodeRange netip.Prefix
	// Nodes is how many nodes Up brings up (ELASTI_CLUSTER_NODES, default
	// 1). The first runs the control plane and is linked to the host; each
	// further one is linked to the first (see nodes.go). A running cluster's
	// nodes are read from its state directory, whatever Nodes says.
	Nodes int
	// ServiceCIDR is the ClusterIP range; APIServiceIP and DNSServiceIP are
	// the kubernetes and kube-dns Services' ClusterIPs.
	ServiceCIDR                netip.Prefix
	APIServiceIP, DNSServiceIP netip.Addr
	// NodeName is the Node object's name.
	NodeName string
	// CgroupRoot is the cgroup (in every hierarchy) that holds the components
	// and, below it, the kubelet's pods.
	CgroupRoot string
	// GuardTable is the host nftables table that stops the host from
	// forwarding anything to or from the cluster.
	GuardTable string

	// Set on a further node's Config only (worker): where it reaches the
	// kube-apiserver, and the admin kubeconfig its kube-router reads.
	apiServerIP     netip.Addr
	adminKubeconfig string
}

// MaxNodes bounds Nodes: each node costs a containerd, a kubelet, a
// kube-proxy and a kube-router.
const MaxNodes = 8

// DefaultStateDir is where the cluster lives unless ELASTI_CLUSTER_DIR says
// otherwise.
const DefaultStateDir = "/tmp/elasti-cluster"

// DefaultConfig returns the documented layout. ELASTI_CLUSTER_DIR moves the
// state directory; ELASTI_CACHE moves the build cache.
func DefaultConfig() Config {
	state := os.Getenv("ELASTI_CLUSTER_DIR")
	if state == "" {
		state = DefaultStateDir
	}
	cache := os.Getenv("ELASTI_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "elasti")
	}
	return Config{
		StateDir:       state,
		CacheDir:       cache,
		NetNS:          "elasti-node",
		HostLink:       "elasti-host",
		NodeLink:       "elasti-node",
		LinkPrefix:     netip.MustParsePrefix("10.250.0.0/30"),
		HostIP:         netip.MustParseAddr("10.250.0.1"),
		NodeIP:         netip.MustParseAddr("10.250.0.2"),
		PodCIDR:        netip.MustParsePrefix("10.244.0.0/24"),
		ClusterPodCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		NodeRange:      netip.MustParsePrefix("10.250.0.0/24"),
		Nodes:          nodesFromEnv(),
		ServiceCIDR:    netip.MustParsePrefix("10.96.0.0/16"),
		APIServiceIP:   netip.MustParseAddr("10.96.0.1"),
		DNSServiceIP:   netip.MustParseAddr("10.96.0.10"),
		NodeName:       "elasti-node",
		CgroupRoot:     "elasti-cluster",
		GuardTable:     "elasti_guard",
	}
}

// NodesEnv sets Config.Nodes for Up.
const NodesEnv = "ELASTI_CLUSTER_NODES"

func nodesFromEnv() int {
	n, err := strconv.Atoi(os.Getenv(NodesEnv))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// APIServerPort is the kube-apiserver's secure port on NodeIP.
const APIServerPort = 6443

// Kubeconfig is the admin kubeconfig's path.
func (c Config) Kubeconfig() string {
	if c.adminKubeconfig != "" {
		return c.adminKubeconfig
	}
	return filepath.Join(c.StateDir, "kubeconfig")
}

// APIServerURL is how the host reaches the kube-apiserver.
func (c Config) APIServerURL() string {
	ip := c.NodeIP
	if c.apiServerIP.IsValid() {
		ip = c.apiServerIP
	}
	return fmt.Sprintf("https://%s", netip.AddrPortFrom(ip, APIServerPort))
}

// NetNSPath is the namespace's bind mount, for setns(2) and nsenter.
func (c Config) NetNSPath() string { return filepath.Join("/run/netns", c.NetNS) }

// PodGateway is the CNI bridge's address: the first address in PodCIDR.
func (c Config) PodGateway() netip.Addr { return c.PodCIDR.Addr().Next() }

func (c Config) path(parts ...string) string {
	return filepath.Join(append([]string{c.StateDir}, parts...)...)
}

func (c Config) pkiDir() string        { return c.path("pki") }
func (c Config) etcDir() string        { return c.path("etc") }
func (c Config) logDir() string        { return c.path("logs") }
func (c Config) runDir() string        { return c.path("run") }
func (c Config) cniConfDir() string    { return c.path("etc", "cni") }
func (c Config) containerdDir() string { return c.path("containerd") }

// ContainerdSocket is the cluster's containerd socket (not the system's).
func (c Config) ContainerdSocket() string { return c.path("containerd", "containerd.sock") }

// LogFile is where component name writes its output.
func (c Config) LogFile(name string) string { return filepath.Join(c.logDir(), name+".log") }

func (c Config) bin(name string) string { return filepath.Join(c.BinDir, name) }
