//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// loadGen sends GETs at a fixed rate, each on a new connection from the
// node's network (so every request takes kube-proxy's current route), until
// stopped or until max requests have been sent. It never sends more than
// limit: the load is bounded whatever happens to the test.
type loadGen struct {
	sent, ok atomic.Int64
	mu       sync.Mutex
	failures []string
	slowest  time.Duration
	stop     chan struct{}
	done     sync.WaitGroup
}

func startLoad(e *Env, url string, rps int, limit int64) *loadGen {
	g := &loadGen{stop: make(chan struct{})}
	c := e.LongHTTPClient()
	tick := time.NewTicker(time.Second / time.Duration(rps))
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		defer tick.Stop()
		for g.sent.Load() < limit {
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
			g.sent.Add(1)
			g.done.Add(1)
			go func() {
				defer g.done.Done()
				t0 := time.Now()
				_, err := GetWith(context.Background(), c, url, "")
				d := time.Since(t0)
				g.mu.Lock()
				defer g.mu.Unlock()
				if err != nil {
					g.failures = append(g.failures, fmt.Sprintf("%s: %v", t0.Format("15:04:05.000"), err))
					return
				}
				g.ok.Add(1)
				g.slowest = max(g.slowest, d)
			}()
		}
	}()
	return g
}

// finish stops sending and waits for the requests in flight.
func (g *loadGen) finish() {
	close(g.stop)
	g.done.Wait()
}
