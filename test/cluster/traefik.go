package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"
)

// TraefikComponent is Traefik, built from the Go module proxy by
// hack/traefik.sh, which the end-to-end tests start on demand
// (elasti-cluster traefik-start) as the cluster's front door: one process on
// the first node serving Kubernetes Ingresses of the class TraefikClass and
// Gateway API routes attached to the Gateway FrontDoorGateway. It reads
// Services and EndpointSlices itself and sends to the endpoints they list,
// as it does in a user's cluster; Down stops it like any component.
const TraefikComponent = "traefik"

// TraefikDirEnv names the directory hack/traefik.sh prints: the binary and
// the Gateway API's standard CRDs.
const TraefikDirEnv = "ELASTI_TRAEFIK_DIR"

const (
	// TraefikClass names both the IngressClass and the GatewayClass
	// traefik-start creates.
	TraefikClass = "traefik"
	// FrontDoorNamespace holds the shared Gateway.
	FrontDoorNamespace = "front-door"
	// FrontDoorGateway is the Gateway every test's route attaches to
	// (parentRefs: {namespace: front-door, name: front-door}); it admits
	// routes from every namespace on its HTTP listener.
	FrontDoorGateway = "front-door"
	// FrontDoorPort is the port of Traefik's one web entry point, on the
	// first node's address: Ingresses and the Gateway's HTTP listener both
	// answer there, told apart by Host.
	FrontDoorPort = 8000
	// traefikAdminPort serves Traefik's ping and Prometheus metrics, on the
	// first node's address (Prometheus scrapes it there).
	traefikAdminPort = 20248
)

// FrontDoorAddr is where clients reach Traefik's web entry point, from the
// host and from pods.
func (c Config) FrontDoorAddr() netip.AddrPort {
	return netip.AddrPortFrom(c.NodeIP, FrontDoorPort)
}

// TraefikMetricsURL is Traefik's Prometheus endpoint.
func (c Config) TraefikMetricsURL() string {
	return "http://" + netip.AddrPortFrom(c.NodeIP, traefikAdminPort).String() + "/metrics"
}

func (c Config) traefikComponent(dir string) component {
	admin := netip.AddrPortFrom(c.NodeIP, traefikAdminPort).String()
	return component{name: TraefikComponent, bin: filepath.Join(dir, "traefik"), env: []string{"KUBECONFIG=" + c.Kubeconfig()}, args: []string{
		// Nothing leaves the machine: no version check, no usage report.
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--entryPoints.web.address=" + c.FrontDoorAddr().String(),
		"--entryPoints.admin.address=" + admin,
		"--ping=true", "--ping.entryPoint=admin",
		"--metrics.prometheus=true", "--metrics.prometheus.entryPoint=admin",
		// A router per Ingress: the counter the HPA's Object metric on an
		// Ingress is computed from (prometheusConfig, metricsAdapterConfig).
		"--metrics.prometheus.addRoutersLabels=true",
		"--providers.kubernetesIngress=true",
		"--providers.kubernetesIngress.ingressClass=" + TraefikClass,
		"--providers.kubernetesIngress.ingressEndpoint.ip=" + c.NodeIP.String(),
		"--providers.kubernetesGateway=true",
		"--providers.kubernetesGateway.statusAddress.ip=" + c.NodeIP.String(),
		"--log.level=INFO", "--log.noColor=true",
	}}
}

// frontDoorManifest is the IngressClass, the GatewayClass and the shared
// Gateway, with the namespace that holds it.
func frontDoorManifest() string {
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: %[1]s}
spec: {controller: traefik.io/ingress-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: %[1]s}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %[3]s, namespace: %[2]s}
spec:
  gatewayClassName: %[1]s
  listeners:
  - name: web
    protocol: HTTP
    port: %[4]d
    allowedRoutes: {namespaces: {from: All}}
`, TraefikClass, FrontDoorNamespace, FrontDoorGateway, FrontDoorPort)
}

// StartTraefik installs the Gateway API's CRDs (from $ELASTI_TRAEFIK_DIR),
// the classes and the shared Gateway, starts Traefik, and waits until it
// answers its ping and has accepted the Gateway. It does nothing more when
// Traefik already runs.
func (c Config) StartTraefik(ctx context.Context, logf Logf) error {
	dir, err := c.installRelease(ctx, TraefikComponent, TraefikDirEnv, "hack/traefik.sh", FrontDoorNamespace)
	if err != nil || dir == "" {
		return err
	}
	if _, err := c.Kubectl(ctx, frontDoorManifest(), "apply", "-f", "-"); err != nil {
		return err
	}
	start := time.Now()
	if err := c.spawn(c.traefikComponent(dir)); err != nil {
		return err
	}
	nodeHTTP := c.nodeHTTPClient()
	ping := "http://" + netip.AddrPortFrom(c.NodeIP, traefikAdminPort).String() + "/ping"
	if err := c.waitFor(ctx, TraefikComponent, 2*time.Minute, httpOK(nodeHTTP, ping)); err != nil {
		return err
	}
	// Routes attach once Traefik has programmed the Gateway's listener.
	if _, err := c.Kubectl(ctx, "", "-n", FrontDoorNamespace, "wait", "--for=condition=Programmed", "--timeout=60s", "gateway/"+FrontDoorGateway); err != nil {
		return err
	}
	logf("traefik runs, the front door at %s (%s, %s)", c.FrontDoorAddr(), time.Since(start).Round(time.Millisecond), dir)
	return nil
}
