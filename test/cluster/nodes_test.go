package cluster

import (
	"crypto/x509"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkersGetDisjointAddressesInsideTheClusterRanges(t *testing.T) {
	c := testConfig(t)
	links := []netip.Prefix{c.LinkPrefix}
	pods := []netip.Prefix{c.PodCIDR}
	for n := 2; n <= MaxNodes; n++ {
		w := c.worker(n)
		if !c.NodeRange.Contains(w.HostIP) || !c.NodeRange.Contains(w.NodeIP) || !w.LinkPrefix.Contains(w.NodeIP) {
			t.Errorf("node %d: link %s (%s, %s) not inside %s", n, w.LinkPrefix, w.HostIP, w.NodeIP, c.NodeRange)
		}
		if !c.ClusterPodCIDR.Contains(w.PodCIDR.Addr()) || w.PodCIDR.Bits() != c.PodCIDR.Bits() {
			t.Errorf("node %d: pods %s not a /%d inside %s", n, w.PodCIDR, c.PodCIDR.Bits(), c.ClusterPodCIDR)
		}
		for _, l := range links {
			if l.Overlaps(w.LinkPrefix) {
				t.Errorf("node %d: link %s overlaps %s", n, w.LinkPrefix, l)
			}
		}
		for _, p := range pods {
			if p.Overlaps(w.PodCIDR) {
				t.Errorf("node %d: pods %s overlap %s", n, w.PodCIDR, p)
			}
		}
		links, pods = append(links, w.LinkPrefix), append(pods, w.PodCIDR)
		if len(w.HostLink) > 15 || len(w.NodeLink) > 15 {
			t.Errorf("node %d: link names %q, %q longer than IFNAMSIZ-1", n, w.HostLink, w.NodeLink)
		}
		if got, ok := c.workerNumber(w.NodeName); !ok || got != n {
			t.Errorf("workerNumber(%q) = %d, %v", w.NodeName, got, ok)
		}
		if !strings.HasPrefix(w.StateDir, c.StateDir+"/") || !strings.HasPrefix(w.CgroupRoot, c.CgroupRoot+"/") {
			t.Errorf("node %d: state %s or cgroup %s outside the cluster's", n, w.StateDir, w.CgroupRoot)
		}
		if w.APIServerURL() != c.APIServerURL() || w.Kubeconfig() != c.Kubeconfig() {
			t.Errorf("node %d reaches the API at %s with %s, want %s with %s", n, w.APIServerURL(), w.Kubeconfig(), c.APIServerURL(), c.Kubeconfig())
		}
	}
	for _, name := range []string{c.NodeName, c.NodeName + "-1", c.NodeName + "-9", c.NodeName + "-x", "cni-1234"} {
		if n, ok := c.workerNumber(name); ok {
			t.Errorf("workerNumber(%q) = %d, want none", name, n)
		}
	}
}

func TestWorkerPKI(t *testing.T) {
	c := testConfig(t)
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	w := c.worker(2)
	if err := c.writeWorkerPKI(w); err != nil {
		t.Fatal(err)
	}
	read := func(dir, name string) *x509.Certificate { return readCert(t, dir, name) }
	pool := x509.NewCertPool()
	pool.AddCert(read(c.pkiDir(), "ca.crt"))
	kubelet := read(w.pkiDir(), "kubelet.crt")
	if kubelet.Subject.CommonName != "system:node:"+w.NodeName {
		t.Errorf("%s's kubelet is %s, which the Node authorizer would confuse with another node", w.NodeName, kubelet.Subject.CommonName)
	}
	serving := read(w.pkiDir(), "kubelet-serving.crt")
	if _, err := serving.Verify(x509.VerifyOptions{DNSName: w.NodeIP.String(), Roots: pool}); err != nil {
		t.Errorf("%s's kubelet serving certificate for %s: %v", w.NodeName, w.NodeIP, err)
	}
	if fileExists(filepath.Join(w.pkiDir(), "ca.key")) || fileExists(filepath.Join(w.pkiDir(), "admin.key")) {
		t.Error("a further node got the CA's or the admin's key")
	}
}
