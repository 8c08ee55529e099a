package testenv

import (
	"net"
	"testing"
)

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment
// ago, for a server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
