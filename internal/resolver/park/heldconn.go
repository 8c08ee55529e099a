package park

import (
	"fmt"
	"net"
	"time"

	"elasti.dev/elasti/internal/resolver/hold"
)

// HeldConn watches a TCP client while its connection is held. It reads
// for the whole hold, into a buffer bounded by limit, because reading is
// the only way to see a client leave: EOF or an error before the release
// means the client is gone. A half-close looks exactly like a close on the
// wire, so it counts as gone too. A client that sends more than limit while
// held can no longer be watched, and its connection is not held on.
type HeldConn struct {
	net.Conn
	limit int
	// ended delivers hold.ErrClientGone or hold.ErrReadAheadFull to the
	// hold, once.
	ended chan error
	// done is closed when the watching reads stopped; pending and err are
	// the watcher's until then.
	done    chan struct{}
	pending []byte
	err     error
}

// WatchHeld prepares to watch c. Its Watch method is the hold's Watch, so
// a connection that goes through at once is never watched.
func WatchHeld(c net.Conn, limit int) *HeldConn {
	return &HeldConn{Conn: c, limit: limit, ended: make(chan error, 1)}
}

// Watch starts the watching reads (a hold.Watch).
func (h *HeldConn) Watch() <-chan error {
	h.done = make(chan struct{})
	go h.run()
	return h.ended
}

func (h *HeldConn) run() {
	defer close(h.done)
	buf := make([]byte, 0, min(h.limit+1, 4<<10))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > h.limit {
				h.err = hold.ErrReadAheadFull
				h.ended <- h.err
				return
			}
			// Grow to at most one byte past the bound: reaching it means
			// the client really sent more than limit.
			grown := make([]byte, len(buf), min(2*cap(buf), h.limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := h.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h.pending = buf
		if err != nil {
			if !IsTimeout(err) {
				// EOF (close or half-close) or a reset.
				h.err = fmt.Errorf("%w: %w", hold.ErrClientGone, err)
				h.ended <- h.err
			}
			// A timeout is StopWatching interrupting the read.
			return
		}
	}
}

// StopWatching ends the watching reads and returns what they read, and why
// they ended early if they did (ErrClientGone, ErrReadAheadFull). It also
// catches a client that left just as the hold let it through. Afterwards
// the connection is the caller's alone.
func (h *HeldConn) StopWatching() (pending []byte, err error) {
	if h.done == nil {
		return nil, nil
	}
	_ = h.SetReadDeadline(time.Unix(1, 0))
	<-h.done
	_ = h.SetReadDeadline(time.Time{})
	return h.pending, h.err
}
