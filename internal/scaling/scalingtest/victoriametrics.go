package scalingtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// VictoriaMetricsDirEnv names the directory holding the victoria-metrics
// and vmauth binaries that hack/victoriametrics.sh builds. `make
// test-integration` sets it.
const VictoriaMetricsDirEnv = "ELASTI_VICTORIAMETRICS_DIR"

// VictoriaMetricsDir returns the directory VictoriaMetricsDirEnv names. It
// skips t when the variable is unset (a bare `go test -tags integration`),
// and fails it when the variable is set but a binary is missing: a run that
// asked for the backend must not pass without it.
func VictoriaMetricsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(VictoriaMetricsDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: `make test-integration` builds VictoriaMetrics with hack/victoriametrics.sh and runs this test with it", VictoriaMetricsDirEnv)
	}
	for _, bin := range []string{"victoria-metrics", "vmauth"} {
		fi, err := os.Stat(filepath.Join(dir, bin))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s=%s has no executable %s: run hack/victoriametrics.sh", VictoriaMetricsDirEnv, dir, bin)
		}
	}
	return dir
}

// StartVictoriaMetrics starts a single-node VictoriaMetrics on 127.0.0.1
// with its data in a temporary directory, stopped when t ends, and returns
// its base URL. Imported samples are queryable at once: no latency offset
// hides the newest ones and no response cache keeps an older answer.
func StartVictoriaMetrics(t testing.TB, binDir string) string {
	t.Helper()
	dir := t.TempDir()
	return startServer(t, filepath.Join(binDir, "victoria-metrics"), dir, func(addr string) []string {
		return []string{
			"-storageDataPath=" + filepath.Join(dir, "data"),
			"-httpListenAddr=" + addr,
			"-retentionPeriod=1d", // the shortest it accepts
			"-search.latencyOffset=0s",
			"-search.disableCache",
		}
	})
}

// StartVMAuth starts vmauth on 127.0.0.1 with config as its -auth.config,
// stopped when t ends, and returns its base URL.
func StartVMAuth(t testing.TB, binDir, config string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatalf("write the vmauth config: %v", err)
	}
	return startServer(t, filepath.Join(binDir, "vmauth"), dir, func(addr string) []string {
		return []string{"-auth.config=" + path, "-httpListenAddr=" + addr}
	})
}

// ImportPrometheus posts samples in the Prometheus text format, each with
// its timestamp in milliseconds, to a single-node VictoriaMetrics at url,
// then flushes them so the next query sees them.
func ImportPrometheus(t testing.TB, url, samples string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, step := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/import/prometheus", samples},
		{http.MethodGet, "/internal/force_flush", ""},
	} {
		req, err := http.NewRequest(step.method, url+step.path, strings.NewReader(step.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", step.method, step.path, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: HTTP %d: %s", step.method, step.path, resp.StatusCode, body)
		}
	}
}

// startServer runs bin with the arguments args returns for a free loopback
// address, logging to dir, and waits until its /health answers OK. The
// process is stopped when t ends; if t failed, its log's tail is reported.
func startServer(t testing.TB, bin, dir string, args func(addr string) []string) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, filepath.Base(bin)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args(addr)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	t.Cleanup(func() {
		stopProcess(cmd, done)
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", filepath.Base(bin), logTail(logPath, 30))
		}
	})
	url := "http://" + addr
	if err := waitHealthy(url, done); err != nil {
		t.Fatalf("%s at %s: %v; log:\n%s", filepath.Base(bin), url, err, logTail(logPath, 30))
	}
	return url
}

// waitHealthy polls /health, which VictoriaMetrics' servers answer with OK
// once they serve.
func waitHealthy(url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w", ctx.Err())
		case <-exited:
			return errors.New("exited before it was healthy")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopProcess interrupts the process and kills it if it has not exited
// within 10 s.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
