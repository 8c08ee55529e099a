package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/admission"
	"elasti.dev/elasti/internal/controller"
	"elasti.dev/elasti/internal/controller/apirequests"
	"elasti.dev/elasti/internal/controller/metricsource"
	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/internal/scaling"
)

// run builds the manager, the reconciler and the activation server, and runs
// them until ctx ends.
func run(ctx context.Context, o options, log logr.Logger) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(elastiv1alpha1.AddToScheme(scheme))

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	restCfg.QPS, restCfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	restCfg.Wrap(apirequests.Wrap)
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controller.CacheOptions(o.controller),
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	kubelets, err := scaling.KubeletTransport(restCfg, o.kubeletCAFile, o.kubeletInsecureTLS)
	if err != nil {
		return err
	}
	live := mgr.GetAPIReader()
	parts, err := controller.Setup(ctx, mgr, o.controller, controller.Deps{
		Triggers: &scaling.Evaluator{
			Secrets: live, Endpoints: live, Pods: live,
			Kubelets:             &scaling.KubeletSummaries{Nodes: live, Transport: kubelets},
			DefaultServerAddress: o.prometheusAddress, Servers: o.triggerServers,
			Timeout: o.triggerTimeout, NetworkThreshold: o.networkThreshold,
		},
	})
	if err != nil {
		return err
	}
	// The validating webhook runs on every replica. A replica is not ready
	// until it serves with a certificate whose CA the API server has. The
	// activation server speaks TLS with the same certificate; without the
	// webhook there is no certificate, and it speaks plain HTTP.
	var getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if o.webhook.Port != 0 {
		serving, err := admission.Setup(mgr, o.webhook)
		if err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook", serving.Ready); err != nil {
			return fmt.Errorf("add readyz check: %w", err)
		}
		getCertificate = serving.GetCertificate
	}
	saNS, saName, _ := strings.Cut(o.resolverServiceAccount, "/")
	srv := &activation.Server{
		Addr: o.activationAddr,
		Authenticator: &activation.Authenticator{
			Client: mgr.GetClient(), ServiceAccountNamespace: saNS, ServiceAccountName: saName, Audiences: o.activationAudiences,
		},
		Waker:          parts.Waker,
		Log:            log.WithName("activation"),
		GetCertificate: getCertificate,
	}
	if _, err := srv.Listen(); err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("add the activation server: %w", err)
	}
	if o.metricsAPIPort != 0 {
		if err := addMetricsAPI(ctx, mgr, restCfg, o, parts); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr)); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}
	log.Info("starting elasti-operator", "resolverNamespace", o.controller.ResolverNamespace,
		"portRange", fmt.Sprintf("%d-%d", o.controller.PortRangeStart, o.controller.PortRangeEnd), "portQuarantine", o.controller.PortQuarantine, "activation", o.activationAddr, "activationTLS", getCertificate != nil)
	return mgr.Start(ctx)
}

// cachesSynced is ready once the informers this replica started have synced.
func cachesSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}

// addMetricsAPI adds the external metrics API (docs/hpa.md): the server on
// every replica, and the pod label that makes the leader its endpoint.
func addMetricsAPI(ctx context.Context, mgr ctrl.Manager, restCfg *rest.Config, o options, parts *controller.Parts) error {
	src := metricsource.New(metricsource.Config{
		Reader: mgr.GetClient(), Triggers: parts.Triggers,
		Namespace: o.controller.ResolverNamespace, ResolverAdminPort: o.resolverAdminPort,
		WatchNamespaces: o.controller.WatchNamespaces,
		// A rate is served while its evaluation is at most two polling
		// intervals and one evaluation's timeout old.
		MaxTriggerAge: 2*o.controller.PollingInterval + o.controller.TriggerEvaluationTimeout,
	})
	srv, err := metricsapi.New(metricsapi.Config{Port: o.metricsAPIPort, CertDir: o.webhook.CertDir, Client: restCfg}, &metricsapi.Provider{Source: src})
	if err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("add the metrics API: %w", err)
	}
	ep := &metricsapi.Endpoint{Client: mgr.GetClient(), Pod: types.NamespacedName{Namespace: o.webhook.Namespace, Name: o.podName}}
	// Before the manager starts: a pod that led before its container
	// restarted still has the label.
	if err := ep.Unlabel(ctx); err != nil {
		return err
	}
	if err := mgr.Add(ep); err != nil {
		return fmt.Errorf("add the metrics API's endpoint: %w", err)
	}
	return nil
}
