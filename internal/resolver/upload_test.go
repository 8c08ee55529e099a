package resolver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Uploads held at zero: the read-ahead bound is a memory bound, not a size
// limit. Past it the resolver stops reading, the client waits on its send
// (backpressure), and after the wake the whole upload reaches the pod.

// hashingUpstream answers each request with the length and SHA-256 of the
// body it received, and counts the bodies it received whole.
func hashingUpstream(t *testing.T) (addr string, whole *atomic.Int64) {
	t.Helper()
	whole = &atomic.Int64{}
	srv := startH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.New()
		n, err := io.Copy(sum, r.Body)
		if err != nil {
			return // cut short: not executed
		}
		whole.Add(1)
		fmt.Fprintf(w, "%d %x", n, sum.Sum(nil))
	}))
	return srv.Listener.Addr().String(), whole
}

// upload is a body of size pseudo-random bytes that counts what was read
// of it, that is, what the client has sent so far.
type upload struct {
	src  io.Reader
	sent atomic.Int64
	sum  string
}

func newUpload(size int64, seed uint64) *upload {
	h := sha256.New()
	_, _ = io.Copy(h, io.LimitReader(rand.NewChaCha8(seedOf(seed)), size))
	return &upload{src: io.LimitReader(rand.NewChaCha8(seedOf(seed)), size), sum: hex.EncodeToString(h.Sum(nil))}
}

func seedOf(s uint64) (seed [32]byte) {
	for i := range 8 {
		seed[i] = byte(s >> (8 * i))
	}
	return seed
}

func (u *upload) Read(p []byte) (int, error) {
	n, err := u.src.Read(p)
	u.sent.Add(int64(n))
	return n, err
}

// settled waits until the client's sending stops moving: it sent what the
// resolver and the sockets took, and waits on the rest. It returns what
// was sent.
func (u *upload) settled(h *harness) int64 {
	h.t.Helper()
	var sent int64
	h.eventually("the client's sending settles", func() bool {
		s := u.sent.Load()
		if s != sent {
			sent = s
			return false
		}
		time.Sleep(200 * time.Millisecond)
		return u.sent.Load() == s
	})
	return sent
}

// send sends req with c and puts the answer on done.
func send(c *http.Client, req *http.Request, done chan<- result) {
	resp, err := c.Do(req)
	if err != nil {
		done <- result{err: err}
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	done <- result{status: resp.StatusCode, body: string(b), err: err}
}

// heapInUse is the process's live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

func TestHeldUploadArrivesWhole(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name    string
		size    int64
		chunked bool
		// expect is the client's wait for 100 Continue: none, long (it
		// waits for the whole hold) or short (it gives up waiting and
		// sends the body anyway while held).
		expect time.Duration
	}{
		{"1 MB with a length", mb, false, 0},
		{"1 MB chunked", mb, true, 0},
		{"1 MB with a length, waiting for 100 Continue", mb, false, time.Minute},
		{"1 MB chunked, waiting for 100 Continue", mb, true, time.Minute},
		{"1 MB with a length, tired of waiting for 100 Continue", mb, false, 200 * time.Millisecond},
		{"100 MB with a length", 100 * mb, false, 0},
		{"100 MB chunked", 100 * mb, true, 0},
		{"100 MB with a length, waiting for 100 Continue", 100 * mb, false, time.Minute},
		{"100 MB chunked, tired of waiting for 100 Continue", 100 * mb, true, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, nil)
			upAddr, whole := hashingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			before := heapInUse()

			body := newUpload(tc.size, uint64(tc.size)+uint64(tc.expect))
			req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", body)
			req.ContentLength = tc.size
			if tc.chunked {
				req.ContentLength = -1 // the Transport sends it chunked
				req.Body = io.NopCloser(body)
			}
			tr := &http.Transport{ExpectContinueTimeout: tc.expect}
			if tc.expect > 0 {
				req.Header.Set("Expect", "100-continue")
			}
			done := make(chan result, 1)
			go send(&http.Client{Transport: tr, Timeout: waitTimeout}, req, done)
			h.eventually("the upload is held", func() bool { return h.held("web") == 1 })

			sent := body.settled(h)
			if tc.expect == time.Minute && sent > 0 {
				t.Errorf("the client sent %d bytes while waiting for 100 Continue: the resolver sent it one before the wake", sent)
			}
			if tc.size > 10*mb && sent >= tc.size {
				t.Errorf("the client sent all %d bytes while held: no backpressure", sent)
			}
			if grew := heapInUse() - before; grew > 8*mb {
				t.Errorf("the heap grew by %d bytes while %d of the upload were sent and held; want within a few read buffers of the %d-byte bound", grew, sent, DefaultReadAheadBytes)
			}
			t.Logf("held with %d of %d bytes sent", sent, tc.size)

			h.ready("websvc", "websvc-abc", "http", upAddr)
			r := <-done
			if want := fmt.Sprintf("%d %s", tc.size, body.sum); r.err != nil || r.status != http.StatusOK || r.body != want {
				t.Fatalf("status %d body %q err %v; want 200 %q", r.status, r.body, r.err, want)
			}
			if n := whole.Load(); n != 1 {
				t.Errorf("the upstream received %d whole bodies, want 1", n)
			}
		})
	}
}

