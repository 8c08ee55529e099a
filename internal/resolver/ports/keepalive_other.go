//go:build !linux

package ports

import (
	"net"
	"time"
)

// keepAliveListenConfig sets the client keepalive on each accepted
// connection, through net; on Linux it is set once on the listener.
func keepAliveListenConfig(keepAlive time.Duration) net.ListenConfig {
	lc := net.ListenConfig{KeepAlive: keepAlive}
	if keepAlive > 0 {
		lc.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: keepAlive, Interval: keepAlive, Count: KeepAliveProbes}
	}
	return lc
}
