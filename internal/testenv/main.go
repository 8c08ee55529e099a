package testenv

import (
	"fmt"
	"io"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogEnv, when set to a non-empty value, sends controller-runtime's log to
// stderr; otherwise it is discarded.
const LogEnv = "ELASTI_TEST_LOG"

// Main is an integration test package's whole TestMain:
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e })
//	}
//
// It starts the control plane with opts (which also records its version in
// the file ELASTI_INTEGRATION_REPORT names), prints its Banner, hands it to
// use, runs the tests, stops it and exits with the tests' code.
func Main(m *testing.M, opts Options, use func(*Env)) {
	os.Exit(run(m, opts, use))
}

func run(m *testing.M, opts Options, use func(*Env)) int {
	env, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: stop the control plane:", err)
		}
	}()
	fmt.Println(env.Banner())
	logOut := io.Discard
	if os.Getenv(LogEnv) != "" {
		logOut = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logOut)))
	use(env)
	return m.Run()
}
