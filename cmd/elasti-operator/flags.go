package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/admission"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/scaling"
)

// options is everything the flags and environment set.
type options struct {
	controller              controller.Config
	metricsAddr             string
	probeAddr               string
	activationAddr          string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	resolverServiceAccount  string
	activationAudiences     []string
	prometheusAddress       string
	// triggerServers is built from --trigger-servers and
	// --prometheus-address; the webhook's Limits share it.
	triggerServers     *scaling.ServerPolicy
	triggerTimeout     time.Duration
	networkThreshold   float64
	kubeletCAFile      string
	kubeletInsecureTLS bool
	// kubeAPIQPS and kubeAPIBurst are the client-side rate limit of the
	// operator's requests to the API server.
	kubeAPIQPS   float64
	kubeAPIBurst int
	// webhook.Port 0 turns the validating admission webhook off.
	webhook admission.Config
	// metricsAPIPort 0 turns the external metrics API off.
	metricsAPIPort    int
	metricsAPIService string
	resolverAdminPort int
	podName           string
}

// parseFlags reads the flags; getenv supplies defaults that depend on where
// the pod runs (POD_NAMESPACE).
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, zapOpts *zap.Options) (options, error) {
	o := options{controller: controller.DefaultConfig()}
	ns := getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "elasti-system"
	}
	var watchNamespaces, audiences, triggerServers, apiService string
	var maxHeldCeiling int
	portRange := contract.DefaultPortRange()
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.StringVar(&o.activationAddr, "activation-bind-address", fmt.Sprintf(":%d", contract.DefaultActivationPort), "Address of the activation server. It speaks TLS with the webhook's serving certificate (see --activation-ca-configmap), or plain HTTP with --webhook-port=0.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect one leader among the replicas; only the leader reconciles.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", ns, "Namespace of the leader-election Lease.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "elasti-operator.elasti.dev", "Name of the leader-election Lease.")
	fs.StringVar(&o.controller.ResolverNamespace, "resolver-namespace", ns, "Namespace of the resolver pods.")
	fs.StringVar(&o.resolverServiceAccount, "resolver-service-account", ns+"/elasti-resolver", "namespace/name of the only ServiceAccount allowed to call the activation server.")
	fs.StringVar(&audiences, "activation-audiences", activation.Audience, "Comma-separated token audiences the activation server requires. Empty accepts tokens for the API server's own audience, which a caller could also use against the API server.")
	fs.TextVar(&portRange, "port-range", portRange, "Resolver ports START-END to allocate from; the resolver's --port-range must be the same.")
	fs.DurationVar(&o.controller.PortQuarantine, "port-quarantine", o.controller.PortQuarantine, "How long a freed resolver port stays unused before another ElastiService may get it, so that every kube-proxy and ingress has dropped the old proxy slice; 0 disables.")
	fs.DurationVar(&o.controller.GracePeriod, "grace-period", o.controller.GracePeriod, "Time between writing the proxy slice and scaling to zero.")
	fs.DurationVar(&o.controller.PollingInterval, "polling-interval", o.controller.PollingInterval, "How often an awake target's triggers are evaluated.")
	fs.StringVar(&o.prometheusAddress, "prometheus-address", getenv("ELASTI_PROMETHEUS_ADDRESS"), "Default Prometheus URL for triggers without serverAddress (env ELASTI_PROMETHEUS_ADDRESS).")
	fs.StringVar(&triggerServers, "trigger-servers", strings.Join(scaling.DefaultTriggerServers, ","), "Comma-separated servers prometheus triggers may query: host names, wildcards (*.svc), CIDRs, or * for any. The host of --prometheus-address is always allowed. A serverAddress off the list is refused at admission and reported ServerNotAllowed; loopback and link-local addresses are never dialed for a trigger unless a CIDR here holds them.")
	fs.IntVar(&maxHeldCeiling, "max-held-requests-ceiling", 1000, "Highest spec.proxy.maxHeldRequests the webhook admits, so that one ElastiService cannot take a shared resolver's every slot; 0 leaves the CRD's maximum.")
	fs.DurationVar(&o.webhook.Limits.MaxHoldTimeout, "hold-timeout-ceiling", contract.MaxHoldTimeout, "Longest spec.proxy.holdTimeout the webhook admits; 0 leaves the CRD's maximum (1h).")
	fs.DurationVar(&o.triggerTimeout, "trigger-timeout", 10*time.Second, "Timeout of one trigger query, and of one pod scrape of a podMetrics trigger.")
	fs.Float64Var(&o.networkThreshold, "network-threshold", scaling.DefaultNetworkThreshold, "Threshold of network triggers that name none: bytes per second received beyond the pods' probes over the cooldown period, below which a target is idle.")
	fs.StringVar(&o.kubeletCAFile, "kubelet-ca-file", "", "CA certificate file that kubelets' serving certificates are checked against, for network triggers; empty uses the API server's CA.")
	fs.BoolVar(&o.kubeletInsecureTLS, "kubelet-insecure-skip-tls-verify", false, "Do not check kubelets' serving certificates (for kubelets with self-signed ones). The operator's token is then sent to whoever answers at a node's address.")
	fs.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces to manage; empty manages all.")
	fs.IntVar(&o.controller.MaxConcurrentReconciles, "max-concurrent-reconciles", o.controller.MaxConcurrentReconciles, "Parallel reconciles.")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 200, "Requests per second the operator may send the API server (client-side limit; the API server's priority and fairness applies as well).")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 400, "Requests the operator may send the API server in a burst above --kube-api-qps.")
	fs.IntVar(&o.controller.TriggerWorkers, "trigger-workers", o.controller.TriggerWorkers, "ElastiServices whose triggers are evaluated at once, on workers of their own: a slow metrics backend never holds up a reconcile or a wake.")
	fs.DurationVar(&o.controller.TriggerEvaluationTimeout, "trigger-evaluation-timeout", o.controller.TriggerEvaluationTimeout, "Bound on one evaluation of all of an ElastiService's triggers; a trigger unanswered by then counts as unhealthy.")
	fs.Float64Var(&o.controller.SliceUpdateQPS, "slice-update-qps", o.controller.SliceUpdateQPS, "Requests per second of the client that points every proxy EndpointSlice at the ready resolvers when they change (one update per sleeping Service), beside --kube-api-qps.")
	fs.IntVar(&o.controller.WakeWorkers, "wake-workers", o.controller.WakeWorkers, "Wakes of different ElastiServices performed at once, each at once on the activation call, not behind other ElastiServices' reconciles in the work queue.")
	fs.DurationVar(&o.controller.WakeTimeout, "wake-timeout", o.controller.WakeTimeout, "How long an activation call waits for the wake before answering 503.")
	o.webhook.Namespace = ns
	o.podName = getenv("POD_NAME")
	fs.IntVar(&o.webhook.Port, "webhook-port", 9443, "Port of the validating admission webhook for ElastiServices; 0 turns the webhook and its readiness check off, and with them the certificate: the activation server then speaks plain HTTP, and the resolver's --operator-url must be http://.")
	fs.StringVar(&o.webhook.CertDir, "webhook-cert-dir", "/var/run/elasti/webhook", "Writable directory the operator copies the webhook's serving certificate into.")
	fs.StringVar(&o.webhook.SecretName, "webhook-secret", "elasti-webhook-cert", "Secret in the operator's namespace that keeps the webhook's CA and serving certificate; the install creates it empty.")
	fs.StringVar(&o.webhook.ServiceName, "webhook-service", "elasti-operator", "Service in the operator's namespace that the API server calls the webhook through.")
	fs.StringVar(&o.webhook.CAConfigMapName, "activation-ca-configmap", "elasti-activation-ca", "ConfigMap in the operator's namespace the operator keeps holding the webhook's CA certificate (key ca.crt, no private key), which the resolvers verify the TLS activation server with; empty does not publish it. Unused with --webhook-port=0.")
	fs.StringVar(&o.webhook.ConfigurationName, "webhook-configuration", "elasti-webhook", "ValidatingWebhookConfiguration whose caBundle the operator keeps.")
	fs.IntVar(&o.metricsAPIPort, "metrics-api-port", 0, "HTTPS port of the external metrics API (external.metrics.k8s.io: elasti_requests_held, elasti_requests_per_second, elasti_awake per ElastiService, for HPAs); 0 turns it off. It serves with the webhook's certificate, and only the elected leader is the endpoint of --metrics-api-service (the pod label elasti.dev/metrics-api).")
	fs.StringVar(&o.metricsAPIService, "metrics-api-service", "elasti-metrics-api", "Service in the operator's namespace that the API server's aggregation layer calls the metrics API through; the certificate is valid for its names.")
	fs.StringVar(&apiService, "metrics-api-apiservice", "v1beta1.external.metrics.k8s.io", "APIService whose caBundle the operator keeps while the metrics API is on.")
	fs.IntVar(&o.resolverAdminPort, "resolver-admin-port", 8012, "Port of the resolvers' /metrics (their --admin-bind-address), which the metrics API reads held and forwarded requests from.")
	fs.BoolVar(&o.webhook.ReviewAccess, "admission-access-review", true, "Refuse an ElastiService (create, or spec update) whose author may not do what it makes the operator do: update the target's /scale, patch the autoscaler, get the trigger Secrets, update the Service for a waking page, static responses or a fallback; asked of the API server with a SubjectAccessReview in the author's name. Turn off only where every ElastiService author is trusted with the operator's rights.")
	if zapOpts != nil {
		zapOpts.BindFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.controller.PortRangeStart, o.controller.PortRangeEnd = portRange.Start, portRange.End
	o.controller.QuarantineRecord = types.NamespacedName{Namespace: ns, Name: ports.QuarantineRecordName}
	o.controller.WatchNamespaces = splitList(watchNamespaces)
	o.activationAudiences = splitList(audiences)
	servers, err := scaling.NewServerPolicy(splitList(triggerServers), o.prometheusAddress)
	if err != nil {
		return o, err
	}
	o.triggerServers, o.webhook.Limits.TriggerServers = servers, servers
	if maxHeldCeiling < 0 || maxHeldCeiling > 1_000_000 {
		return o, fmt.Errorf("--max-held-requests-ceiling %d must be between 0 and 1000000", maxHeldCeiling)
	}
	o.webhook.Limits.MaxHeldRequests = int32(maxHeldCeiling)
	if o.webhook.Port != 0 {
		if err := o.webhook.Validate(); err != nil {
			return o, fmt.Errorf("--webhook-*: %w", err)
		}
	}
	if o.metricsAPIPort != 0 {
		switch {
		case o.metricsAPIPort < 1 || o.metricsAPIPort > 65535:
			return o, fmt.Errorf("--metrics-api-port %d: want 1-65535, or 0 for off", o.metricsAPIPort)
		case o.webhook.Port == 0:
			return o, errors.New("--metrics-api-port needs the webhook's certificate: it cannot run with --webhook-port=0")
		case o.metricsAPIService == "" || apiService == "":
			return o, errors.New("--metrics-api-port needs --metrics-api-service and --metrics-api-apiservice")
		case o.podName == "":
			return o, errors.New("--metrics-api-port needs the environment variable POD_NAME (the downward API's metadata.name): the leader labels its own pod")
		}
		o.webhook.APIService, o.webhook.APIServiceService = apiService, o.metricsAPIService
		o.controller.MeasureRate = true
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 {
		return o, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", o.kubeAPIQPS, o.kubeAPIBurst)
	}
	if _, _, ok := strings.Cut(o.resolverServiceAccount, "/"); !ok {
		return o, fmt.Errorf("--resolver-service-account %q must be namespace/name", o.resolverServiceAccount)
	}
	return o, o.controller.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
