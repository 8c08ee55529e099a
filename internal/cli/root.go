package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"
)

// defaultPollInterval is how often `wake --wait` rereads the ElastiService.
const defaultPollInterval = time.Second

// Options are what a command needs beyond its flags: where to write and how to
// read the time. Tests replace them; Main uses the process's streams.
type Options struct {
	// Out receives results; ErrOut receives warnings and errors.
	Out, ErrOut io.Writer
	// Clock is read for ages and remaining cooldowns.
	Clock clock.PassiveClock
	// PollInterval is how often `wake --wait` checks the status; zero means
	// one second.
	PollInterval time.Duration
}

// Main runs the plugin with args (without the program name) and returns the
// process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cmd := NewCommand(Options{Out: stdout, ErrOut: stderr, Clock: clock.RealClock{}})
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a mistake in the command line rather than a failed call.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// NewCommand builds the kubectl-elasti command tree.
func NewCommand(o Options) *cobra.Command {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	kf := &kubeFlags{}
	root := &cobra.Command{
		Use:   "kubectl-elasti",
		Short: "Inspect and steer Elasti's scale-to-zero ElastiServices",
		Long: `kubectl elasti shows which ElastiServices are asleep, explains why one is or
is not scaling to zero, and wakes or pins a workload through the API server, with
your own RBAC permissions.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl elasti"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(o.Out)
	root.SetErr(o.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{msg: err.Error()}
	})
	kf.addFlags(root.PersistentFlags())

	root.AddCommand(
		newListCommand(o, kf),
		newStatusCommand(o, kf),
		newWakeCommand(o, kf),
		newKeepAwakeCommand(o, kf),
		newAllowSleepCommand(o, kf),
	)
	return root
}

// exactlyOneName is cobra's argument check for the commands that take NAME.
func exactlyOneName(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{msg: fmt.Sprintf("expected exactly one ElastiService NAME, got %d arguments", len(args))}
	}
	return nil
}
