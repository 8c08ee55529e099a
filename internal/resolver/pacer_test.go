package resolver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// gateUpstream answers each request only once the test lets it through,
// and records how many it had started at once at most.
type gateUpstream struct {
	srv  *httptest.Server
	gate chan struct{}
	stop chan struct{}

	mu      sync.Mutex
	inside  int
	most    int
	started []string
}

func newGateUpstream(t *testing.T, open func(path string) bool) *gateUpstream {
	u := &gateUpstream{gate: make(chan struct{}), stop: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.inside++
		u.most = max(u.most, u.inside)
		u.started = append(u.started, r.URL.Path)
		u.mu.Unlock()
		defer func() {
			u.mu.Lock()
			u.inside--
			u.mu.Unlock()
		}()
		if open == nil || !open(r.URL.Path) {
			select {
			case <-u.gate:
			case <-r.Context().Done():
				return
			case <-u.stop:
				return
			}
		}
		_, _ = w.Write([]byte("ok " + r.URL.Path))
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(u.stop) }) // runs first: a failed test leaves no handler waiting
	return u
}

func (u *gateUpstream) addr() string { return u.srv.Listener.Addr().String() }

func (u *gateUpstream) state() (inside, most int, started []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.inside, u.most, append([]string(nil), u.started...)
}

// A burst held at zero reaches the woken target at most ReleaseConcurrency
// requests at a time, and every request of it is answered.
func TestReleasedBurstIsPaced(t *testing.T) {
	const burst, limit = 12, 3
	h := newHarness(t, 1, func(o *Options) { o.Hold.ReleaseConcurrency, o.Hold.ReleaseTurn = limit, time.Minute })
	up := newGateUpstream(t, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	results := make(chan result, burst)
	for i := range burst {
		go func() {
			results <- postCtx(h.client(), context.Background(), "http://"+h.addr(0)+"/r"+string(rune('a'+i)), "body")
		}()
	}
	h.eventually("the burst is held", func() bool { return h.held("web") == burst })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	h.eventually("the first turns reach the target", func() bool { in, _, _ := up.state(); return in == limit })
	for range burst {
		up.gate <- struct{}{}
	}
	for range burst {
		if r := <-results; r.err != nil || r.status != http.StatusOK {
			t.Fatalf("a released request: status %d err %v body %q", r.status, r.err, r.body)
		}
	}
	if _, most, started := up.state(); most > limit || len(started) != burst {
		t.Fatalf("target had %d requests in flight at most and saw %d; want at most %d and all %d", most, len(started), limit, burst)
	}
	h.eventually("the pace is forgotten", func() bool { return h.r.pacer.Size() == 0 })
}

// A request whose answer is slow keeps its turn for ReleaseTurn at most: a
// long poll slows the release down but never stops it.
func TestSlowAnswerGivesUpItsTurn(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Hold.ReleaseConcurrency, o.Hold.ReleaseTurn = 1, 100*time.Millisecond })
	up := newGateUpstream(t, func(path string) bool { return path != "/slow" })
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	slow := make(chan result, 1)
	go func() { slow <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/slow", nil) }()
	h.eventually("the slow request is held", func() bool { return h.held("web") == 1 })
	fast := make(chan result, 1)
	go func() { fast <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/fast", nil) }()
	h.eventually("both are held", func() bool { return h.held("web") == 2 })
	h.ready("websvc", "websvc-abc", "http", up.addr())

	// Either goes first; /fast is answered while /slow still waits.
	if r := <-fast; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("fast request: status %d err %v", r.status, r.err)
	}
	select {
	case r := <-slow:
		t.Fatalf("the slow request was answered before its gate opened: %+v", r)
	default:
	}
	up.gate <- struct{}{}
	if r := <-slow; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("slow request: status %d err %v", r.status, r.err)
	}
}

// A client that gives up while waiting for its turn is never forwarded.
func TestClientGoneWhileWaitingItsTurnIsNeverForwarded(t *testing.T) {
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	h := newHarness(t, 1, func(o *Options) { o.Hold.ReleaseConcurrency, o.Hold.ReleaseTurn = 1, time.Minute })
	up := newGateUpstream(t, func(path string) bool { return path == "/probe" })
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	first := make(chan result, 1)
	go func() { first <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/first", nil) }()
	h.eventually("the first request is held", func() bool { return h.held("web") == 1 })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	h.eventually("the first request reaches the target and keeps its turn", func() bool { in, _, _ := up.state(); return in == 1 })

	// The target goes back to zero, a second request is held, the target
	// wakes again: the second one waits for the turn the first still has.
	h.endpoints.Delete("ns", "websvc-abc")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan result, 1)
	go func() { gone <- postCtx(h.client(), ctx, "http://"+h.addr(0)+"/gone", "charge=1") }()
	h.eventually("the second request is held", func() bool { return h.held("web") == 1 })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	h.eventually("the second request leaves the hold", func() bool { return h.held("web") == 0 })
	h.eventually("the second request waits for its turn", func() bool { return h.r.pacer.Users(web) == 2 })
	cancel()
	if r := <-gone; r.err == nil {
		t.Fatalf("the cancelled request got an answer: %+v", r)
	}
	// The resolver learns of the departure from the connection's close,
	// a moment after the client has given up; a turn that frees in that
	// moment could still go to the request. The test frees it after.
	h.eventually("the resolver sees the second client leave", func() bool { return h.r.pacer.Users(web) == 1 })
	up.gate <- struct{}{}
	if r := <-first; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("first request: status %d err %v", r.status, r.err)
	}
	probe(t, h)
	if _, _, started := up.state(); len(started) != 2 || started[0] != "/first" || started[1] != "/probe" {
		t.Fatalf("target saw %v; want /first and /probe: the departed request must never be forwarded", started)
	}
	h.eventually("the pace is forgotten", func() bool { return h.r.pacer.Size() == 0 })
}

// postCtx sends a POST with body on c under ctx.
func postCtx(c *http.Client, ctx context.Context, url, body string) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: string(b), err: err}
}
