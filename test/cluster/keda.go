package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// KEDA's operator and metrics apiserver, built from the Go module proxy by
// hack/keda.sh, which the multi-node end-to-end tests start on demand
// (elasti-cluster keda-start) to run a real ScaledObject beside Elasti.
// Both run on the first node, cluster-wide, with the admin kubeconfig; Down
// stops them like any component. keda-start hands external.metrics.k8s.io
// to KEDA's metrics apiserver: from then on the Prometheus adapter's
// http_requests_per_second is no longer served. KEDA's admission webhooks
// are not run.
const (
	KEDAComponent        = "keda-operator"
	KEDAAdapterComponent = "keda-metrics-apiserver"
)

// KEDADirEnv names the directory hack/keda.sh prints: the binaries and the
// release's CRDs.
const KEDADirEnv = "ELASTI_KEDA_DIR"

// kedaNamespace is KEDA's own namespace (the Secrets its
// TriggerAuthentications may read).
const kedaNamespace = "keda"

// KEDA's ports: on the first node's loopback the operator's health probes,
// Prometheus metrics and gRPC metrics service (which the metrics apiserver
// calls) and the metrics apiserver's own Prometheus metrics; on the first
// node's address the metrics apiserver (TLS), which the kube-apiserver
// reaches through the Service kube-system/keda-metrics-apiserver.
const (
	kedaHealthPort         = 20251
	kedaMetricsPort        = 20252
	kedaGRPCPort           = 20253
	kedaAdapterMetricsPort = 20254
	KEDAAdapterPort        = 6447
)

// kedaCertDir holds the key pair both use for their gRPC connection, as KEDA
// reads it (ca.crt, tls.crt, tls.key), issued by the cluster CA.
func (c Config) kedaCertDir() string { return filepath.Join(c.StateDir, "keda-certs") }

func (c Config) kedaEnv() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig(), "WATCH_NAMESPACE=", "POD_NAMESPACE=" + kedaNamespace, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNamespace}
}

func (c Config) kedaComponent(dir string) component {
	return component{name: KEDAComponent, bin: filepath.Join(dir, "keda-operator"), env: c.kedaEnv(), args: []string{
		"--leader-elect=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", kedaHealthPort),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", kedaMetricsPort),
		fmt.Sprintf("--metrics-service-bind-address=127.0.0.1:%d", kedaGRPCPort),
		"--cert-dir=" + c.kedaCertDir(), "--ca-dir=" + c.kedaCertDir(),
		"--zap-log-level=info", "--zap-encoder=console",
	}}
}

func (c Config) kedaAdapterComponent(dir string) component {
	return component{name: KEDAAdapterComponent, bin: filepath.Join(dir, "keda-adapter"), env: c.kedaEnv(), args: []string{
		"--bind-address=" + c.NodeIP.String(), fmt.Sprintf("--secure-port=%d", KEDAAdapterPort),
		"--tls-cert-file=" + filepath.Join(c.kedaCertDir(), "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(c.kedaCertDir(), "tls.key"),
		"--cert-dir=" + c.kedaCertDir(),
		"--lister-kubeconfig=" + c.Kubeconfig(),
		"--authentication-kubeconfig=" + c.Kubeconfig(), "--authorization-kubeconfig=" + c.Kubeconfig(),
		fmt.Sprintf("--metrics-service-address=127.0.0.1:%d", kedaGRPCPort),
		fmt.Sprintf("--port=%d", kedaAdapterMetricsPort),
		"--zap-log-level=info", "--zap-encoder=console",
	}}
}

// StartKEDA installs KEDA's CRDs, starts its operator and metrics apiserver
// (all from $ELASTI_KEDA_DIR), registers the metrics apiserver as
// external.metrics.k8s.io and waits until both answer. It does nothing more
// when the operator already runs.
func (c Config) StartKEDA(ctx context.Context, logf Logf) error {
	dir, err := c.installRelease(ctx, KEDAComponent, KEDADirEnv, "hack/keda.sh", kedaNamespace)
	if err != nil || dir == "" {
		return err
	}
	if err := os.MkdirAll(c.kedaCertDir(), 0o700); err != nil {
		return err
	}
	for src, dst := range map[string]string{"ca.crt": "ca.crt", "keda.crt": "tls.crt", "keda.key": "tls.key"} {
		data, err := os.ReadFile(filepath.Join(c.pkiDir(), src))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.kedaCertDir(), dst), data, 0o600); err != nil {
			return err
		}
	}
	if err := c.spawn(c.kedaComponent(dir)); err != nil {
		return err
	}
	if err := c.spawn(c.kedaAdapterComponent(dir)); err != nil {
		return err
	}
	nodeHTTP := c.nodeHTTPClient()
	if err := c.waitFor(ctx, KEDAComponent, 2*time.Minute, httpOK(nodeHTTP, fmt.Sprintf("http://127.0.0.1:%d/readyz", kedaHealthPort))); err != nil {
		return err
	}
	manifest, err := c.aggregatedAPIManifest(KEDAAdapterComponent, KEDAAdapterPort, "v1beta1.external.metrics.k8s.io")
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	// Available once the kube-apiserver reaches the new server.
	if err := c.waitFor(ctx, KEDAAdapterComponent, 2*time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "", "get", "apiservice", "v1beta1.external.metrics.k8s.io",
			"-o", `jsonpath={.spec.service.name} {.status.conditions[?(@.type=="Available")].status}`)
		if err == nil && out != KEDAAdapterComponent+" True" {
			err = fmt.Errorf("APIService v1beta1.external.metrics.k8s.io: %q", out)
		}
		return err
	}); err != nil {
		return err
	}
	logf("KEDA runs (%s); external.metrics.k8s.io is now KEDA's metrics apiserver at %s:%d", dir, c.NodeIP, KEDAAdapterPort)
	return nil
}
