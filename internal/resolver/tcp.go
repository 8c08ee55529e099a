package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// heldConn watches a TCP client while its connection is held. It reads
// for the whole hold, into a buffer bounded by limit, because reading is
// the only way to see a client leave: EOF or an error before the release
// means the client is gone. A half-close looks exactly like a close on the
// wire, so it counts as gone too. A client that sends more than limit while
// held can no longer be watched, and its connection is not held on.
type heldConn struct {
	net.Conn
	limit int
	// ended delivers ErrClientGone or ErrReadAheadFull to the hold, once.
	ended chan error
	// done is closed when the watching reads stopped; pending and err are
	// the watcher's until then.
	done    chan struct{}
	pending []byte
	err     error
}

// watchHeld starts watching c. Its watch method is the hold's watchFunc, so
// a connection that goes through at once is never watched.
func watchHeld(c net.Conn, limit int) *heldConn {
	return &heldConn{Conn: c, limit: limit, ended: make(chan error, 1)}
}

func (h *heldConn) watch() <-chan error {
	h.done = make(chan struct{})
	go h.run()
	return h.ended
}

func (h *heldConn) run() {
	defer close(h.done)
	buf := make([]byte, 0, min(h.limit+1, 4<<10))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > h.limit {
				h.err = ErrReadAheadFull
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
			if !isTimeout(err) {
				// EOF (close or half-close) or a reset.
				h.err = fmt.Errorf("%w: %w", ErrClientGone, err)
				h.ended <- h.err
			}
			// A timeout is stopWatching interrupting the read.
			return
		}
	}
}

// stopWatching ends the watching reads and returns what they read, and why
// they ended early if they did (ErrClientGone, ErrReadAheadFull). It also
// catches a client that left just as the hold let it through. Afterwards
// the connection is the caller's alone.
func (h *heldConn) stopWatching() (pending []byte, err error) {
	if h.done == nil {
		return nil, nil
	}
	_ = h.SetReadDeadline(time.Unix(1, 0))
	<-h.done
	_ = h.SetReadDeadline(time.Time{})
	return h.pending, h.err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serveTCP holds a TCP connection until its Target (or, with
// spec.proxy.fallback, the fallback Service) has a ready endpoint, dials
// one, replays what was read while holding, and splices the two. A
// full queue, a hold timeout, a client that left or sent more than the
// read-ahead bound, or a failed dial close the client connection: TCP has
// no way to say more.
func (r *Resolver) serveTCP(c net.Conn, t Target) {
	defer c.Close()
	log := r.opts.Log.WithValues("elastiservice", t.ElastiService.String())
	h := watchHeld(c, r.opts.ReadAheadBytes)
	end, err := r.hold(r.stopCtx, t, h.watch)
	pending, werr := h.stopWatching()
	if err == nil && errors.Is(werr, ErrClientGone) {
		// Gone as the hold let it through: still never forwarded.
		err = werr
	}
	if err != nil {
		if errors.Is(err, ErrStopping) {
			r.metrics.reject(t.ElastiService, ReasonDraining)
		}
		log.V(1).Info("TCP connection not forwarded", "reason", err.Error())
		return
	}
	dctx, dcancel := context.WithDeadline(r.stopCtx, end.deadline)
	up, err := r.dialer.dial(dctx, end.dest, "")
	dcancel()
	if err != nil {
		r.metrics.reject(t.ElastiService, ReasonDialFailed)
		log.Error(err, "TCP forwarding failed")
		return
	}
	defer up.Close()
	r.metrics.Forwarded.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name).Inc()
	if len(pending) > 0 {
		if _, err := up.Write(pending); err != nil {
			log.V(1).Info("write held bytes upstream failed", "err", err.Error())
			return
		}
	}
	splice(c, up)
}

// splice copies both ways until both directions are done, passing each
// half-close on to the other side. If one direction fails, both connections
// are closed so the other copy ends too.
func splice(client, up net.Conn) {
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(up, client)
		closeWrite(up)
		errc <- err
	}()
	_, err := io.Copy(client, up)
	closeWrite(client)
	if err != nil {
		_ = client.Close()
		_ = up.Close()
	}
	if err := <-errc; err != nil {
		_ = client.Close()
		_ = up.Close()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
