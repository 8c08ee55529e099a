package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MetricsAdapterComponent is the Prometheus adapter's component name: it
// serves external.metrics.k8s.io from the cluster's Prometheus, so that an
// HPA can scale on an External metric (a real metric pipeline: pod →
// Prometheus → adapter → API aggregation → HPA controller).
const MetricsAdapterComponent = "metrics-adapter"

// MetricsAdapterPort is where the adapter listens (TLS) on the node's
// address; the kube-apiserver reaches it through the Service
// kube-system/elasti-metrics-adapter, whose EndpointSlice points here.
const MetricsAdapterPort = 6445

// ExternalRequestRate is the External metric the adapter serves: the demo
// app's HTTP request rate, per second over one minute, summed over the pods
// matched by the HPA's metric selector (labels namespace and app). It reads 0,
// not nothing, when no pod of that app reports, so that an HPA can compute
// zero replicas; the adapter serves it once Prometheus has any series of
// http_requests_total (a demo app has run in the last few minutes).
const ExternalRequestRate = "http_requests_per_second"

// hasMetricsAdapter reports whether the adapter binary was built
// (hack/k8s-binaries.sh addons); without it the cluster has no external metrics.
func (c Config) hasMetricsAdapter() bool { return fileExists(c.bin("prometheus-adapter")) }

func (c Config) metricsAdapterComponent() component {
	pki := func(f string) string { return filepath.Join(c.pkiDir(), f) }
	return component{name: MetricsAdapterComponent, bin: c.bin("prometheus-adapter"), args: []string{
		"--bind-address=" + c.NodeIP.String(), fmt.Sprintf("--secure-port=%d", MetricsAdapterPort),
		"--tls-cert-file=" + pki("metrics-adapter.crt"), "--tls-private-key-file=" + pki("metrics-adapter.key"),
		"--lister-kubeconfig=" + c.Kubeconfig(),
		"--authentication-kubeconfig=" + c.Kubeconfig(), "--authorization-kubeconfig=" + c.Kubeconfig(),
		"--prometheus-url=" + c.PrometheusURL(),
		"--config=" + filepath.Join(c.etcDir(), "metrics-adapter.yaml"),
		"--metrics-relist-interval=10s", "--v=1",
	}}
}

// IngressRequestRate is the custom metric the adapter serves for an
// Ingress (an HPA's Object metric): the requests per second over one minute
// that the front door, Traefik, routed by that Ingress (prometheusConfig
// labels its routers' series with namespace and ingress).
const IngressRequestRate = "requests_per_second"

// metricsAdapterConfig maps http_requests_total to ExternalRequestRate, and
// Traefik's router counter to IngressRequestRate.
func (c Config) metricsAdapterConfig() string {
	return `# Written by elasti-cluster: the local cluster's Prometheus adapter.
rules:
- seriesQuery: '{__name__="traefik_router_requests_total",namespace!="",ingress!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      ingress: {group: networking.k8s.io, resource: ingress}
  name:
    matches: ^traefik_router_requests_total$
    as: ` + IngressRequestRate + `
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="http_requests_total",namespace!="",app!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  name:
    matches: ^http_requests_total$
    as: ` + ExternalRequestRate + `
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) or vector(0)'
`
}

// metricsAdapterManifest registers the adapter with the API aggregation
// layer: external metrics, and custom metrics in both versions it serves
// (the HPA controller asks for the one discovery prefers).
func (c Config) metricsAdapterManifest() (string, error) {
	return c.aggregatedAPIManifest("elasti-metrics-adapter", MetricsAdapterPort,
		"v1beta1.external.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io")
}

// aggregatedAPIManifest registers a server that listens on the first node's
// address at port as the aggregated APIs named <version>.<group>, through a
// Service kube-system/<name> whose EndpointSlice points there, trusting its
// certificate through the cluster's CA.
func (c Config) aggregatedAPIManifest(name string, port int, apis ...string) (string, error) {
	ca, err := os.ReadFile(filepath.Join(c.pkiDir(), "ca.crt"))
	if err != nil {
		return "", err
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[3]s, namespace: kube-system}
spec:
  ports:
  - {name: https, port: 443, targetPort: %[1]d, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[3]s
  namespace: kube-system
  labels: {kubernetes.io/service-name: %[3]s}
addressType: IPv4
ports:
- {name: https, port: %[1]d, protocol: TCP}
endpoints:
- addresses: [%[2]s]
  conditions: {ready: true}
`, port, c.NodeIP, name)
	for _, api := range apis {
		version, group, _ := strings.Cut(api, ".")
		manifest += fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %[1]s}
spec:
  group: %[2]s
  version: %[3]s
  service: {name: %[4]s, namespace: kube-system, port: 443}
  caBundle: %[5]s
  groupPriorityMinimum: 100
  versionPriority: 100
`, api, group, version, name, base64.StdEncoding.EncodeToString(ca))
	}
	return manifest, nil
}

// startMetricsAdapter starts the adapter, registers it and waits until the
// API server serves external.metrics.k8s.io through it.
func (c Config) startMetricsAdapter(ctx context.Context, logf Logf) error {
	if !c.hasMetricsAdapter() {
		logf("no prometheus-adapter in %s: the cluster runs without external metrics (hack/k8s-binaries.sh addons builds it)", c.BinDir)
		return nil
	}
	if _, ok := c.runningPID(MetricsAdapterComponent); !ok {
		if err := os.WriteFile(filepath.Join(c.etcDir(), "metrics-adapter.yaml"), []byte(c.metricsAdapterConfig()), 0o644); err != nil {
			return err
		}
		if err := c.spawn(c.metricsAdapterComponent()); err != nil {
			return err
		}
	}
	manifest, err := c.metricsAdapterManifest()
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	// The group's discovery: a metric itself is found only once Prometheus
	// has a series of it, that is once a demo app runs.
	path := "/apis/external.metrics.k8s.io/v1beta1"
	if err := c.waitFor(ctx, MetricsAdapterComponent, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kubectl(ctx, "", "get", "--raw", path)
		return err
	}); err != nil {
		return err
	}
	logf("external metrics served at %s (%s)", netip.AddrPortFrom(c.NodeIP, MetricsAdapterPort), ExternalRequestRate)
	return nil
}