func TestHeldTCPUploadArrivesWhole(t *testing.T) {
	const size = 100 << 20
	h := newHarness(t, 1, nil)
	// The pod answers with the length and SHA-256 of what it got, once the
	// client half-closes.
	pod := tcpPod(t, func(c net.Conn) {
		sum := sha256.New()
		n, err := io.Copy(sum, c)
		if err == nil {
			fmt.Fprintf(c, "%d %x", n, sum.Sum(nil))
		}
	})
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))
	before := heapInUse()

	body := newUpload(size, 7)
	c := dialRaw(t, h.addr(0))
	sendErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, body)
		if err == nil {
			err = c.CloseWrite()
		}
		sendErr <- err
	}()
	h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
	sent := body.settled(h)
	if sent >= size {
		t.Errorf("the client sent all %d bytes while held: no backpressure", sent)
	}
	if grew := heapInUse() - before; grew > 8<<20 {
		t.Errorf("the heap grew by %d bytes while held; want within a few read buffers of the bound", grew)
	}
	t.Logf("held with %d of %d bytes sent", sent, size)

	h.ready("dbsvc", "dbsvc-abc", "postgres", pod)
	if err := <-sendErr; err != nil {
		t.Fatalf("sending: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	got, err := io.ReadAll(c)
	if want := fmt.Sprintf("%d %s", size, body.sum); err != nil || string(got) != want {
		t.Fatalf("the pod answered %q, %v; want %q", got, err, want)
	}
}

// TestHeldH2CUploadWithinItsWindow: an h2c stream held at zero can send
// only its flow-control window, the read-ahead bound, before the wake;
// then it arrives whole.
func TestHeldH2CUploadWithinItsWindow(t *testing.T) {
	const size = 4 << 20
	h := newHarness(t, 1, nil)
	upAddr, whole := hashingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "h2c", ""))
	body := newUpload(size, 11)
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", io.NopCloser(body))
	req.ContentLength = size
	done := make(chan result, 1)
	go send(h2cClient(), req, done)
	h.eventually("the upload is held", func() bool { return h.held("web") == 1 })
	sent := body.settled(h)
	// The client's Transport reads one buffer of its body ahead, past what
	// the stream's window let it send. That buffer is 512 KiB once the
	// server's SETTINGS have arrived, smaller before (seen: 80 KiB sent in
	// all, and 512 KiB).
	if sent > DefaultReadAheadBytes+512<<10 {
		t.Errorf("the h2c client sent %d bytes on a held stream; want at most its %d-byte window and one 512 KiB buffer of its Transport", sent, DefaultReadAheadBytes)
	}
	t.Logf("held with %d of %d bytes sent", sent, size)
	h.ready("websvc", "websvc-abc", "h2c", upAddr)
	r := <-done
	if want := fmt.Sprintf("%d %s", size, body.sum); r.err != nil || r.status != http.StatusOK || r.body != want {
		t.Fatalf("status %d body %q err %v; want 200 %q", r.status, r.body, r.err, want)
	}
	if n := whole.Load(); n != 1 {
		t.Errorf("the upstream received %d whole bodies, want 1", n)
	}
}

