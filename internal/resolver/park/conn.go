package park

import (
	"io"
	"net"
	"sync"

	"elasti.dev/elasti/internal/resolver/route"
)

// ConnListener is a net.Listener fed by the resolver's own accept loops: the
// pre-opened ports accept, look up the port's Target, and hand HTTP
// connections to the one L7 http.Server through it; parked requests come
// back to the server through it too.
type ConnListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// NewConnListener returns an open ConnListener.
func NewConnListener() *ConnListener {
	return &ConnListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Push hands c to the server; after Close it closes c instead.
func (l *ConnListener) Push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		_ = c.Close()
		return false
	}
}

// Accept returns the next connection handed over.
func (l *ConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close makes Accept fail and Push close what it is handed.
func (l *ConnListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr is a placeholder: the connections come from many ports.
func (l *ConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero} }

// Conn is an accepted connection with what the port map said about its
// port (Route). An unmapped connection (Route.Mapped false) only ever gets
// a 404.
type Conn struct {
	net.Conn
	Route route.Route
	// Replay replays bytes read before the server got the connection:
	// peeked to tell HTTP from other traffic, or a parked request's head;
	// nil if none.
	Replay io.Reader
	// resume is a parked request's hold outcome, for the first request read
	// from the connection; nil if it was not parked.
	resume *resumption
}

func (c *Conn) Read(p []byte) (int, error) {
	if c.Replay != nil {
		return c.Replay.Read(p)
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection when the underlying one can, so
// that the HTTP server's graceful close and the TCP splice keep working.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
