// Command elasti-resolver is Elasti's data plane. It only wires:
// flags -> informers -> resolver (whose handler chain is built in
// internal/resolver/handler.go) -> serve, and drains gracefully on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/boot"
	"elasti.dev/elasti/internal/resolver"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/unlisted"
)

func main() {
	zapOpts := zap.Options{}
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:], &zapOpts)
	if err != nil {
		boot.FlagsInvalid(err)
	}
	boot.Main("elasti-resolver", &zapOpts, func(log logr.Logger) error { return run(cfg, log) })
}

// newRegistry holds the Go runtime's and the process's metrics, with
// go_sched_latencies_seconds among them: how long goroutines waited for a
// CPU, which tells a starved resolver from a slow one (the operator has it
// through controller-runtime's registry).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

func run(cfg config, log logr.Logger) error {
	if cfg.resolver.Hold.MaxHeldBytes == 0 {
		cfg.resolver.Hold.MaxHeldBytes = resolver.HeldBytesFor(debug.SetMemoryLimit(-1))
		log.Info("read-ahead of held requests bounded", "bytes", cfg.resolver.Hold.MaxHeldBytes)
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load Kubernetes client config: %w", err)
	}
	reg := newRegistry()

	informerCtx, stopInformers := context.WithCancel(context.Background())
	defer stopInformers()
	pm, eps := ports.NewPortMap(), endpoints.New()
	synced, err := ports.Watch(informerCtx, restCfg, pm, eps, ports.WatchOptions{
		Namespaces: cfg.watchNamespaces,
		Log:        log.WithName("informers"),
	})
	if err != nil {
		return err
	}

	opts := cfg.resolver
	opts.Activation.Activator = activation.NewClient(activation.ClientOptions{
		OperatorURL: cfg.operatorURL,
		TokenPath:   cfg.tokenPath,
		HTTPClient:  &http.Client{Timeout: opts.Activation.Timeout, Transport: activation.NewTransport(cfg.operatorCAFile)},
	})
	opts.Synced = synced
	opts.Log = log.WithName("resolver")
	opts.Metrics = resolver.NewMetrics(reg)
	r, err := resolver.New(pm, eps, opts)
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}

	adminHandler := r.AdminHandler(reg)
	if cfg.profiling {
		adminHandler = withProfiling(adminHandler)
	}
	admin := &http.Server{Addr: cfg.adminAddr, Handler: adminHandler, ReadHeaderTimeout: 5 * time.Second}
	adminErr := make(chan error, 1)
	go func() {
		if err := admin.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			adminErr <- fmt.Errorf("admin server on %s: %w", cfg.adminAddr, err)
		}
	}()

	sig, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	select {
	case <-sig.Done():
	case err := <-adminErr:
		r.Close()
		return err
	}
	log.Info("signal received, draining", "period", cfg.drainPeriod, "periodMax", cfg.drainPeriodMax, "timeout", cfg.drainTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.drainPeriodMax+cfg.drainTimeout)
	defer cancel()
	drain(drainCtx, r, restCfg, cfg, log)
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	_ = admin.Shutdown(shutdownCtx)
	return nil
}

// drain keeps the ports open until no proxy EndpointSlice lists this pod
// (unlisted.Lister.After); without the pod's name or a client, for
// --drain-period.
func drain(ctx context.Context, r *resolver.Resolver, restCfg *rest.Config, cfg config, log logr.Logger) {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil || cfg.podName == "" {
		if err != nil {
			log.Error(err, "draining for --drain-period only: no client for the proxy EndpointSlices")
		}
		r.Drain(ctx, cfg.drainPeriod)
		return
	}
	l := unlisted.Lister{Client: cs, Namespaces: cfg.watchNamespaces, Pod: cfg.podName}
	// A drain period with no slice rewritten: nobody is rewriting them.
	// And a drain period after the last rewrite, as after SIGTERM, for
	// kube-proxy to apply it.
	r.DrainUntil(ctx, l.After(cfg.drainPeriod, cfg.drainPeriod, cfg.drainPeriod, cfg.drainPeriodMax, log.WithName("drain")))
}

// withProfiling serves net/http/pprof's handlers under /debug/pprof/ and the
// rest with h.
func withProfiling(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