// TestHeldBytesBudget: with a read-ahead budget of two bodies' worth for
// the whole resolver, three held HTTP/1.1 uploads and two held TCP
// connections, each sending far more, together read no more than the
// budget ahead; the holds past it are still held, not refused, with their
// bytes waiting on the client's side. After the wake every upload arrives
// whole, the TCP bytes in order, and the budget is all given back.
func TestHeldBytesBudget(t *testing.T) {
	const readAhead = 64 << 10
	// Well past what loopback's socket buffers take, so that backpressure
	// shows.
	const size = 32 << 20
	h := newHarness(t, 2, func(o *Options) {
		o.Hold.ReadAheadBytes = readAhead
		o.Hold.MaxHeldBytes = 2 * readAhead
	})
	upAddr, whole := hashingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.mapPort("db", "dbsvc", nil, h.proxyPort(1, "postgres", ""))
	var bodies []*upload
	done := make(chan result, 3)
	for i := range 3 {
		body := newUpload(size, uint64(i)+7)
		bodies = append(bodies, body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", body)
		req.ContentLength = size
		go send(h.client(), req, done)
	}
	tcp := newTCPRecorder(t)
	var conns []net.Conn
	for range 2 {
		c := dialRaw(t, h.addr(1))
		conns = append(conns, c)
		go func() { _, _ = c.Write(bytes.Repeat([]byte("q"), size)) }()
	}
	h.eventually("every upload and connection is held", func() bool { return h.held("web") == 3 && h.held("db") == 2 })
	for _, b := range bodies {
		b.settled(h)
	}
	if got := h.r.heldBytes.Taken(); got > 2*readAhead {
		t.Errorf("held reads took %d bytes of the budget, more than its %d", got, 2*readAhead)
	}
	if got := h.r.heldBytes.Taken(); got < 2*readAhead {
		t.Errorf("held reads took %d bytes of the budget, want all %d (five holds for two shares)", got, 2*readAhead)
	}
	for i, b := range bodies {
		if s := b.sent.Load(); s >= size {
			t.Errorf("upload %d sent all %d bytes while held: no backpressure", i, s)
		}
	}

	h.ready("websvc", "websvc-abc", "http", upAddr)
	for range 3 {
		r := <-done
		if r.err != nil || r.status != http.StatusOK || !strings.HasPrefix(r.body, fmt.Sprintf("%d ", size)) {
			t.Errorf("upload: status %d body %q err %v; want 200 with the whole body", r.status, r.body, r.err)
		}
	}
	if n := whole.Load(); n != 3 {
		t.Errorf("the upstream received %d whole bodies, want 3", n)
	}
	h.ready("dbsvc", "dbsvc-abc", "postgres", tcp.addr())
	for i, c := range conns {
		buf := make([]byte, 64<<10)
		_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
		if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'q' || buf[len(buf)-1] != 'q' {
			t.Errorf("TCP connection %d: echo %v, want its held bytes back", i, err)
		}
	}
	// Given back once the holds are over, while the connections live on.
	h.eventually("the budget is given back", func() bool { return h.r.heldBytes.Taken() == 0 })
	for _, c := range conns {
		c.Close()
	}
}

// TestHeldH2CStreamsTakeWholeShares: an h2c stream's window is granted
// when it opens, so a held stream with a body takes a whole share of the
// read-ahead budget, and with two shares left a third held upload is
// refused with 503 and Retry-After (counted as resolver_full) instead of
// held past the budget. The two held ones arrive whole after the wake, and
// the budget is given back.
func TestHeldH2CStreamsTakeWholeShares(t *testing.T) {
	const readAhead = 64 << 10
	const size = 1 << 20
	h := newHarness(t, 1, func(o *Options) {
		o.Hold.ReadAheadBytes = readAhead
		o.Hold.MaxHeldBytes = 2 * readAhead
	})
	upAddr, whole := hashingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "h2c", ""))
	done := make(chan result, 3)
	c := h2cClient()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", io.NopCloser(newUpload(size, uint64(i)+3)))
		req.ContentLength = size
		go send(c, req, done)
	}
	h.eventually("two uploads are held", func() bool { return h.held("web") == 2 })
	if got := h.r.heldBytes.Taken(); got != 2*readAhead {
		t.Errorf("two held h2c streams took %d bytes of the budget, want their two windows, %d", got, 2*readAhead)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", io.NopCloser(newUpload(size, 9)))
	req.ContentLength = size
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third held upload got %d (Retry-After %q); want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := h.r.heldBytes.Taken(); got > 2*readAhead {
		t.Errorf("the budget is exceeded: %d bytes taken of %d", got, 2*readAhead)
	}
	if n := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "web", ReasonResolverFull)); n != 1 {
		t.Errorf("rejected{reason=%q} = %v, want 1", ReasonResolverFull, n)
	}
	h.ready("websvc", "websvc-abc", "h2c", upAddr)
	for range 2 {
		if r := <-done; r.err != nil || r.status != http.StatusOK || !strings.HasPrefix(r.body, fmt.Sprintf("%d ", size)) {
			t.Errorf("held upload: status %d body %q err %v; want 200 with the whole body", r.status, r.body, r.err)
		}
	}
	if n := whole.Load(); n != 2 {
		t.Errorf("the upstream received %d whole bodies, want 2", n)
	}
	h.eventually("the budget is given back", func() bool { return h.r.heldBytes.Taken() == 0 })
}

// TestHeldTCPGivesItsShareBackAtRelease: a held TCP connection gives its
// share of the read-ahead budget back once its held bytes are with the pod,
// not when it closes, hours later perhaps.
func TestHeldTCPGivesItsShareBackAtRelease(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Hold.MaxHeldBytes = DefaultReadAheadBytes })
	tcp := newTCPRecorder(t)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))
	c := dialRaw(t, h.addr(0))
	h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
	if _, err := c.Write([]byte("SELECT 1")); err != nil {
		t.Fatal(err)
	}
	h.eventually("its share is taken", func() bool { return h.r.heldBytes.Taken() > 0 })
	h.ready("dbsvc", "dbsvc-abc", "postgres", tcp.addr())
	buf := make([]byte, len("SELECT 1"))
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "SELECT 1" {
		t.Fatalf("echo %q, %v", buf, err)
	}
	h.eventually("its share is given back while it stays open", func() bool { return h.r.heldBytes.Taken() == 0 })
}
