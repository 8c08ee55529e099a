//go:build linux

package resolver

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// acceptedSocket finds, among this process's file descriptors, the socket
// the resolver accepted for client: its local address is client's remote
// one and the other way round. The resolver runs in the test's process, so
// its accepted connections are this process's sockets.
func acceptedSocket(t *testing.T, client net.Conn) int {
	t.Helper()
	local, remote := client.LocalAddr().(*net.TCPAddr), client.RemoteAddr().(*net.TCPAddr)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			continue
		}
		pa, err := syscall.Getpeername(fd)
		if err != nil {
			continue
		}
		s4, ok1 := sa.(*syscall.SockaddrInet4)
		p4, ok2 := pa.(*syscall.SockaddrInet4)
		if ok1 && ok2 && s4.Port == remote.Port && p4.Port == local.Port {
			return fd
		}
	}
	t.Fatalf("no socket of this process is the resolver's end of %s -> %s", local, remote)
	return -1
}

// Held client connections carry TCP keepalives with the configured period,
// so that NATs and load balancers keep them through a long cold start: the
// resolver's own accepted socket of a held HTTP request and of a held TCP
// connection is read with getsockopt. On Linux the options are set on the
// listening sockets and the accepted ones inherit them (keepalive_linux.go).
func TestHeldConnectionsHaveKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		wantOn    bool
		wantSecs  int
	}{
		{"default 30s", 0, true, 30},
		{"--client-keepalive=7s", 7 * time.Second, true, 7},
		{"negative turns it off", -1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2, func(o *Options) { o.Ports.ClientKeepAlive = tc.keepAlive })
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			h.ports.Set(resolvertest.ElastiService("ns", "db", "dbsvc", nil, elastiv1alpha1.ProxyPort{Port: 5432, Protocol: "TCP", ResolverPort: int32(h.base + 1)}))

			httpClient := dialRaw(t, h.addr(0))
			if _, err := httpClient.Write([]byte("GET / HTTP/1.1\r\nHost: websvc\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			tcpClient := dialRaw(t, h.addr(1))
			if _, err := tcpClient.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			h.eventually("both are held", func() bool { return h.held("web") == 1 && h.held("db") == 1 })

			for name, c := range map[string]net.Conn{"HTTP": httpClient, "TCP": tcpClient} {
				fd := acceptedSocket(t, c)
				on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
				if err != nil {
					t.Fatal(err)
				}
				if (on != 0) != tc.wantOn {
					t.Errorf("%s: SO_KEEPALIVE = %d on the held connection, want on=%v", name, on, tc.wantOn)
				}
				if !tc.wantOn {
					continue
				}
				for _, o := range []struct {
					opt   int
					label string
					want  int
				}{
					{unix.TCP_KEEPIDLE, "TCP_KEEPIDLE", tc.wantSecs},
					{unix.TCP_KEEPINTVL, "TCP_KEEPINTVL", tc.wantSecs},
					{unix.TCP_KEEPCNT, "TCP_KEEPCNT", ports.KeepAliveProbes},
				} {
					got, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, o.opt)
					if err != nil {
						t.Fatal(err)
					}
					if got != o.want {
						t.Errorf("%s: %s = %d, want %d", name, o.label, got, o.want)
					}
				}
			}
		})
	}
}
