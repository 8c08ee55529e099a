package cluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func testConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.StateDir = t.TempDir()
	c.BinDir = "/nonexistent/bin"
	return c
}

func TestConfigsKeepTheClusterContained(t *testing.T) {
	c := testConfig(t)

	containerd := c.containerdConfig()
	for _, want := range []string{
		"restrict_oom_score_adj = true",
		`sandbox_image = "docker.io/elasti/pause:dev"`,
		"SystemdCgroup = false",
		`address = "` + c.ContainerdSocket() + `"`,
	} {
		if !strings.Contains(containerd, want) {
			t.Errorf("containerd config lacks %q", want)
		}
	}
	for _, line := range strings.Split(containerd, "\n") {
		if i := strings.Index(line, `"/`); i >= 0 && !strings.Contains(line, "/usr/lib/cni") && !strings.Contains(line, c.StateDir) {
			t.Errorf("containerd config names a path outside the state dir: %s", strings.TrimSpace(line))
		}
	}

	var cni struct {
		Plugins []struct {
			IsDefaultGateway bool `json:"isDefaultGateway"`
			IPMasq           bool `json:"ipMasq"`
			IPAM             struct {
				Routes []struct {
					Dst string `json:"dst"`
				} `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(c.cniConfig()), &cni); err != nil {
		t.Fatalf("CNI config is not JSON: %v", err)
	}
	for _, p := range cni.Plugins {
		if p.IsDefaultGateway || p.IPMasq {
			t.Errorf("CNI plugin gives pods a default route or masquerades")
		}
		for _, r := range p.IPAM.Routes {
			if _, n, err := net.ParseCIDR(r.Dst); err != nil || n.String() == "0.0.0.0/0" {
				t.Errorf("pod route %q is not a cluster range", r.Dst)
			}
		}
	}

	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(c.kubeletConfig()), &kubelet); err != nil {
		t.Fatalf("kubelet config is not YAML: %v", err)
	}
	for key, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + c.CgroupRoot,
		"resolvConf": filepath.Join(c.StateDir, "etc", "resolv.conf"), "imageGCHighThresholdPercent": float64(100),
	} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}

	var proxy map[string]any
	if err := yaml.Unmarshal([]byte(c.kubeProxyConfig()), &proxy); err != nil {
		t.Fatalf("kube-proxy config is not YAML: %v", err)
	}
	if ct, _ := proxy["conntrack"].(map[string]any); ct["maxPerCore"] != float64(0) {
		t.Errorf("kube-proxy would change the global conntrack table size: %v", proxy["conntrack"])
	}

	if strings.Contains(c.corednsManifest(), "forward") {
		t.Error("CoreDNS must have no upstream forwarder")
	}
}

func TestAPIServerKubeletAddressesAreInternal(t *testing.T) {
	c := testConfig(t)
	args := map[string][]string{}
	for _, comp := range c.components() {
		args[comp.name] = comp.args
	}
	for comp, want := range map[string]string{
		"kube-apiserver": "--kubelet-preferred-address-types=InternalIP",
		"kubelet":        "--node-ip=" + c.NodeIP.String(),
	} {
		if !strings.Contains(strings.Join(args[comp], " "), want) {
			t.Errorf("%s lacks %s", comp, want)
		}
	}
}

func TestPKI(t *testing.T) {
	c := testConfig(t)
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) *x509.Certificate { return readCert(t, c.pkiDir(), name) }
	pool := x509.NewCertPool()
	pool.AddCert(read("ca.crt"))
	api := read("apiserver.crt")
	for _, host := range []string{c.NodeIP.String(), c.APIServiceIP.String(), "kubernetes.default.svc.cluster.local"} {
		if _, err := api.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("apiserver certificate for %s: %v", host, err)
		}
	}
	kubelet := read("kubelet.crt")
	if kubelet.Subject.CommonName != "system:node:"+c.NodeName || kubelet.Subject.Organization[0] != "system:nodes" {
		t.Errorf("kubelet identity %v does not satisfy the Node authorizer", kubelet.Subject)
	}
	// A second run keeps the identities.
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	if !read("apiserver.crt").Equal(api) {
		t.Error("writePKI replaced an existing certificate")
	}
}

// readCert parses the PEM certificate dir/name.
func readCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: not PEM", name)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestOptionalComponentsAreNotRequired: a cluster whose bin directory has
// only etcd and Kubernetes (what `make demo` builds) passes preflight and
// counts as running without kube-router or metrics-server, which start only
// once built; Down still stops them by name.
func TestOptionalComponentsAreNotRequired(t *testing.T) {
	c := testConfig(t)
	optional := map[string]bool{"kube-router": true, "metrics-server": true}
	for _, comp := range c.components() {
		if optional[comp.name] {
			t.Errorf("%s is among the required components", comp.name)
		}
	}
	for _, comp := range c.workerComponents() {
		if optional[comp.name] {
			t.Errorf("%s is among a further node's required components", comp.name)
		}
	}
	var names []string
	for _, comp := range c.optionalComponents() {
		names = append(names, comp.name)
	}
	if got := strings.Join(names, ","); got != "kube-router,metrics-server" {
		t.Errorf("optional components = %s, want kube-router,metrics-server", got)
	}
	if c.kubeRouter().name != "kube-router" {
		t.Errorf("kubeRouter() = %s", c.kubeRouter().name)
	}
	// startOptional on a bin directory without them starts nothing and
	// says why, instead of failing.
	var said []string
	if err := c.startKubeRouter(t.Context(), func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatalf("startKubeRouter without the binary: %v", err)
	}
	if err := c.startMetricsServer(t.Context(), func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatalf("startMetricsServer without the binary: %v", err)
	}
	if len(said) != 2 || !strings.Contains(said[0], "no kube-router") || !strings.Contains(said[1], "no metrics-server") {
		t.Errorf("what the cluster said: %q", said)
	}
}
