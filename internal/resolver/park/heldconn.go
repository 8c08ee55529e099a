package park

import (
	"fmt"
	"net"
	"sync"
	"time"

	"elasti.dev/elasti/internal/resolver/hold"
)

// HeldConn watches a TCP client while its connection is held, and reads
// what it sends ahead, at most limit bytes. The bound is a memory bound:
// past it nothing more is read, the rest waits in the kernel's socket
// buffers, and TCP's flow control makes the client wait on its send. The
// client's departure is seen on its socket (WatchSocket), whatever waits
// unread; where the socket cannot be watched so, only the reads see it,
// up to the bound. A half-close looks exactly like a close on the wire, so
// it counts as gone too.
type HeldConn struct {
	net.Conn
	limit int
	// ended delivers hold.ErrClientGone to the hold, once.
	ended chan error
	// stopSocket ends the socket watch; nil if there is none.
	stopSocket func()
	// done is closed when the reads stopped; pending is theirs until then.
	done    chan struct{}
	pending []byte
	// full says the reads stopped at the bound, with more perhaps waiting.
	full bool

	mu   sync.Mutex
	gone error
}

// WatchHeld prepares to watch c. Its Watch method is the hold's Watch, so
// a connection that goes through at once is never watched.
func WatchHeld(c net.Conn, limit int) *HeldConn {
	return &HeldConn{Conn: c, limit: max(limit, 1), ended: make(chan error, 1)}
}

// Watch starts the socket watch and the reads ahead (a hold.Watch).
func (h *HeldConn) Watch() <-chan error {
	if stop, ok := WatchSocket(h.Conn, h.leave); ok {
		h.stopSocket = stop
	}
	h.done = make(chan struct{})
	go h.run()
	return h.ended
}

// leave records that the client left, and tells the hold once.
func (h *HeldConn) leave(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone == nil {
		h.gone = err
		h.ended <- err
	}
}

func (h *HeldConn) run() {
	defer close(h.done)
	buf := make([]byte, 0, min(h.limit, 4<<10))
	for len(buf) < h.limit {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), h.limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := h.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h.pending = buf
		if err != nil {
			if !IsTimeout(err) {
				// EOF (close or half-close) or a reset.
				h.leave(fmt.Errorf("%w: %w", hold.ErrClientGone, err))
			}
			// A timeout is StopWatching interrupting the read.
			return
		}
	}
	// At the bound: the rest waits on the client's side.
	h.full = true
}

// StopWatching ends the watch and the reads and returns what they read,
// and hold.ErrClientGone if the client left, which also catches a client
// that left just as the hold let it through. Afterwards the connection is
// the caller's alone.
func (h *HeldConn) StopWatching() (pending []byte, err error) {
	if h.done == nil {
		return nil, nil
	}
	if h.stopSocket != nil {
		h.stopSocket()
	}
	_ = h.SetReadDeadline(time.Unix(1, 0))
	<-h.done
	_ = h.SetReadDeadline(time.Time{})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending, h.gone
}

// MaxBacklog bounds what is read of a held connection's backlog at its
// release (drain). A client that has closed its connection can have at
// most its socket's send buffer still on its way (4 MiB at most with
// Linux's default tcp_wmem); one that has sent more since the release
// is there.
const MaxBacklog = 8 << 20

// BacklogSettle is how long DrainBacklog waits, once nothing waits on the
// socket, for more of the backlog: each read opens the receive window, and
// the client's kernel answers with the next bytes (and a close queued
// behind them) at once on an idle machine, but a few milliseconds later on
// a busy one, whose network processing the kernel defers (a close was then
// missed and the connection dialed, in the unit tier beside the end-to-end
// tier).
const BacklogSettle = 50 * time.Millisecond

// DrainBacklog, after StopWatching let the connection through, reads what
// the client sent past the bound while held, until none has waited for
// BacklogSettle or MaxBacklog is read, and returns it after what was read ahead: all of it
// goes to the pod before the splice. A close queued behind that backlog
// (the kernel sends it after the bytes) is seen by then, and the
// connection is not forwarded (hold.ErrClientGone): the same rule as while
// held. Without a backlog it returns what was read ahead, unless the
// socket shows a close already; where the socket cannot be probed, it
// returns what was read ahead.
func (h *HeldConn) DrainBacklog() ([]byte, error) {
	probe := probeOf(socketOf(h.Conn))
	if probe == nil {
		return h.pending, nil
	}
	if !h.full {
		// No backlog; but a close the socket watch had not reported yet
		// when the release came is on the socket already (seen on a busy
		// machine: the client closed, the pod turned ready a moment
		// later, and the connection was dialed).
		if _, left := probe(); left {
			return nil, fmt.Errorf("%w: the connection closed as it was let through", hold.ErrClientGone)
		}
		return h.pending, nil
	}
	buf := make([]byte, 32<<10)
	var quiet time.Time // since when nothing has waited on the socket
	for len(h.pending) < MaxBacklog {
		readable, left := probe()
		if left {
			return nil, fmt.Errorf("%w: the connection closed behind the bytes it sent while held", hold.ErrClientGone)
		}
		if !readable {
			if quiet.IsZero() {
				quiet = time.Now()
			}
			if time.Since(quiet) >= BacklogSettle {
				return h.pending, nil
			}
			time.Sleep(time.Millisecond)
			continue
		}
		quiet = time.Time{}
		n, err := h.Read(buf)
		h.pending = append(h.pending, buf[:n]...)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", hold.ErrClientGone, err)
		}
	}
	return h.pending, nil
}
