package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Listeners are the pre-opened port range. Opening every port at start-up,
// rather than when a mapping appears, means a port the operator allocates is
// already listening on every resolver replica by the time traffic arrives.
type Listeners struct {
	listeners []*net.TCPListener
	open      atomic.Int64
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Open binds every port from start to end on address. It fails,
// closing what it opened, if any port cannot be bound. Every accepted
// connection gets TCP keepalives every keepAlive (none when negative): a
// held connection is silent for as long as the cold start lasts, and the
// probes keep NATs and load balancers from dropping it. KeepAliveProbes
// unanswered probes end it.
func Open(address string, start, end int, keepAlive time.Duration) (*Listeners, error) {
	ls := &Listeners{listeners: make([]*net.TCPListener, 0, end-start+1)}
	lc := keepAliveListenConfig(keepAlive)
	for port := start; port <= end; port++ {
		l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
		if err != nil {
			ls.Close()
			return nil, fmt.Errorf("open resolver port %d of %d-%d: %w", port, start, end, err)
		}
		ls.listeners = append(ls.listeners, l.(*net.TCPListener))
	}
	ls.open.Store(int64(len(ls.listeners)))
	return ls, nil
}

// Serve runs one accept loop per listener and calls handle in a new
// goroutine for each connection. track is called before that goroutine
// starts, so a caller that waits for the accept loops to end and then for its
// tracked connections misses none.
func (ls *Listeners) Serve(log logr.Logger, track func() (done func()), handle func(c net.Conn, port int32)) {
	for _, l := range ls.listeners {
		port := int32(l.Addr().(*net.TCPAddr).Port)
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			defer ls.open.Add(-1)
			var backoff time.Duration
			for {
				c, err := l.Accept()
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					// Out of file descriptors and the like: back off
					// instead of spinning, as net/http does.
					backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
					log.Error(err, "accept failed", "port", port, "retryIn", backoff)
					time.Sleep(backoff)
					continue
				}
				backoff = 0
				done := track()
				go func() {
					defer done()
					handle(c, port)
				}()
			}
		}()
	}
}

// OpenCount is how many listeners are accepting.
func (ls *Listeners) OpenCount() int { return int(ls.open.Load()) }

// Count is how many ports were opened.
func (ls *Listeners) Count() int { return len(ls.listeners) }

// Close stops accepting on every port and waits for the accept loops.
func (ls *Listeners) Close() {
	ls.closeOnce.Do(func() {
		for _, l := range ls.listeners {
			_ = l.Close()
		}
	})
	ls.wg.Wait()
}

// Ports lists the bound port numbers.
func (ls *Listeners) Ports() []int32 {
	out := make([]int32, 0, len(ls.listeners))
	for _, l := range ls.listeners {
		out = append(out, int32(l.Addr().(*net.TCPAddr).Port))
	}
	return out
}

// KeepAliveProbes is how many unanswered keepalive probes close a client
// connection.
const KeepAliveProbes = 4
