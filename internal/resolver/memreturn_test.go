package resolver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"elasti.dev/elasti/internal/resolver/hold"
)

func TestMemoryReturner(t *testing.T) {
	es := types.NamespacedName{Namespace: "ns", Name: "a"}
	other := types.NamespacedName{Namespace: "ns", Name: "b"}
	const after, atPeak = 10 * time.Second, 3
	setup := func() (*hold.Queue, *clocktesting.FakeClock, *int) {
		var q *hold.Queue
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		frees := 0
		m := newMemoryReturner(clk, after, atPeak, func() bool { return q.Total() == 0 }, func() { frees++ }, func() {})
		q = hold.NewQueue(0, m.drained)
		return q, clk, &frees
	}
	// hold enters n slots, spread over two ElastiServices (the peak is
	// the replica's, not one Service's), and returns their leaves.
	hold := func(t *testing.T, q *hold.Queue, n int) []func() {
		t.Helper()
		var leaves []func()
		for i := range n {
			key := es
			if i%2 == 1 {
				key = other
			}
			leave, err := q.Enter(key, 100)
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, leave)
		}
		return leaves
	}
	drain := func(leaves []func()) {
		for _, leave := range leaves {
			leave()
			leave() // twice is harmless, and must not count twice
		}
	}

	t.Run("a drain from the peak returns the memory once the queue stayed empty", func(t *testing.T) {
		q, clk, frees := setup()
		drain(hold(t, q, atPeak))
		clk.Step(after - time.Millisecond)
		if *frees != 0 {
			t.Fatalf("returned %d times before the queue was empty for %s", *frees, after)
		}
		clk.Step(time.Millisecond)
		if *frees != 1 {
			t.Fatalf("returned %d times, want 1", *frees)
		}
		clk.Step(10 * after)
		if *frees != 1 {
			t.Fatalf("returned %d times after a single drain, want 1", *frees)
		}
	})
	t.Run("a drain below the peak leaves it to the runtime", func(t *testing.T) {
		q, clk, frees := setup()
		drain(hold(t, q, atPeak-1))
		clk.Step(2 * after)
		if *frees != 0 {
			t.Fatalf("returned %d times after a peak of %d, want 0", *frees, atPeak-1)
		}
	})
	t.Run("the peak counts what is held at once, not in total", func(t *testing.T) {
		q, clk, frees := setup()
		for range 2 * atPeak {
			drain(hold(t, q, 1))
		}
		clk.Step(2 * after)
		if *frees != 0 {
			t.Fatalf("returned %d times after holds of one at a time, want 0", *frees)
		}
	})
	t.Run("a hold before the return is due puts it off to its own drain", func(t *testing.T) {
		q, clk, frees := setup()
		drain(hold(t, q, atPeak))
		clk.Step(after / 2)
		small := hold(t, q, 1)
		clk.Step(after)
		if *frees != 0 {
			t.Fatalf("returned %d times with a request held, want 0", *frees)
		}
		drain(small) // a small drain, after a large one not yet returned
		clk.Step(after - time.Millisecond)
		if *frees != 0 {
			t.Fatalf("returned %d times before the queue was empty for %s again", *frees, after)
		}
		clk.Step(time.Millisecond)
		if *frees != 1 {
			t.Fatalf("returned %d times, want 1", *frees)
		}
	})
}

// TestMemoryReturnAfterBurst holds requests on a real resolver, releases
// them and sees the return counted once their hold queue has drained, and
// the pod connections the release left idle closed by it.
func TestMemoryReturnAfterBurst(t *testing.T) {
	const n = 4
	h := newHarness(t, 1, func(o *Options) { o.Memory.ReturnAtPeak, o.Memory.ReturnAfter = n, 2*time.Second })
	var podConns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			podConns.Add(1)
		case http.StateClosed, http.StateHijacked:
			podConns.Add(-1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", h.addr(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("POST /held HTTP/1.1\r\nHost: websvc\r\nContent-Length: 5\r\n\r\nhello")); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	h.eventually("every request is held", func() bool { return h.held("web") == n })
	if got := testutil.ToFloat64(h.r.metrics.MemoryReturns); got != 0 {
		t.Fatalf("memory returned %v times while requests are held", got)
	}
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	for _, c := range conns {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	if got := testutil.ToFloat64(h.r.metrics.MemoryReturns); got != 0 || podConns.Load() == 0 {
		t.Fatalf("before the return: %v returns, %d pod connections; want 0 and the release's connections kept alive", got, podConns.Load())
	}
	h.eventually("the memory is returned once", func() bool { return testutil.ToFloat64(h.r.metrics.MemoryReturns) == 1 })
	h.eventually("the idle pod connections are closed", func() bool { return podConns.Load() == 0 })
}
