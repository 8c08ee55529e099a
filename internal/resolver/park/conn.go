package resolver

import (
	"io"
	"net"
	"sync"
)

// connListener is a net.Listener fed by the resolver's own accept loops: the
// pre-opened ports accept, look up the port's Target, and hand HTTP
// connections to the one L7 http.Server through it.
type connListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newConnListener() *connListener {
	return &connListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// push hands c to the server; after Close it closes c instead.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		_ = c.Close()
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero} }

// mappedConn is an accepted connection with what the port map said about its
// port. An unmapped connection (mapped false) only ever gets a 404.
type mappedConn struct {
	net.Conn
	target Target
	port   int32
	mapped bool
	// r replays bytes read before the server got the connection: peeked
	// to tell HTTP from other traffic, or a parked request's head (park.go);
	// nil if none.
	r io.Reader
	// resume is a parked request's hold outcome, for the first request read
	// from the connection; nil if it was not parked.
	resume *resumption
}

func (c *mappedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection when the underlying one can, so
// that the HTTP server's graceful close and the TCP splice keep working.
func (c *mappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
