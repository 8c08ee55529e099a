package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	cliRun := func(verb string) error {
		cmd := exec.Command(cli, verb, "--k8s-bin-dir", cfg.BinDir)
		cmd.Dir = cfg.RepoRoot
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	clusterCLI = cliRun

	var before *cluster.Snapshot
	started := !cfg.Running()
	if started {
		if before, err = cfg.TakeSnapshot(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: snapshot the machine:", err)
			return 1
		}
		if err := cliRun("up"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cluster up failed:", err)
			_ = cliRun("down")
			return 1
		}
	} else {
		fmt.Println("e2e: reusing the running cluster; it stays up after the tests")
	}

	code := 1
	if err := cliRun("images"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build images:", err)
	} else if current, err = NewEnv(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	} else {
		code = m.Run()
	}

	if !started {
		return code
	}
	if os.Getenv(KeepEnv) != "" {
		fmt.Printf("e2e: %s is set: the cluster stays up; KUBECONFIG=%s; `make cluster-down` removes it\n", KeepEnv, cfg.Kubeconfig())
		return code
	}
	if err := cliRun("down"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster down failed:", err)
		return 1
	}
	if !checkClean(cfg, before) {
		return 1
	}
	return code
}

// checkClean is the hygiene test: after Down the machine must match the
// snapshot taken before Up. Killed processes wait for PID 1 to reap them, so
// it polls for a while before it reports a difference.
func checkClean(cfg cluster.Config, before *cluster.Snapshot) bool {
	var diff []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		after, err := cfg.TakeSnapshot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: snapshot the machine:", err)
			return false
		}
		if diff = before.Diff(after); len(diff) == 0 {
			fmt.Println("--- PASS: cluster-down hygiene: no process, link, address, route, netns, nftables/iptables rule, mount, cgroup, sysctl or path left behind")
			return true
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	fmt.Println("--- FAIL: cluster-down hygiene: the machine differs from before cluster-up:")
	for _, l := range diff {
		fmt.Println("    " + l)
	}
	return false
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
