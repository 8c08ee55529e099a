package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Path is where the ElastiService validator is served: the clientConfig
// path of config/webhook and of the chart's webhook configuration.
const Path = "/validate-elastiservice"

// Config says where the webhook is served and which objects hold and
// advertise its certificate.
type Config struct {
	// Port the webhook server listens on, on every address.
	Port int
	// CertDir is a writable directory for the serving pair (tls.crt,
	// tls.key); nothing else should write there.
	CertDir string
	// Namespace of the operator: the Secret and the Service are in it.
	Namespace string
	// SecretName is the Secret that keeps the CA and the serving pair. It
	// must exist: the install creates it empty and the rotator fills it.
	SecretName string
	// ServiceName is the Service the API server calls the webhook through;
	// the certificate is valid for its DNS names.
	ServiceName string
	// ConfigurationName is the ValidatingWebhookConfiguration whose
	// caBundle the rotator keeps.
	ConfigurationName string
	// ExtraDNSNames are further names the certificate is valid for, such
	// as localhost when the API server calls the webhook by URL, or the
	// metrics API's Service.
	ExtraDNSNames []string
	// APIService, if set, is the APIService (the metrics API's) whose
	// caBundle the operator keeps holding the CA, as long as it reaches
	// APIServiceService in Namespace: its server uses the same
	// certificate. One missing, or another server's, is left alone and
	// never holds up the webhook's readiness.
	APIService, APIServiceService string
	// CAConfigMapName, if set, is a ConfigMap in Namespace the operator
	// keeps holding the CA certificate (key CAKey, no private key), for the
	// resolvers to verify the activation server with.
	CAConfigMapName string
	// ReviewAccess refuses an ElastiService whose author may not do
	// everything it makes the operator do (AccessReview). On unless a
	// cluster admin turns it off.
	ReviewAccess bool
	// Limits bound what one ElastiService may ask of the shared operator
	// and resolvers.
	Limits Limits
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("webhook port %d: want 1-65535", c.Port)
	case c.CertDir == "":
		return errors.New("webhook certificate directory is empty")
	case c.Namespace == "" || c.SecretName == "" || c.ServiceName == "" || c.ConfigurationName == "":
		return fmt.Errorf("webhook needs a namespace (%q), a Secret (%q), a Service (%q) and a ValidatingWebhookConfiguration (%q)",
			c.Namespace, c.SecretName, c.ServiceName, c.ConfigurationName)
	}
	return nil
}

// dnsNames are the names the serving certificate is valid for. The first
// is the one cert-controller checks a certificate it finds against (it
// writes the others, never checks them): the webhook Service's name as the
// API server uses it, or with an APIService the metrics API's Service, so
// that turning the metrics API on renews a certificate made without it.
func (c Config) dnsNames() []string {
	svc := c.ServiceName + "." + c.Namespace + ".svc"
	names := []string{svc, c.ServiceName, c.ServiceName + "." + c.Namespace, svc + ".cluster.local"}
	if c.APIService != "" {
		api := c.APIServiceService + "." + c.Namespace + ".svc"
		names = append([]string{api, api + ".cluster.local"}, names...)
	}
	return append(names, c.ExtraDNSNames...)
}

// Poll intervals of certFiles and caPublisher: until the first pair (CA)
// is written, and after. A variable so that the integration test can watch
// a renewal without waiting half a minute.
var certFilesFast, certFilesSlow = time.Second, 30 * time.Second

// apiServiceCASlow is how often apiServiceCA looks again once it has
// nothing to do.
const apiServiceCASlow = 5 * time.Second

