//go:build bench

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"time"
)

// The load generator. `elasti-bench load` runs inside the node's network
// namespace (ip netns exec), so its sockets are plain ones with no setns per
// dial, and it can only reach the cluster's own addresses. Every mode is
// bounded in count and in time and stops by itself.

// allowedTargets are the only places load may go: loopback and the local
// cluster's link, pod and Service ranges.
var allowedTargets = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.250.0.0/30"),
	netip.MustParsePrefix("10.244.0.0/24"),
	netip.MustParsePrefix("10.96.0.0/16"),
}

// Hard ceilings whatever the flags say.
const (
	maxRate        = 5000
	maxDuration    = 60 * time.Second
	maxWorkers     = 512
	maxBurst       = 10000
	maxReqTimeout  = 3 * time.Minute
	maxInFlightCap = 4000
)

func checkTarget(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return fmt.Errorf("only http:// targets: %s", raw)
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return fmt.Errorf("target host must be an IP address: %s", raw)
	}
	for _, p := range allowedTargets {
		if p.Contains(a) {
			return nil
		}
	}
	return fmt.Errorf("target %s is outside loopback and the local cluster's ranges", a)
}

// loadResult is what one load run reports (as JSON on stdout).
type loadResult struct {
	Mode     string         `json:"mode"`
	Sent     int            `json:"sent"`
	OK       int            `json:"ok"`
	Statuses map[int]int    `json:"statuses"`
	Errors   map[string]int `json:"errors,omitempty"`
	Dropped  int            `json:"dropped,omitempty"`
	Elapsed  float64        `json:"elapsedSeconds"`
	// Start is when sending began (burst: when the gate opened), in Unix
	// nanoseconds: the bench runs on the same machine and clock.
	Start int64 `json:"startUnixNano"`
	// LatencyMs holds one sample per successful (2xx) request.
	LatencyMs []float64 `json:"latencyMs"`
	// SchedWaits is how long the generator's own goroutines waited for a
	// CPU during the run (runtime/metrics /sched/latencies:seconds): a
	// latency the generator records late because it was not running is the
	// machine's, not the path's.
	SchedWaits []schedWait `json:"schedWaits,omitempty"`
}

// schedWait is how many goroutine wake-ups waited longer than Seconds, of
// Total.
type schedWait struct {
	Seconds float64 `json:"seconds"`
	Over    float64 `json:"over"`
	Total   float64 `json:"total"`
}

// schedWaitBounds are the waits the generator reports: a millisecond is
// already most of the path's median, ten is a tail.
var schedWaitBounds = []float64{1e-3, 1e-2}

func readSchedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedWaitsBetween counts, for each bound, the wake-ups between two
// readings in the runtime's buckets that reach above it. They all waited
// longer than the lower edge of the first such bucket, the runtime's edge
// nearest below the bound, which Seconds reports.
func schedWaitsBetween(before, after *metrics.Float64Histogram) []schedWait {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return nil
	}
	var out []schedWait
	for _, bound := range schedWaitBounds {
		w, first := schedWait{Seconds: bound}, true
		for i, c := range after.Counts {
			n := float64(c - before.Counts[i])
			w.Total += n
			if after.Buckets[i+1] > bound {
				if first && !math.IsInf(after.Buckets[i], -1) {
					w.Seconds = after.Buckets[i]
				}
				first = false
				w.Over += n
			}
		}
		out = append(out, w)
	}
	return out
}

func (r *loadResult) rps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed
}

func (r *loadResult) errorSummary() string {
	var parts []string
	for s, n := range r.Statuses {
		if s < 200 || s > 299 {
			parts = append(parts, fmt.Sprintf("%d×HTTP %d", n, s))
		}
	}
	for e, n := range r.Errors {
		parts = append(parts, fmt.Sprintf("%d×%s", n, e))
	}
	if r.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d not sent (in-flight cap)", r.Dropped))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

type recorder struct {
	mu  sync.Mutex
	res loadResult
}

func (rc *recorder) record(status int, err error, lat time.Duration) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.res.Sent++
	if err != nil {
		rc.res.Errors[classify(err)]++
		return
	}
	rc.res.Statuses[status]++
	if status >= 200 && status <= 299 {
		rc.res.OK++
		rc.res.LatencyMs = append(rc.res.LatencyMs, float64(lat.Microseconds())/1000)
	}
}

