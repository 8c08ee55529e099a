package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// KEDAComponent is KEDA's operator, built from the Go module proxy by
// hack/keda.sh, which the multi-node end-to-end tests start on demand
// (elasti-cluster keda-start) to run a real ScaledObject beside Elasti. It
// runs on the first node, cluster-wide, with the admin kubeconfig; Down
// stops it like any component. KEDA's metrics apiserver is not run: the
// cluster's external.metrics.k8s.io belongs to the Prometheus adapter, so
// only triggers that KEDA hands to the HPA as Resource metrics (cpu,
// memory, served by metrics-server) scale anything here.
const KEDAComponent = "keda-operator"

// KEDADirEnv names the directory hack/keda.sh prints: the operator binary
// and the release's CRDs.
const KEDADirEnv = "ELASTI_KEDA_DIR"

// kedaNamespace is the operator's own namespace (leader election, the
// Secrets its TriggerAuthentications may read).
const kedaNamespace = "keda"

// The operator's ports, on the first node's loopback: health probes,
// Prometheus metrics and the gRPC metrics service its metrics apiserver
// would call.
const (
	kedaHealthPort  = 20251
	kedaMetricsPort = 20252
	kedaGRPCPort    = 20253
)

// kedaCertDir holds the key pair of the operator's gRPC server, as KEDA
// reads it (ca.crt, tls.crt, tls.key), issued by the cluster CA.
func (c Config) kedaCertDir() string { return filepath.Join(c.StateDir, "keda-certs") }

func (c Config) kedaComponent(dir string) component {
	return component{name: KEDAComponent, bin: filepath.Join(dir, "keda-operator"),
		args: []string{
			"--leader-elect=false",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", kedaHealthPort),
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", kedaMetricsPort),
			fmt.Sprintf("--metrics-service-bind-address=127.0.0.1:%d", kedaGRPCPort),
			"--cert-dir=" + c.kedaCertDir(), "--ca-dir=" + c.kedaCertDir(),
			"--zap-log-level=info", "--zap-encoder=console",
		},
		env: []string{"KUBECONFIG=" + c.Kubeconfig(), "WATCH_NAMESPACE=", "POD_NAMESPACE=" + kedaNamespace, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNamespace},
	}
}

// StartKEDA installs KEDA's CRDs and starts its operator (both from
// $ELASTI_KEDA_DIR), and waits until it answers its readiness check. It
// does nothing more when the operator already runs.
func (c Config) StartKEDA(ctx context.Context, logf Logf) error {
	dir := os.Getenv(KEDADirEnv)
	if dir == "" {
		return errors.New(KEDADirEnv + " is not set: run hack/keda.sh and set it to the directory it prints")
	}
	if _, ok := c.runningPID(KEDAComponent); ok {
		return nil
	}
	if _, err := c.Kubectl(ctx, "", "apply", "--server-side", "-f", filepath.Join(dir, "crds")); err != nil {
		return err
	}
	ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", kedaNamespace)
	if _, err := c.Kubectl(ctx, ns, "apply", "-f", "-"); err != nil {
		return err
	}
	if err := os.MkdirAll(c.kedaCertDir(), 0o700); err != nil {
		return err
	}
	for src, dst := range map[string]string{"ca.crt": "ca.crt", "keda-operator.crt": "tls.crt", "keda-operator.key": "tls.key"} {
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
	nodeHTTP := c.nodeHTTPClient()
	if err := c.waitFor(ctx, KEDAComponent, 2*time.Minute, httpOK(nodeHTTP, fmt.Sprintf("http://127.0.0.1:%d/readyz", kedaHealthPort))); err != nil {
		return err
	}
	logf("KEDA's operator runs (%s)", dir)
	return nil
}
