//go:build linux

package ports

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// keepAliveListenConfig sets the client keepalive on each listening socket
// instead of on each accepted one. Linux copies a listener's SO_KEEPALIVE
// and its TCP_KEEPIDLE/INTVL/CNT to every connection it accepts, and starts
// the keepalive timer of the new connection, so the four setsockopt calls
// net would make per accepted connection are made once per port. That is
// four system calls fewer per request: a client of a resolver gets a new
// connection for every request, because forwarded answers carry
// Connection: close.
func keepAliveListenConfig(keepAlive time.Duration) net.ListenConfig {
	// Negative: net leaves accepted sockets as they are, which are as the
	// listener is.
	lc := net.ListenConfig{KeepAlive: -1}
	if keepAlive <= 0 {
		return lc
	}
	secs := int(max((keepAlive+time.Second-1)/time.Second, 1))
	lc.Control = func(_, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) {
			for _, o := range []struct{ level, opt, value int }{
				{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
				{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs},
				{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs},
				{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, KeepAliveProbes},
			} {
				if err == nil {
					err = unix.SetsockoptInt(int(fd), o.level, o.opt, o.value)
				}
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}
	return lc
}