func classify(err error) string {
	s := err.Error()
	for _, k := range []string{"connection refused", "connection reset", "timeout", "deadline exceeded", "EOF", "no route", "too many open files", "cannot assign requested address"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// oneShot sends GETs to one target, each on a connection of its own, as a
// new client would: dial, write the request (Connection: close), read the
// answer, then wait for the server to close before closing too.
//
// The wait matters at these rates. Whichever side closes first keeps the
// connection's 4-tuple in TIME_WAIT for 60 s. When the load generator closed
// first (an http.Client reading the body and closing before the server's FIN
// arrived, which happened more often through the resolver), a few thousand of
// its ports to the one target stayed in TIME_WAIT after a closed-loop run,
// and in the next open-loop run the kernel's port search in connect()
// (__inet_hash_connect) took the machine's CPU: the generator spent nearly
// all of it in system time, requests waited seconds for a connection, and the
// run reported that as the server's latency. The answer's latency is taken
// when its last byte arrives, before the wait.
type oneShot struct {
	addr    string
	req     []byte
	timeout time.Duration
	dialer  net.Dialer
}

func newOneShot(target, host string, timeout time.Duration) (*oneShot, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = u.Host
	}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: elasti-bench\r\nConnection: close\r\n\r\n", u.RequestURI(), host)
	port := u.Port()
	if port == "" {
		port = "80" // checkTarget allows http:// only
	}
	return &oneShot{addr: net.JoinHostPort(u.Hostname(), port), req: []byte(req), timeout: timeout, dialer: net.Dialer{Timeout: 10 * time.Second}}, nil
}

// get returns the answer's status and when its last byte arrived.
func (o *oneShot) get(ctx context.Context) (int, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c, err := o.dialer.DialContext(ctx, "tcp", o.addr)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(o.req); err != nil {
		return 0, time.Time{}, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, time.Time{}, err
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, time.Time{}, err
	}
	answered := time.Now()
	// The server's close (its FIN): EOF, or the timeout if it never comes.
	_, _ = io.Copy(io.Discard, br)
	return resp.StatusCode, answered, nil
}

func doGet(ctx context.Context, c *http.Client, target string) (int, error) {
	code, _, err := getHeader(ctx, c, target, "")
	return code, err
}

// getHeader is doGet that also returns the answer's header name (none
// when name is empty).
func getHeader(ctx context.Context, c *http.Client, target, name string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", err
	}
	var value string
	if name != "" {
		value = resp.Header.Get(name)
	}
	return resp.StatusCode, value, nil
}

// loadMain is `elasti-bench load`.
func loadMain(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	mode := fs.String("mode", "rate", "rate (open loop at -rate for -duration), closed (-workers back to back for -duration) or burst (-count at once)")
	target := fs.String("url", "", "http://IP:port/path inside the cluster's ranges")
	host := fs.String("host", "", "Host header to send instead of the URL's (a Service's name, for a resolver port called by the resolver pod's IP)")
	rate := fs.Int("rate", 500, "requests per second (rate)")
	duration := fs.Duration("duration", 10*time.Second, "how long to send (rate, closed)")
	workers := fs.Int("workers", 32, "concurrent connections (closed)")
	count := fs.Int("count", 1000, "requests started at once (burst)")
	timeout := fs.Duration("timeout", 30*time.Second, "one request's timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkTarget(*target); err != nil {
		return err
	}
	if *rate < 1 || *rate > maxRate || *duration <= 0 || *duration > maxDuration || *workers < 1 || *workers > maxWorkers ||
		*count < 1 || *count > maxBurst || *timeout <= 0 || *timeout > maxReqTimeout {
		return errors.New("load: a flag is outside its bound")
	}
	// Whatever happens, the run ends by this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), *duration+*timeout+5*time.Second)
	defer cancel()
	rc := &recorder{res: loadResult{Mode: *mode, Statuses: map[int]int{}, Errors: map[string]int{}}}
	c, err := newOneShot(*target, *host, *timeout)
	if err != nil {
		return err
	}
	sched := readSchedLatencies()
	start := time.Now()
	var wg sync.WaitGroup
	switch *mode {
	case "rate":
		total := int(float64(*rate) * duration.Seconds())
		interval := time.Second / time.Duration(*rate)
		sem := make(chan struct{}, maxInFlightCap)
	send:
		for i := range total {
			due := start.Add(time.Duration(i) * interval)
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break send
				}
			}
			select {
			case sem <- struct{}{}:
			default:
				rc.mu.Lock()
				rc.res.Dropped++
				rc.mu.Unlock()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				status, at, err := c.get(ctx)
				// From the time the request was due, so a late sender
				// cannot hide queueing (coordinated omission).
				rc.record(status, err, at.Sub(due))
			}()
		}
	case "closed":
		end := start.Add(*duration)
		for range *workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) && ctx.Err() == nil {
					t0 := time.Now()
					status, at, err := c.get(ctx)
					rc.record(status, err, at.Sub(t0))
				}
			}()
		}
	case "burst":
		gate := make(chan struct{})
		for range *count {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				t0 := time.Now()
				status, at, err := c.get(ctx)
				rc.record(status, err, at.Sub(t0))
			}()
		}
		start = time.Now()
		close(gate)
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	wg.Wait()
	rc.res.SchedWaits = schedWaitsBetween(sched, readSchedLatencies())
	rc.res.Start = start.UnixNano()
	rc.res.Elapsed = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(&rc.res)
}

// runLoad runs `elasti-bench load` inside the node's network namespace and
// returns its result.
func (b *bench) runLoad(ctx context.Context, args ...string) (*loadResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, maxDuration+maxReqTimeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.cfg.NetNS, self, "load"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", strings.Join(args, " "), err)
	}
	var r loadResult
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("load output: %w", err)
	}
	return &r, nil
}
