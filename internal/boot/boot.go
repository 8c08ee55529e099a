// Package boot is the start and end of both Elasti binaries: the logger
// (with error reporting when SENTRY_DSN is set, internal/errorreport), the
// Go runtime's soft memory limit (internal/memlimit), the run itself, and
// the exit code.
package boot

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/errorreport"
	"elasti.dev/elasti/internal/memlimit"
)

// FlagsInvalid ends the process for flags that cannot be used: the message
// on stderr and exit code 2, as the flag package does.
func FlagsInvalid(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}

// Main builds the logger of the binary called component from the zap flags,
// sets the soft memory limit, calls run with the logger and exits: 0 when
// run returns nil, 1 after logging its error otherwise. Reported errors are
// flushed before the exit.
func Main(component string, zapOpts *zap.Options, run func(logr.Logger) error) {
	log, flush, err := errorreport.FromEnv(zap.New(zap.UseFlagOptions(zapOpts)), component, os.Getenv)
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
	if err := run(log); err != nil {
		log.Error(err, component+" stopped")
		code = 1
	}
	flush()
	os.Exit(code)
}
