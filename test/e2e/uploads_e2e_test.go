//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestLargeUploadsAtZero: a 50 MB POST on a keep-alive client and a 100 MB
// upload over plain TCP, both started at zero, are held with backpressure
// (the resolver keeps at most its 64 KiB read-ahead bound of each in
// memory), wake the target, and arrive whole: the demo app answers the
// POST with its body's SHA-256, and echoes the TCP bytes, whose SHA-256
// the client compares with what it sent. Before, both were refused at the
// bound (503, and a reset connection).
func TestLargeUploadsAtZero(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := sleepyDemoApp(t, e, idle)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	// Awake once woken, so that the uploads are not cut by a sleep.
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var postErr, tcpErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		body := make([]byte, 50<<20)
		_, _ = rand.Read(body)
		start := time.Now()
		postErr = postWithBody(ctx, e.keepAliveClient(4*time.Minute), httpURL(ip, DemoHTTPPort), body)
		t.Logf("50 MB POST answered after %s", time.Since(start).Round(time.Millisecond))
	}()
	go func() {
		defer wg.Done()
		start := time.Now()
		tcpErr = e.tcpUpload(ctx, ip, 100<<20)
		t.Logf("100 MB TCP upload echoed after %s", time.Since(start).Round(time.Millisecond))
	}()
	wg.Wait()
	if postErr != nil {
		t.Errorf("50 MB POST at zero: %v", postErr)
	}
	if tcpErr != nil {
		t.Errorf("100 MB TCP upload at zero: %v", tcpErr)
	}
}

// tcpUpload sends size bytes of text to the demo app's TCP echo port,
// half-closes, and checks that the echo has the same length and SHA-256.
// Text, because the app writes the first bytes it reads to its ledger.
func (e *Env) tcpUpload(ctx context.Context, ip string, size int64) error {
	conn, err := e.Dialer.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(DemoTCPPort)))
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	sent := sha256.New()
	sendErr := make(chan error, 1)
	go func() {
		src := io.TeeReader(io.LimitReader(hexStream{}, size), sent)
		_, err := io.Copy(conn, src)
		if cw, ok := conn.(interface{ CloseWrite() error }); err == nil && ok {
			err = cw.CloseWrite()
		}
		sendErr <- err
	}()
	got := sha256.New()
	n, err := io.Copy(got, conn)
	if serr := <-sendErr; serr != nil {
		return fmt.Errorf("send: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("read the echo: %w (%d bytes)", err, n)
	}
	if n != size || hex.EncodeToString(got.Sum(nil)) != hex.EncodeToString(sent.Sum(nil)) {
		return fmt.Errorf("echoed %d bytes, sha256 %x; sent %d, sha256 %x", n, got.Sum(nil), size, sent.Sum(nil))
	}
	return nil
}

// hexStream reads random bytes as hex text.
type hexStream struct{}

func (hexStream) Read(p []byte) (int, error) {
	if len(p) < 2 {
		copy(p, "0")
		return len(p), nil
	}
	raw := make([]byte, len(p)/2)
	_, _ = rand.Read(raw)
	return hex.Encode(p, raw), nil
}
