// Command elasti-operator runs the ElastiService reconciler, the
// activation server and the ElastiService admission webhook. It only wires:
// flags -> config -> manager -> controller, activation server and webhook ->
// start.
package main

import (
	"flag"
	"os"
	_ "time/tzdata" // the zones of enabledPeriod and preWarm, in a distroless image without /usr/share/zoneinfo

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/boot"
)

func main() {
	opts := zap.Options{}
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:], os.Getenv, &opts)
	if err != nil {
		boot.FlagsInvalid(err)
	}
	boot.Main("elasti-operator", &opts, func(log logr.Logger) error { return run(ctrl.SetupSignalHandler(), cfg, log) })
}
