// Command elasti-operator runs the ElastiService reconciler, the
// activation server and the ElastiService admission webhook. It only wires:
// flags -> config -> manager -> controller, activation server and webhook ->
// start.
package main

import (
	"flag"
	"fmt"
	"os"
	_ "time/tzdata" // the zones of enabledPeriod and preWarm, in a distroless image without /usr/share/zoneinfo

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/errorreport"
	"elasti.dev/elasti/internal/memlimit"
)

func main() {
	opts := zap.Options{}
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:], os.Getenv, &opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	base := zap.New(zap.UseFlagOptions(&opts))
	log, flush, err := errorreport.FromEnv(base, "elasti-operator", os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(log)
	if limit, err := memlimit.FromEnv(os.Getenv); err != nil {
		log.Error(err, "no soft memory limit set")
	} else if limit > 0 {
		log.Info("soft memory limit set from the container's", "bytes", limit)
	}
	code := 0
	if err := run(ctrl.SetupSignalHandler(), cfg, log); err != nil {
		log.Error(err, "elasti-operator stopped")
		code = 1
	}
	flush()
	os.Exit(code)
}
