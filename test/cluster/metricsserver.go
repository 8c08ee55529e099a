package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// MetricsServerComponent is metrics-server, built from the Go module proxy
// (hack/k8s-binaries.sh): it serves metrics.k8s.io (the pods' and nodes' CPU
// and memory, read from every kubelet's /metrics/resource), so that an HPA
// can scale on CPU as on a real cluster. It runs on the first node's
// address, and the API server reaches it through the Service
// kube-system/elasti-metrics-server, whose EndpointSlice points there.
const MetricsServerComponent = "metrics-server"

// MetricsServerPort is where metrics-server listens (TLS) on the first
// node's address.
const MetricsServerPort = 6446

// metricsServerComponent runs metrics-server with the admin kubeconfig for
// the API and the kube-apiserver's kubelet client certificate for the
// kubelets, whose serving certificates it verifies against the cluster CA.
// It scrapes every 10 s, its shortest resolution, which must exceed the
// kubelet request timeout.
func (c Config) metricsServerComponent() component {
	pki := func(f string) string { return filepath.Join(c.pkiDir(), f) }
	return component{name: MetricsServerComponent, bin: c.bin("metrics-server"), args: []string{
		"--bind-address=" + c.NodeIP.String(), fmt.Sprintf("--secure-port=%d", MetricsServerPort),
		"--tls-cert-file=" + pki("metrics-server.crt"), "--tls-private-key-file=" + pki("metrics-server.key"),
		"--kubeconfig=" + c.Kubeconfig(),
		"--authentication-kubeconfig=" + c.Kubeconfig(), "--authorization-kubeconfig=" + c.Kubeconfig(),
		"--kubelet-certificate-authority=" + pki("ca.crt"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
		"--metric-resolution=10s", "--kubelet-request-timeout=5s", "--v=1",
	}}
}

// startMetricsServer starts metrics-server, registers it and waits until the
// API server serves metrics.k8s.io through it. The metrics themselves follow
// with its first scrape, 10 s later.
func (c Config) startMetricsServer(ctx context.Context, logf Logf) error {
	start := time.Now()
	if started, err := c.spawnOptional(c.metricsServerComponent(), "the cluster serves no resource metrics", logf); !started || err != nil {
		return err
	}
	manifest, err := c.aggregatedAPIManifest("elasti-metrics-server", MetricsServerPort, "v1beta1.metrics.k8s.io")
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	path := "/apis/metrics.k8s.io/v1beta1"
	if err := c.waitFor(ctx, MetricsServerComponent, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kubectl(ctx, "", "get", "--raw", path)
		return err
	}); err != nil {
		return err
	}
	logf("resource metrics served (%s)", time.Since(start).Round(time.Millisecond))
	return nil
}
