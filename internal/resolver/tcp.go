package resolver

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
)

// heldConn watches a TCP client while its connection is held. It reads at
// most one chunk: that tells a client that gave up (EOF or error before any
// byte) from one that sent its request and perhaps half-closed (bytes, maybe
// followed by EOF), without reading more than the resolver has to keep.
type heldConn struct {
	net.Conn
	gone    chan struct{} // closed when the client left before sending anything
	read    chan struct{} // closed when the watching read returned
	pending []byte
	eof     bool
}

func watchHeld(c net.Conn) *heldConn {
	h := &heldConn{Conn: c, gone: make(chan struct{}), read: make(chan struct{})}
	go func() {
		defer close(h.read)
		buf := make([]byte, 32<<10)
		n, err := c.Read(buf)
		h.pending = buf[:n]
		switch {
		case n > 0:
			h.eof = errors.Is(err, io.EOF)
		case isTimeout(err):
			// stopWatching interrupted the read: nothing happened.
		case err != nil:
			close(h.gone)
		}
	}()
	return h
}

// stopWatching ends the watching read and returns what it read. Afterwards
// the connection is the caller's alone.
func (h *heldConn) stopWatching() (pending []byte, eof bool) {
	_ = h.SetReadDeadline(time.Unix(1, 0))
	<-h.read
	_ = h.SetReadDeadline(time.Time{})
	return h.pending, h.eof
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serveTCP holds a TCP connection until its Target has a ready endpoint,
// dials one, and splices the two. A full queue, a hold timeout or a failed
// dial close the client connection: TCP has no way to say more.
func (r *Resolver) serveTCP(c net.Conn, t Target) {
	defer c.Close()
	log := r.opts.Log.WithValues("elastiservice", t.ElastiService.String())
	h := watchHeld(c)
	ctx, cancel := context.WithCancel(r.stopCtx)
	defer cancel()
	go func() {
		select {
		case <-h.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	deadline, err := r.hold(ctx, t)
	pending, eof := h.stopWatching()
	if err != nil {
		if errors.Is(err, ErrStopping) {
			r.metrics.reject(t.ElastiService, ReasonDraining)
		}
		log.V(1).Info("TCP connection not forwarded", "reason", err.Error())
		return
	}
	dctx, dcancel := context.WithDeadline(ctx, deadline)
	up, err := r.dialer.dial(dctx, t)
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
	if eof {
		closeWrite(up)
	}
	splice(c, up, eof)
}

// splice copies both ways until both directions are done, passing each
// half-close on to the other side. If one direction fails, both connections
// are closed so the other copy ends too.
func splice(client, up net.Conn, clientDone bool) {
	errc := make(chan error, 1)
	go func() {
		if clientDone {
			errc <- nil
			return
		}
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
