package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"elasti.dev/elasti/test/cluster"
)

// KeepEnv, when set to a non-empty value, leaves a cluster that the run
// brought up running after the tests.
const KeepEnv = "ELASTI_E2E_KEEP"

// current is the cluster of this test binary, set by Main.
var current *Env

// clusterCLI runs one verb of the elasti-cluster CLI Main built, set by Main.
var clusterCLI func(verb string) error

// ClusterCLI runs one verb of the cluster's CLI (for instance
// prometheus-stop or prometheus-start): daemons it starts are children of
// that CLI process, never of the test binary.
func (e *Env) ClusterCLI(verb string) error {
	if clusterCLI == nil {
		return fmt.Errorf("no cluster CLI: this package's TestMain must call e2e.Main")
	}
	return clusterCLI(verb)
}

// Main is a test package's TestMain: func TestMain(m *testing.M) { e2e.Main(m) }.
// It runs the tests in a cluster.Session: on the running cluster, or on one
// it brings up, takes down and checks the machine is clean after.
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	cfg, err := cluster.LocalConfig(os.Getenv("ELASTI_K8S_BIN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	cli, cleanup, err := buildCLI(cfg.RepoRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer cleanup()
	clusterCLI = cfg.CLIRunner(cli)

	code := 0
	s := cluster.Session{
		Config:     cfg,
		CLI:        clusterCLI,
		Keep:       os.Getenv(KeepEnv) != "",
		Images:     true,
		CheckClean: true,
		Logf:       func(format string, args ...any) { fmt.Printf("e2e: "+format+"\n", args...) },
	}
	err = s.Run(func(bool) error {
		if current, err = NewEnv(cfg); err != nil {
			return err
		}
		code = m.Run()
		return nil
	})
	var unclean *cluster.UncleanError
	switch {
	case errors.As(err, &unclean):
		fmt.Println("--- FAIL: " + unclean.Error())
		return 1
	case err != nil:
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return code
}

// buildCLI builds elasti-cluster into a temporary directory. The cluster's
// daemons are started by that separate process, so they are never children
// of the test binary.
func buildCLI(root string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "elasti-e2e-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	bin := filepath.Join(dir, "elasti-cluster")
	cmd := exec.Command("go", "build", "-o", bin, "./test/cluster/cmd/elasti-cluster")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build elasti-cluster: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return bin, cleanup, nil
}
