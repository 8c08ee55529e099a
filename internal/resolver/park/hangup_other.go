//go:build !linux

package park

import "net"

// watchHangup has no shared watcher outside Linux: parked requests are
// watched by a read of their own (parked.watch).
func watchHangup(net.Conn, func(error)) (stop func(), ok bool) { return nil, false }

// probeOf cannot tell outside Linux.
func probeOf(net.Conn) func() (readable, left bool) { return nil }
