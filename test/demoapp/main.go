// Command demoapp is the workload the demo and the end-to-end tests scale to
// zero and wake. It serves, each on its own port:
//
//   - HTTP: "/" answers with the pod's name, "/metrics" exposes the
//     http_requests_total counter, "/ws" echoes WebSocket messages;
//   - gRPC over h2c: the standard health service and elasti.demo.Echo/Echo,
//     which returns the google.protobuf.StringValue it is sent;
//   - plain TCP: echoes every byte back.
//
// -startup-delay (or STARTUP_DELAY) holds every listener closed for a while
// at start, like an application that is slow to boot. -hold-memory (or
// HOLD_MEMORY), a byte quantity such as 500Mi, makes that much memory
// resident before the start-up delay and keeps it for the process's life,
// like an application's warm state. -executed-log (or
// EXECUTED_LOG) names a file where every executed HTTP request (by its
// X-Request-Id) and the first bytes of every TCP connection are appended:
// the tests' proof of what ran.
//
// On SIGTERM it keeps serving for -drain (DRAIN, default 3s) before it closes
// its listeners, as a well-behaved workload does: Kubernetes sends SIGTERM at
// the same time as it removes the pod from the Service's endpoints, and
// kube-proxy on every node needs a moment to stop sending the pod new
// connections. An app that stops listening at once refuses those. During the
// drain HTTP answers carry Connection: close, so keep-alive clients move to
// a new connection, and gRPC gets a graceful GOAWAY when the drain ends.
// DRAIN=0 is an app that exits at once on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

type options struct {
	httpAddr, grpcAddr, tcpAddr string
	startupDelay, drain         time.Duration
	holdMemory                  int64
	queryDelay                  time.Duration
	websocket, relay            bool
	executedLog                 string
}

func main() {
	var o options
	flag.StringVar(&o.httpAddr, "http-addr", envOr("HTTP_ADDR", ":8080"), "HTTP listen address (env HTTP_ADDR)")
	flag.StringVar(&o.grpcAddr, "grpc-addr", envOr("GRPC_ADDR", ":9090"), "gRPC (h2c) listen address, empty to disable (env GRPC_ADDR)")
	flag.StringVar(&o.tcpAddr, "tcp-addr", envOr("TCP_ADDR", ":9000"), "TCP echo listen address, empty to disable (env TCP_ADDR)")
	delay, err := time.ParseDuration(envOr("STARTUP_DELAY", "0s"))
	if err != nil {
		slog.Error("bad STARTUP_DELAY", "err", err)
		os.Exit(2)
	}
	flag.DurationVar(&o.startupDelay, "startup-delay", delay, "wait this long before listening (env STARTUP_DELAY)")
	drain, err := time.ParseDuration(envOr("DRAIN", "3s"))
	if err != nil {
		slog.Error("bad DRAIN", "err", err)
		os.Exit(2)
	}
	flag.DurationVar(&o.drain, "drain", drain, "keep serving this long after SIGTERM (env DRAIN)")
	queryDelay, err := time.ParseDuration(envOr("QUERY_DELAY", "0s"))
	if err != nil {
		slog.Error("bad QUERY_DELAY", "err", err)
		os.Exit(2)
	}
	flag.DurationVar(&o.queryDelay, "query-delay", queryDelay, "when positive, answer Prometheus instant queries at /api/v1/query after this long, each with the value 1 (env QUERY_DELAY)")
	flag.StringVar(&o.executedLog, "executed-log", os.Getenv("EXECUTED_LOG"), "append every executed request to this file (env EXECUTED_LOG)")
	flag.BoolVar(&o.websocket, "websocket", envOr("WEBSOCKET", "true") == "true", "serve the WebSocket echo at /ws (env WEBSOCKET)")
	flag.BoolVar(&o.relay, "relay", envOr("RELAY", "false") == "true", "serve GET /relay?url=U, which fetches U from this pod; for tests of NetworkPolicies (env RELAY)")
	hold := flag.String("hold-memory", os.Getenv("HOLD_MEMORY"), "make this many bytes resident at start, before the start-up delay, and hold them, such as 500Mi (env HOLD_MEMORY)")
	flag.Parse()
	if o.holdMemory, err = parseHold(*hold); err != nil {
		slog.Error("bad -hold-memory", "err", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		slog.Error("demoapp failed", "err", err)
		os.Exit(1)
	}
}

// run serves until stop ends, then for o.drain more, then shuts down.
func run(stop context.Context, o options) error {
	name, _ := os.Hostname()
	if o.holdMemory > 0 {
		start := time.Now()
		held := holdMemory(o.holdMemory)
		// Referenced until run returns, so never collected.
		defer runtime.KeepAlive(held)
		slog.Info("holding memory", "bytes", o.holdMemory, "took", time.Since(start))
	}
	if o.startupDelay > 0 {
		slog.Info("delaying start-up", "delay", o.startupDelay)
		select {
		case <-time.After(o.startupDelay):
		case <-stop.Done():
			return nil
		}
	}
	executed, err := openLedger(o.executedLog)
	if err != nil {
		return err
	}
	var draining atomic.Bool
	g, ctx := errgroup.WithContext(afterDrain(stop, o.drain, &draining))
	handler := newHTTPHandler(name, o.websocket, o.relay, executed, &draining)
	if o.queryDelay > 0 {
		handler = slowQueries(handler, o.queryDelay)
	}
	httpSrv := &http.Server{Addr: o.httpAddr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error {
		slog.Info("serving HTTP", "addr", o.httpAddr)
		if err := httpSrv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	if o.grpcAddr != "" {
		grpcSrv := newGRPCServer()
		lis, err := net.Listen("tcp", o.grpcAddr)
		if err != nil {
			return err
		}
		slog.Info("serving gRPC (h2c)", "addr", o.grpcAddr)
		g.Go(func() error { return grpcSrv.Serve(lis) })
		g.Go(func() error { <-ctx.Done(); grpcSrv.GracefulStop(); return nil })
	}
	if o.tcpAddr != "" {
		lis, err := net.Listen("tcp", o.tcpAddr)
		if err != nil {
			return err
		}
		slog.Info("serving TCP echo", "addr", o.tcpAddr)
		g.Go(func() error { return serveTCPEcho(ctx, lis, executed) })
	}
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return httpSrv.Shutdown(shutdownCtx)
	})
	return g.Wait()
}

// afterDrain returns a context that ends drain after stop does, and sets
// draining in between.
func afterDrain(stop context.Context, drain time.Duration, draining *atomic.Bool) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(stop))
	go func() {
		defer cancel()
		<-stop.Done()
		draining.Store(true)
		slog.Info("stop requested: serving on while draining", "drain", drain)
		time.Sleep(drain)
	}()
	return ctx
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
