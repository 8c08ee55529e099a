package metricsapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/cmd/options"
	generatedcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	generatedexternal "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/externalmetrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// Config is what the embedded server needs from the operator.
type Config struct {
	// Port is the HTTPS port, on every address.
	Port int
	// CertDir holds the serving certificate as tls.crt and tls.key, the
	// files the operator's certificate rotator writes; the server reloads
	// them when they change.
	CertDir string
	// Client is the operator's own client configuration.
	Client *rest.Config
	// AuthKubeconfig is the kubeconfig file the delegated authentication
	// (TokenReview) and authorization (SubjectAccessReview) use. Empty in
	// a pod: they use the pod's ServiceAccount.
	AuthKubeconfig string
}

// Server is the external metrics API, run by the operator's manager on
// every replica; the metrics API's Service sends requests to the leader's
// only (Endpoint).
type Server struct {
	cfg Config
	p   provider.ExternalMetricsProvider
}

// New checks cfg. The server is built and listens once started.
func New(cfg Config, p provider.ExternalMetricsProvider) (*Server, error) {
	if cfg.Port <= 0 || cfg.CertDir == "" || cfg.Client == nil {
		return nil, errors.New("metrics API: a port, a certificate directory and a client configuration are required")
	}
	return &Server{cfg: cfg, p: p}, nil
}

// certWait is how often Start looks for the serving pair.
var certWait = time.Second

// Start serves until ctx ends (manager.Runnable). It first waits for the
// serving pair in CertDir: the operator's certificate rotator writes it
// once the install's Secret is filled.
func (s *Server) Start(ctx context.Context) error {
	for !exists(filepath.Join(s.cfg.CertDir, "tls.crt")) || !exists(filepath.Join(s.cfg.CertDir, "tls.key")) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(certWait):
		}
	}
	srv, err := build(s.cfg, s.p)
	if err != nil {
		return err
	}
	return srv.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// NeedLeaderElection is false: every replica serves, so that a new leader
// answers as soon as its pod is labelled.
func (s *Server) NeedLeaderElection() bool { return false }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// build makes the generic API server over p; it reads the serving pair.
func build(cfg Config, p provider.ExternalMetricsProvider) (*apiserver.CustomMetricsAdapterServer, error) {
	o := options.NewCustomMetricsAdapterServerOptions()
	o.SecureServing.BindPort = cfg.Port
	o.SecureServing.ServerCert.CertKey = genericoptions.CertKey{
		CertFile: filepath.Join(cfg.CertDir, "tls.crt"),
		KeyFile:  filepath.Join(cfg.CertDir, "tls.key"),
	}
	o.Authentication.RemoteKubeConfigFile = cfg.AuthKubeconfig
	o.Authorization.RemoteKubeConfigFile = cfg.AuthKubeconfig
	// Elasti's own metrics are on the operator's metrics endpoint; the
	// generic server's would be a second registry behind delegated
	// authorization.
	o.EnableMetrics = false
	defs := func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		all := generatedcore.GetOpenAPIDefinitions(ref)
		for k, v := range generatedexternal.GetOpenAPIDefinitions(ref) {
			all[k] = v
		}
		return all
	}
	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme)
	o.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
	o.OpenAPIConfig.Info.Title, o.OpenAPIConfig.Info.Version = "elasti", "v1beta1"
	o.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	o.OpenAPIV3Config.Info.Title, o.OpenAPIV3Config.Info.Version = "elasti", "v1beta1"
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("metrics API options: %w", errors.Join(errs...))
	}
	kc, err := kubernetes.NewForConfig(cfg.Client)
	if err != nil {
		return nil, err
	}
	inf := informers.NewSharedInformerFactory(kc, 0)
	rc := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	rc.ClientConfig = cfg.Client
	rc.SharedInformerFactory = inf
	if err := o.ApplyTo(rc); err != nil {
		return nil, fmt.Errorf("metrics API: %w", err)
	}
	srv, err := (&apiserver.Config{GenericConfig: &rc.Config}).Complete(inf).New("elasti", nil, p)
	if err != nil {
		return nil, fmt.Errorf("metrics API: %w", err)
	}
	return srv, nil
}
