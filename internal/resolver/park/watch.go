package park

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"elasti.dev/elasti/internal/resolver/hold"
)

// Every held client is watched the same way, on its socket (hangupWatcher,
// hangup_linux.go): a request parked without its handler, one held in its
// handler with or without a body, and a TCP connection. What was read of
// it, and what waits unread, does not matter.

// WatchSocket starts watching c's socket for its client leaving (a
// hangup, a reset or a half-close), and calls left with a
// hold.ErrClientGone, at most once, when it does; left must not block.
// stop ends the watch and must be called before c is handed on or closed.
// ok is false when c cannot be watched so (not a socket, or not Linux).
func WatchSocket(c net.Conn, left func(error)) (stop func(), ok bool) {
	return watchHangup(socketOf(c), left)
}

// WatchClient is WatchSocket for the connection a request came in on, as
// the server's ConnContext recorded it.
func WatchClient(ctx context.Context, left func(error)) (stop func(), ok bool) {
	c, _ := ctx.Value(socketKey{}).(net.Conn)
	if c == nil {
		return nil, false
	}
	return WatchSocket(c, left)
}

type socketKey struct{}

// socketOf unwraps c to the connection that owns the socket.
func socketOf(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case syscall.Conn:
			return c
		case *Conn:
			c = w.Conn
		default:
			return c
		}
	}
}

// ClientSocket returns a probe of the connection a request came in on: it
// says, without waiting, whether bytes wait unread in the kernel, and
// whether the client has hung up, reset or half-closed the connection. It
// is nil when that cannot be told (not a socket, or not Linux).
func ClientSocket(ctx context.Context) func() (readable, left bool) {
	c, _ := ctx.Value(socketKey{}).(net.Conn)
	if c == nil {
		return nil
	}
	return probeOf(socketOf(c))
}

// EndGuard is the body of a request that was held, on its way to the pod.
// A client that leaves while its body waits unread past the bound cannot
// be seen leaving then: its close queues behind the bytes the resolver
// does not read, and the kernel sends it with the last of them. So while
// the guard forwards the backlog the hold left on the socket, it keeps the
// newest byte back until it knows more follows, or that the client is
// still there once the backlog is drained (nothing left to read in the
// kernel, and no close). A client seen gone by then gives the pod a body
// cut short, never a whole request. From there on the body streams as is.
type EndGuard struct {
	src   io.ReadCloser
	probe func() (readable, left bool)
	// last is the byte kept back, if have.
	last byte
	have bool
	// live: the backlog is drained and the client was there; no guard.
	live bool
	err  error
}

// GuardEnd wraps src, probing the client's socket with probe
// (ClientSocket); with a nil probe it is src as is.
func GuardEnd(src io.ReadCloser, probe func() (readable, left bool)) io.ReadCloser {
	if probe == nil {
		return src
	}
	return &EndGuard{src: src, probe: probe}
}

func (g *EndGuard) Read(p []byte) (int, error) {
	switch {
	case g.err != nil:
		return 0, g.err
	case g.live:
		return g.src.Read(p)
	case len(p) == 0:
		return 0, nil
	}
	off := 0
	if g.have {
		p[0], off = g.last, 1
		if readable, left := g.probe(); left {
			return 0, g.gone()
		} else if !readable {
			// The backlog is drained and the client is there: what it
			// sends from now on is live.
			g.have, g.live = false, true
			return 1, nil
		}
	}
	n, err := g.src.Read(p[off:])
	n += off
	switch {
	case err == nil:
		if n == 0 {
			return 0, nil
		}
		// Keep the newest byte back: it may be the last.
		g.last, g.have = p[n-1], true
		return n - 1, nil
	case errors.Is(err, io.EOF):
		if _, left := g.probe(); left {
			return 0, g.gone()
		}
		g.have = false
		g.err = io.EOF
		return n, io.EOF
	default:
		g.have = false
		g.err = err
		return 0, err
	}
}

// gone ends the body without its kept byte: the pod gets it cut short.
func (g *EndGuard) gone() error {
	g.have = false
	g.err = fmt.Errorf("%w: the connection closed before its request body was forwarded", hold.ErrClientGone)
	return g.err
}

func (g *EndGuard) Close() error { return g.src.Close() }