// Serving is what Setup gives the rest of the operator.
type Serving struct {
	// Ready is the replica's webhook readiness: not ready until the server
	// answers TLS with the certificate, so a rolled-out operator means a
	// working webhook.
	Ready healthz.Checker
	// GetCertificate hands the webhook's serving certificate, reloaded
	// when it is renewed, to another TLS server of the operator (the
	// activation server, on the same Service and so the same DNS names).
	// It fails until the certificate is in place.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Setup adds the certificate rotator, the copy of its serving pair into
// cfg.CertDir, the publication of its CA (if cfg.CAConfigMapName is set),
// the webhook server and the watch of the pair for other servers to mgr,
// all running on every replica whether or not it leads. The webhook server
// starts once the rotator reports the certificate in place and the CA
// injected.
func Setup(mgr ctrl.Manager, cfg Config) (*Serving, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	names := cfg.dnsNames()
	ready := make(chan struct{})

	rot := &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.SecretName},
		CertDir:        cfg.CertDir,
		CAName:         "elasti-webhook-ca",
		CAOrganization: "elasti.dev",
		DNSName:        names[0],
		ExtraDNSNames:  names[1:],
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: cfg.ConfigurationName, Type: rotator.Validating}},
		FieldOwner:     "elasti-operator",
		// Controller names are unique per process; one rotator per
		// webhook configuration.
		ControllerName: "cert-rotator-" + cfg.ConfigurationName,
		// Every replica keeps the Secret and the caBundle current; they
		// agree through the Secret's resourceVersion.
		RequireLeaderElection: false,
	}
	if err := rotator.AddRotator(mgr, rot); err != nil {
		return nil, fmt.Errorf("add the webhook certificate rotator: %w", err)
	}
	if err := mgr.Add(&certFiles{
		reader: mgr.GetAPIReader(), secret: rot.SecretKey, dir: cfg.CertDir,
		clock: clock.RealClock{}, fast: certFilesFast, slow: certFilesSlow,
	}); err != nil {
		return nil, fmt.Errorf("add the webhook certificate copy: %w", err)
	}
	if cfg.CAConfigMapName != "" {
		if err := mgr.Add(&caPublisher{
			reader: mgr.GetAPIReader(), writer: mgr.GetClient(), secret: rot.SecretKey, configMap: cfg.CAConfigMapName,
			clock: clock.RealClock{}, fast: certFilesFast, slow: certFilesSlow,
		}); err != nil {
			return nil, fmt.Errorf("add the CA publication: %w", err)
		}
	}
	if cfg.APIService != "" {
		if err := mgr.Add(&apiServiceCA{
			reader: mgr.GetAPIReader(), writer: mgr.GetClient(), secret: rot.SecretKey,
			apiService: cfg.APIService, service: types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.APIServiceService},
			// Slow at 5 s, not 30: an APIService registered after the
			// operator started (or taken back from another server) is
			// unavailable until its caBundle is written.
			clock: clock.RealClock{}, fast: certFilesFast, slow: apiServiceCASlow,
		}); err != nil {
			return nil, fmt.Errorf("add the APIService's CA: %w", err)
		}
	}
	srv := webhook.NewServer(webhook.Options{Port: cfg.Port, CertDir: cfg.CertDir})
	v := Validator{Limits: cfg.Limits, Templates: APIPodTemplates{Reader: mgr.GetAPIReader()}}
	if cfg.ReviewAccess {
		v.Access = &AccessReview{Client: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}
	}
	srv.Register(Path, ctrladmission.WithValidator[*elastiv1alpha1.ElastiService](mgr.GetScheme(), v))
	if err := mgr.Add(&gatedServer{ready: ready, server: srv}); err != nil {
		return nil, fmt.Errorf("add the webhook server: %w", err)
	}
	cert := &servingCert{ready: ready, dir: cfg.CertDir}
	if err := mgr.Add(cert); err != nil {
		return nil, fmt.Errorf("add the serving certificate watch: %w", err)
	}
	return &Serving{Ready: readiness(ready, srv.StartedChecker()), GetCertificate: cert.GetCertificate}, nil
}

// gatedServer starts the webhook server once ready is closed: started
// earlier, it would fail on the missing certificate files and stop the
// manager.
type gatedServer struct {
	ready  <-chan struct{}
	server webhook.Server
}

var (
	_ manager.Runnable               = (*gatedServer)(nil)
	_ manager.LeaderElectionRunnable = (*gatedServer)(nil)
)

// NeedLeaderElection is false: every replica serves the webhook.
func (*gatedServer) NeedLeaderElection() bool { return false }

// Start waits for ready, then runs the server until ctx ends.
func (g *gatedServer) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-g.ready:
	}
	return g.server.Start(ctx)
}

// readiness fails until ready is closed, then as long as started does (the
// server is not listening, or does not complete a TLS handshake).
func readiness(ready <-chan struct{}, started healthz.Checker) healthz.Checker {
	return func(req *http.Request) error {
		select {
		case <-ready:
		default:
			return errors.New("the webhook serving certificate is not in place yet, or its CA is not yet in the ValidatingWebhookConfiguration")
		}
		return started(req)
	}
}
