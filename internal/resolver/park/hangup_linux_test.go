//go:build linux

package park

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"elasti.dev/elasti/internal/resolver/hold"
)

// The shared hangup watcher waits in the Go runtime's poller, not in a
// thread blocked in epoll_wait on its set: with one P such a thread would
// hold it until the runtime's monitor took it back. Every thread of the
// process is read from /proc while a client is watched, and none may be in
// a system call with the set's descriptor as its first argument; the
// watcher must still see the client leave.
func TestHangupWatcherBlocksNoThread(t *testing.T) {
	server, client := tcpPair(t)
	gone := make(chan error, 1)
	stop, ok := watchHangup(server, func(err error) { gone <- err })
	if !ok {
		t.Fatal("the socket could not be watched")
	}
	defer stop()
	epfd := sharedHangups.w.epfd

	// Give a blocking watcher time to enter its system call.
	time.Sleep(100 * time.Millisecond)
	tasks, err := filepath.Glob("/proc/self/task/*/syscall")
	if err != nil || len(tasks) == 0 {
		t.Skipf("no /proc/self/task/*/syscall: %v", err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 || fields[0] == "running" || fields[0] == "-1" {
			continue
		}
		if arg, err := strconv.ParseUint(strings.TrimPrefix(fields[1], "0x"), 16, 64); err == nil && arg == uint64(epfd) {
			t.Errorf("%s: a thread is in system call %s on the hangup set (fd %d)", f, fields[0], epfd)
		}
	}

	client.Close()
	select {
	case err := <-gone:
		if !errors.Is(err, hold.ErrClientGone) {
			t.Fatalf("the watcher reported %v; want ErrClientGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not see the client leave")
	}
}

// TestDrainSeesACloseTheWatchHadNotReported: a held TCP client with nothing
// past the read-ahead bound that closed just before its release is gone at
// the release, although no watch has told the hold (here none ran at all,
// as when the release comes before the watch is scheduled), and is never
// dialed. One still there goes through with nothing to drain.
func TestDrainSeesACloseTheWatchHadNotReported(t *testing.T) {
	server, client := tcpPair(t)
	h := WatchHeld(server, 1024)
	if _, err := client.Write([]byte("INSERT INTO charges VALUES (1234)")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	probe := probeOf(socketOf(server))
	deadline := time.Now().Add(10 * time.Second)
	for _, left := probe(); !left; _, left = probe() {
		if time.Now().After(deadline) {
			t.Fatal("the close never reached the server's socket")
		}
		time.Sleep(time.Millisecond)
	}
	if pending, err := h.DrainBacklog(); !errors.Is(err, hold.ErrClientGone) {
		t.Fatalf("DrainBacklog after the client closed = %q, %v; want hold.ErrClientGone", pending, err)
	}

	server, _ = tcpPair(t)
	if pending, err := WatchHeld(server, 1024).DrainBacklog(); err != nil || len(pending) != 0 {
		t.Fatalf("DrainBacklog with the client there = %q, %v; want nothing and no error", pending, err)
	}
}
