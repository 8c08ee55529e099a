package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// component is one long-running process of the cluster.
type component struct {
	name string
	bin  string
	args []string
	env  []string // added to componentEnv
}

// PauseImage and CoreDNSImage are the images the cluster itself needs; Up
// builds and imports them before the kubelet starts.
const (
	PauseImage = "elasti/pause:dev"
)

// CoreDNSImage is CoreDNS packaged for the cluster, tagged with its version.
var CoreDNSImage = "elasti/coredns:" + CoreDNSVersion

// kubeRouterHealthPort is kube-router's health check, on each node's loopback.
const kubeRouterHealthPort = 20244

// dockerHubRef is how containerd names an image that kubelet calls ref.
func dockerHubRef(ref string) string { return "docker.io/" + ref }

// components lists the processes in start order. Down stops them in reverse.
func (c Config) components() []component {
	pki := func(f string) string { return filepath.Join(c.pkiDir(), f) }
	etc := c.etcDir()
	return []component{
		{name: "etcd", bin: c.bin("etcd"), args: []string{
			"--name=elasti", "--data-dir=" + c.path("etcd"),
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=elasti=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
			"--unsafe-no-fsync=true", "--quota-backend-bytes=2147483648", "--log-level=warn",
		}},
		{name: "kube-apiserver", bin: c.bin("kube-apiserver"), args: []string{
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=0.0.0.0", fmt.Sprintf("--secure-port=%d", APIServerPort),
			"--advertise-address=" + c.NodeIP.String(),
			"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
			"--client-ca-file=" + pki("ca.crt"),
			"--tls-cert-file=" + pki("apiserver.crt"), "--tls-private-key-file=" + pki("apiserver.key"),
			"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + pki("ca.crt"),
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki("sa.pub"),
			"--service-account-signing-key-file=" + pki("sa.key"),
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction,ServiceAccount",
			// API aggregation (the Prometheus adapter): the front proxy's
			// client certificate comes from the cluster CA, and only that
			// name may assert a user in request headers.
			"--requestheader-client-ca-file=" + pki("ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + pki("front-proxy-client.crt"), "--proxy-client-key-file=" + pki("front-proxy-client.key"),
			"--enable-aggregator-routing=true",
			"--allow-privileged=true", "--profiling=false", "--v=1",
		}},
		{name: "kube-controller-manager", bin: c.bin("kube-controller-manager"), args: []string{
			"--kubeconfig=" + c.componentKubeconfig("controller-manager"),
			"--authentication-kubeconfig=" + c.componentKubeconfig("controller-manager"),
			"--authorization-kubeconfig=" + c.componentKubeconfig("controller-manager"),
			"--bind-address=127.0.0.1",
			"--controllers=*", "--use-service-account-credentials=true",
			"--service-account-private-key-file=" + pki("sa.key"),
			"--root-ca-file=" + pki("ca.crt"),
			"--cluster-signing-cert-file=" + pki("ca.crt"), "--cluster-signing-key-file=" + pki("ca.key"),
			"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
			"--allocate-node-cidrs=false", "--leader-elect=false", "--profiling=false", "--v=1",
			// Its default client rate, 20 requests a second, needs about
			// 20 minutes to write the ReplicaSets and status of the
			// bench's 9,000 new Deployments; every later app waits
			// behind that backlog (docs/local-cluster.md).
			"--kube-api-qps=100", "--kube-api-burst=200",
		}},
		{name: "kube-scheduler", bin: c.bin("kube-scheduler"), args: []string{
			"--kubeconfig=" + c.componentKubeconfig("scheduler"),
			"--authentication-kubeconfig=" + c.componentKubeconfig("scheduler"),
			"--authorization-kubeconfig=" + c.componentKubeconfig("scheduler"),
			"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1",
		}},
		{name: "containerd", bin: "containerd", args: []string{"--config=" + filepath.Join(etc, "containerd.toml")}},
		{name: "kubelet", bin: c.bin("kubelet"), args: []string{
			"--config=" + filepath.Join(etc, "kubelet.yaml"),
			"--kubeconfig=" + c.componentKubeconfig("kubelet"),
			"--root-dir=" + c.path("kubelet"), "--cert-dir=" + c.path("kubelet", "pki"),
			"--node-ip=" + c.NodeIP.String(), "--hostname-override=" + c.NodeName, "--v=1",
		}},
		{name: "kube-proxy", bin: c.bin("kube-proxy"), args: []string{
			"--config=" + filepath.Join(etc, "kube-proxy.yaml"), "--v=1",
		}},
	}
}

// optionalComponents are the processes only some tests use, in start order:
// kube-router's network policy controller (NetworkPolicy enforcement) and
// metrics-server (metrics.k8s.io, for an HPA on CPU). hack/k8s-binaries.sh
// builds them only when asked (`hack/k8s-binaries.sh addons`, as make
// test-e2e does), so a first `make demo` does not wait for them. Up starts
// each one whose binary is there, on a new cluster and on a running one;
// a cluster without them runs without NetworkPolicy enforcement or resource
// metrics. Down stops them by name either way.
func (c Config) optionalComponents() []component {
	return []component{
		// NetworkPolicy enforcement: kube-router's network policy controller
		// alone (no routing, no service proxy, no CNI), filtering the bridged
		// pod traffic with iptables and ipsets inside the node's namespace.
		// Like most network plugins it admits whatever the node itself sends
		// (kubelet probes, the tests' own clients). It reads the API with the
		// admin certificate: a test cluster, not a model for RBAC.
		{name: "kube-router", bin: c.bin("kube-router"), args: []string{
			"--kubeconfig=" + c.Kubeconfig(), "--hostname-override=" + c.NodeName,
			"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
			"--metrics-port=0", fmt.Sprintf("--health-port=%d", kubeRouterHealthPort), "--iptables-sync-period=1m", "--v=1",
		}},
		c.metricsServerComponent(),
	}
}

// kubeRouter is this node's kube-router component.
func (c Config) kubeRouter() component { return c.optionalComponents()[0] }

// writeConfigs writes containerd's, the CNI's, the kubelet's and
// kube-proxy's configuration under etc/.
func (c Config) writeConfigs() error {
	for _, d := range []string{c.etcDir(), c.cniConfDir(), c.logDir(), c.runDir(), c.containerdDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		filepath.Join(c.etcDir(), "containerd.toml"):        c.containerdConfig(),
		filepath.Join(c.cniConfDir(), "10-elasti.conflist"): c.cniConfig(),
		filepath.Join(c.etcDir(), "kubelet.yaml"):           c.kubeletConfig(),
		filepath.Join(c.etcDir(), "kube-proxy.yaml"):        c.kubeProxyConfig(),
		// Pods with dnsPolicy Default (CoreDNS) get this: a loopback
		// resolver, so no pod ever asks the machine's DNS anything.
		filepath.Join(c.etcDir(), "resolv.conf"): "nameserver 127.0.0.1\n",
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig keeps every path, socket and the runc root under the state
// directory. restrict_oom_score_adj is required here: the sandbox lacks
// CAP_SYS_RESOURCE, so runc may not lower a container's OOM score below its
// own.
func (c Config) containerdConfig() string {
	d := c.containerdDir()
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]q
    max_conf_num = 1
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.ContainerdSocket(), c.ContainerdSocket()+".ttrpc",
		filepath.Join(d, "opt"), dockerHubRef(PauseImage), filepath.Join(d, "runc"), c.cniConfDir())
}

// cniConfig is a bridge with host-local IPAM. Pods get routes to the Service
// range, the nodes' links and the other nodes' pods only: no default route,
// so nothing a pod sends can leave the cluster's addresses.
func (c Config) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "elasti",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}, {"dst": %q}, {"dst": %q}]
      }
    }
  ]
}
`, c.path("cni", "ipam"), c.PodCIDR.String(), c.PodGateway().String(), c.ServiceCIDR.String(), c.NodeRange.String(), c.ClusterPodCIDR.String())
}

// kubeletConfig runs the kubelet with the cgroupfs driver on cgroup v1, its
// pods under CgroupRoot, image garbage collection off (images cannot be
// pulled back) and low eviction thresholds so a full disk elsewhere does not
// evict the tests' pods. Pods' network stats (the network trigger's source)
// come from cAdvisor, through the link linkContainerdSocket makes.
func (c Config) kubeletConfig() string {
	pki := c.pkiDir()
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[2]s/kubelet-serving.crt
tlsPrivateKeyFile: %[2]s/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]s/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[3]s
imageServiceEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: /%[4]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
clusterDomain: cluster.local
clusterDNS: [%[5]s]
resolvConf: %[6]s
podLogsDir: %[7]s
volumePluginDir: %[8]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 100Mi
  nodefs.inodesFree: "1%%"
  imagefs.available: 100Mi
podPidsLimit: -1
maxPods: 110
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
protectKernelDefaults: false
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 20s
`, c.NodeIP, pki, c.ContainerdSocket(), c.CgroupRoot, c.DNSServiceIP, filepath.Join(c.etcDir(), "resolv.conf"),
		c.path("pod-logs"), c.path("kubelet-plugins"))
}

// kubeProxyConfig leaves every conntrack sysctl alone (they are global, or
// read-only outside the initial network namespace).
func (c Config) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [%s/32]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, c.componentKubeconfig("kube-proxy"), c.NodeName, c.ClusterPodCIDR, c.NodeIP)
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
