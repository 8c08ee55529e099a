package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on an OS thread that has joined the network namespace at
// path. Sockets fn creates belong to that namespace for their whole life, and
// files under /proc/sys/net that fn opens are that namespace's.
func inNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread stays locked, and so is discarded with this goroutine,
		// unless it is back in its own namespace.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("join network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leave network namespace %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// NodeDialer opens connections from inside the node's network namespace, as a
// host-network pod would: ClusterIPs, pod IPs and the node's own loopback
// services are all reachable, and cluster DNS names resolve through the
// cluster's CoreDNS. Nothing it dials can leave the cluster's addresses,
// because the namespace has no route anywhere else.
type NodeDialer struct {
	// NetNSPath is the node namespace's bind mount.
	NetNSPath string
	// DNS is the kube-dns Service's ClusterIP.
	DNS netip.Addr
}

// NodeDialer returns a dialer into this cluster's node namespace.
func (c Config) NodeDialer() *NodeDialer {
	return &NodeDialer{NetNSPath: c.NetNSPath(), DNS: c.DNSServiceIP}
}

// DialContext dials addr (host:port; the host may be a cluster DNS name) from
// the node's network namespace. It fits http.Transport.DialContext,
// grpc.WithContextDialer and websocket.Dialer.NetDialContext.
func (d *NodeDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, perr := netip.ParseAddr(host); perr != nil {
		ips, err := d.Resolver().LookupHost(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s in the cluster: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("resolve %s in the cluster: no address", host)
		}
		addr = net.JoinHostPort(ips[0], port)
	}
	var conn net.Conn
	err = inNetNS(d.NetNSPath, func() error {
		var derr error
		conn, derr = (&net.Dialer{}).DialContext(ctx, network, addr)
		return derr
	})
	return conn, err
}

// Resolver resolves names through the cluster's CoreDNS, asked from inside the
// node's namespace. Use fully qualified names (svc.ns.svc.cluster.local.):
// the machine's own search domains do not apply in the cluster.
func (d *NodeDialer) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var conn net.Conn
			err := inNetNS(d.NetNSPath, func() error {
				var derr error
				conn, derr = (&net.Dialer{}).DialContext(ctx, network, netip.AddrPortFrom(d.DNS, 53).String())
				return derr
			})
			return conn, err
		},
	}
}
