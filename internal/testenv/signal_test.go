//go:build integration

package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes this test binary, started again by
// TestSignalStopsTheControlPlane, start a control plane and wait.
const helperEnv = "ELASTI_TESTENV_SIGNAL_HELPER"

// TestSignalStopsTheControlPlane: a test binary stopped by SIGTERM, as make
// test stops the tiers beside a failed one, stops its kube-apiserver and
// etcd before it exits, instead of leaving them running (envtest starts
// them in process groups of their own, which the signal does not reach).
func TestSignalStopsTheControlPlane(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		env, err := Start(Options{})
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		fmt.Println("host", env.Config.Host)
		time.Sleep(10 * time.Minute) // until the signal
		os.Exit(1)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalStopsTheControlPlane$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var host string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if h, ok := strings.CutPrefix(lines.Text(), "host "); ok {
			host = h
			break
		}
		t.Logf("helper: %s", lines.Text())
	}
	u, err := url.Parse(host)
	if host == "" || err != nil {
		t.Fatalf("the helper printed no API server address (%q, %v)", host, err)
	}
	if c, err := net.Dial("tcp", u.Host); err != nil {
		t.Fatalf("the helper's API server at %s does not accept connections: %v", u.Host, err)
	} else {
		c.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Its output ends when it exits, and with it every process that
	// shares its stdout.
	drained := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(2 * time.Minute):
		t.Fatal("the helper's output is still open 2 minutes after SIGTERM")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("the helper ended with %v, want exit status 2 (stopped by the signal handler)", err)
	}
	// Stop waits for kube-apiserver to exit, so its port is closed by now.
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("the API server at %s still accepts connections after its test binary was stopped by SIGTERM", u.Host)
	}
}
