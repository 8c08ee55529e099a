package scalingtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// PrometheusBinary is where Debian's prometheus package installs the server.
const PrometheusBinary = "/usr/bin/prometheus"

// ErrNoPrometheus means the prometheus binary is not installed; tests skip
// with this message. hack/install-deps.sh installs it.
var ErrNoPrometheus = errors.New("prometheus binary not found at " + PrometheusBinary + ": run hack/install-deps.sh (Debian package prometheus)")

// Exporter serves one gauge, elasti_test_value, on loopback.
type Exporter struct {
	Addr string

	mu    sync.Mutex
	value float64
	srv   *http.Server
}

// StartExporter starts an exporter on 127.0.0.1.
func StartExporter() (*Exporter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the exporter: %w", err)
	}
	e := &Exporter{Addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		e.mu.Lock()
		v := e.value
		e.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE elasti_test_value gauge\nelasti_test_value %s\n", formatFloat(v))
	})
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

func formatFloat(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Set changes the exported value.
func (e *Exporter) Set(v float64) {
	e.mu.Lock()
	e.value = v
	e.mu.Unlock()
}

// Stop stops the exporter.
func (e *Exporter) Stop() { _ = e.srv.Close() }

// Prometheus is a real Prometheus server on loopback.
type Prometheus struct {
	// URL is the server's base URL.
	URL string
	cmd *exec.Cmd
	// done is closed when the process exits.
	done chan struct{}
}

// StartPrometheus starts Prometheus with its data in dir, scraping the
// exporter (job "exporter") and itself (job "prometheus") every second, and
// waits until it is ready and has scraped the exporter once.
func StartPrometheus(ctx context.Context, dir, exporterAddr string) (*Prometheus, error) {
	if _, err := os.Stat(PrometheusBinary); err != nil {
		return nil, ErrNoPrometheus
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: exporter
  static_configs: [{targets: [%q]}]
- job_name: prometheus
  static_configs: [{targets: [%q]}]
`, exporterAddr, addr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write the Prometheus config: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, fmt.Errorf("create the Prometheus log: %w", err)
	}
	cmd := exec.Command(PrometheusBinary,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	p := &Prometheus{URL: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
		return nil, fmt.Errorf("%w; log:\n%s", err, log)
	}
	return p, nil
}

// waitReady waits until Prometheus answers queries with data from both
// of its targets.
func (p *Prometheus) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	// Ready, then both targets scraped and up (count(up == 1) == 2 has a
	// sample only then), then the exporter's series present.
	for _, path := range []string{"/-/ready", "/api/v1/query?query=" + url.QueryEscape("count(up == 1) == 2"), "/api/v1/query?query=elasti_test_value"} {
		for {
			resp, err := client.Get(p.URL + path)
			if err == nil {
				body := make([]byte, 4096)
				n, _ := resp.Body.Read(body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK && (path == "/-/ready" || containsValue(body[:n])) {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("prometheus at %s not ready (%s): %w", p.URL, path, ctx.Err())
			case <-p.done:
				return errors.New("prometheus exited")
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func containsValue(b []byte) bool {
	return bytes.Contains(b, []byte(`"value":[`))
}

// Stop stops Prometheus and waits for it to exit.
func (p *Prometheus) Stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartForTest starts an exporter holding value and a real Prometheus
// scraping it, both stopped when t ends. It skips t when the prometheus binary
// is not installed.
func StartForTest(t testing.TB, value float64) (*Exporter, *Prometheus) {
	t.Helper()
	exp, err := StartExporter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exp.Stop)
	exp.Set(value)
	prom, err := StartPrometheus(context.Background(), t.TempDir(), exp.Addr)
	if errors.Is(err, ErrNoPrometheus) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	return exp, prom
}
