package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// PrometheusBin is the Debian package's Prometheus. It is dynamically linked,
// so it runs as a process on the node's network rather than in a pod; pods
// reach it at NodeIP:PrometheusPort.
const PrometheusBin = "/usr/bin/prometheus"

// PrometheusPort is where Prometheus listens on the node's address.
const PrometheusPort = 9090

// PrometheusComponent and PrometheusSDComponent are the optional
// components' names (logs, PID files): Prometheus and its pod discovery.
const (
	PrometheusComponent   = "prometheus"
	PrometheusSDComponent = "prometheus-sd"
)

// HasPrometheus reports whether this machine has the Prometheus binary; Up
// starts it only then.
func (c Config) HasPrometheus() bool { return fileExists(PrometheusBin) }

// PrometheusURL is the Prometheus every pod and the host can reach.
func (c Config) PrometheusURL() string {
	return "http://" + netip.AddrPortFrom(c.NodeIP, PrometheusPort).String()
}

// addons are optional components, in start order: started after the
// cluster's DNS answers when the Prometheus binary exists, stopped by Down
// like the others, and not required for Running (a test may stop one on
// purpose). The pod discovery is this very program (elasti-cluster
// prometheus-sd).
func (c Config) addons() []component {
	if !c.HasPrometheus() {
		return nil
	}
	self, _ := os.Executable()
	comps := []component{{name: PrometheusSDComponent, bin: self, args: []string{
		"prometheus-sd", c.Kubeconfig(), PrometheusSDAddress,
	}}, {name: PrometheusComponent, bin: PrometheusBin, args: []string{
		"--config.file=" + filepath.Join(c.etcDir(), "prometheus.yml"),
		"--storage.tsdb.path=" + c.path("prometheus"),
		"--storage.tsdb.retention.time=2h",
		"--web.listen-address=" + netip.AddrPortFrom(c.NodeIP, PrometheusPort).String(),
		"--log.level=warn",
	}}}
	if c.hasMetricsAdapter() {
		comps = append(comps, c.metricsAdapterComponent())
	}
	return comps
}

// prometheusConfig scrapes the pods annotated prometheus.io/scrape: "true"
// on the port named by prometheus.io/port (and prometheus.io/path), found
// through the API server by the prometheus-sd component (ServePrometheusSD).
// The short intervals let tests see traffic within seconds.
//
// It also scrapes Traefik, the front door (down unless a test started it),
// and labels each Ingress router's series with the Ingress's namespace and
// name, which the adapter's requests_per_second needs (metricsAdapterConfig).
// Traefik names an Ingress's router <namespace>-<name>-<host>-<path> with
// every character other than a letter or digit turned into '-', so where
// the namespace ends cannot be read back in general: the rule takes
// namespaces without '-' or of the tests' form e2e-<6 hex digits>, and
// Ingress names without '-' (docs/hpa.md, set-up 3, says the same).
func (c Config) prometheusConfig() string {
	return fmt.Sprintf(`# Written by elasti-cluster: the local cluster's Prometheus.
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
scrape_configs:
- job_name: pods
  http_sd_configs:
  - url: http://%s/targets
    refresh_interval: 2s
- job_name: traefik
  static_configs:
  - targets: [%s]
  metric_relabel_configs:
  - source_labels: [router]
    regex: '%s'
    target_label: namespace
    replacement: $1
  - source_labels: [router]
    regex: '%s'
    target_label: ingress
    replacement: $2
`, PrometheusSDAddress, netip.AddrPortFrom(c.NodeIP, traefikAdminPort), traefikIngressRouter, traefikIngressRouter)
}

// traefikIngressRouter matches the router Traefik makes for an Ingress, in
// the namespaces and with the names prometheusConfig describes: $1 is the
// namespace, $2 the Ingress.
const traefikIngressRouter = `([a-z0-9]+-[0-9a-f]{6}|[a-z0-9]+)-([a-z0-9]+)(?:-.*)?@kubernetes`

// StartPrometheus writes Prometheus's configuration, starts it in the node's
// namespace and waits until it is ready. It does nothing when it already
// runs or when the machine has no Prometheus.
func (c Config) StartPrometheus(ctx context.Context, logf Logf) error {
	if !c.HasPrometheus() {
		logf("no %s: the cluster runs without Prometheus (hack/install-deps.sh installs it)", PrometheusBin)
		return nil
	}
	if _, ok := c.runningPID(PrometheusComponent); ok {
		// The adapter may have been built since Prometheus started. One
		// that runs is left alone: KEDA may have taken its API group.
		if _, ok := c.runningPID(MetricsAdapterComponent); !ok {
			return c.startMetricsAdapter(ctx, logf)
		}
		return nil
	}
	if err := os.MkdirAll(c.path("prometheus"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.etcDir(), "prometheus.yml"), []byte(c.prometheusConfig()), 0o644); err != nil {
		return err
	}
	comps := c.addons()
	nodeHTTP := c.nodeHTTPClient()
	if _, ok := c.runningPID(PrometheusSDComponent); !ok {
		if err := c.spawn(comps[0]); err != nil {
			return err
		}
		if err := c.waitFor(ctx, PrometheusSDComponent, time.Minute, httpOK(nodeHTTP, "http://"+PrometheusSDAddress+"/targets")); err != nil {
			return err
		}
	}
	if err := c.spawn(comps[1]); err != nil {
		return err
	}
	if err := c.waitFor(ctx, PrometheusComponent, 2*time.Minute, httpOK(nodeHTTP, c.PrometheusURL()+"/-/ready")); err != nil {
		return err
	}
	logf("prometheus ready at %s", c.PrometheusURL())
	return c.startMetricsAdapter(ctx, logf)
}

// StopPrometheus stops the cluster's Prometheus, as an outage would.
func (c Config) StopPrometheus() error {
	return c.stop(PrometheusComponent, 5*time.Second)
}
