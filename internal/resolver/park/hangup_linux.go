//go:build linux

package park

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"elasti.dev/elasti/internal/resolver/hold"
)

// hangupWatcher sees held clients leave, for all of them at once: one
// epoll set, separate from the Go runtime's, and one goroutine waiting on
// it, instead of a goroutine blocked in a read per held client. It watches
// the socket's state only, never its bytes: a hangup, a reset or a
// half-close ends the hold as a client that left, whether or not bytes the
// resolver has not read are waiting (the rest of a body held with
// backpressure, a pipelined request, a stray CRLF), and bytes that arrive
// end nothing. Each connection reports once (EPOLLONESHOT).
//
// The goroutine never blocks in epoll_wait: the set's own descriptor is
// non-blocking and waited on by the Go runtime's poller, as a socket is. A
// thread blocked in the system call would keep its P until the runtime's
// monitor took it back, up to 10 ms later, which stalls every goroutine
// when GOMAXPROCS is 1.
type hangupWatcher struct {
	epfd int
	set  syscall.RawConn

	mu      sync.Mutex
	next    int32
	watches map[int32]func(error)
}

var sharedHangups struct {
	once sync.Once
	w    *hangupWatcher
}

// watchHangup starts watching c for its client leaving, and calls left
// with a hold.ErrClientGone, at most once, when it does; left must not block.
// stop ends the watch and must be called before c is handed on or closed.
// ok is false when c cannot be watched this way (not a socket, or no
// epoll); the caller then reads instead.
func watchHangup(c net.Conn, left func(error)) (stop func(), ok bool) {
	sharedHangups.once.Do(func() {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
			return
		}
		// Non-blocking, the descriptor goes to the runtime's poller.
		set, err := os.NewFile(uintptr(fd), "elasti-hangups").SyscallConn()
		if err != nil {
			return
		}
		sharedHangups.w = &hangupWatcher{epfd: fd, set: set, watches: map[int32]func(error){}}
		go sharedHangups.w.run()
	})
	if sharedHangups.w == nil {
		return nil, false
	}
	return sharedHangups.w.watch(c, left)
}

func (w *hangupWatcher) watch(c net.Conn, left func(error)) (func(), bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	w.mu.Lock()
	for {
		// Ids wrap after 2^31 watches; one still in use is skipped.
		w.next++
		if _, used := w.watches[w.next]; !used {
			break
		}
	}
	id := w.next
	w.watches[id] = left
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		delete(w.watches, id)
		w.mu.Unlock()
	}
	var ctlErr error
	err = rc.Control(func(fd uintptr) {
		// A connection already closed by its client reports so at once.
		// Not EPOLLIN: readable bytes are not a departure. EPOLLHUP and
		// EPOLLERR are always reported.
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: id}
		ctlErr = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || ctlErr != nil {
		forget()
		return nil, false
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			forget()
			_ = rc.Control(func(fd uintptr) {
				_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
			})
		})
	}
	return stop, true
}

// run delivers the events of the epoll set for the life of the process.
func (w *hangupWatcher) run() {
	events := make([]unix.EpollEvent, 256)
	for {
		var n int
		var err error
		rerr := w.set.Read(func(fd uintptr) bool {
			for {
				n, err = unix.EpollWait(int(fd), events, 0)
				if err != unix.EINTR {
					break
				}
			}
			// Nothing ready: the poller waits until something is.
			return n > 0 || err != nil
		})
		if rerr != nil || err != nil {
			// Nothing else can fail with this set and buffer; if it did,
			// watched clients would be seen leaving at their release
			// instead.
			return
		}
		w.mu.Lock()
		for _, ev := range events[:n] {
			left, ok := w.watches[ev.Fd]
			if !ok {
				continue // stopped meanwhile
			}
			delete(w.watches, ev.Fd)
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				left(fmt.Errorf("%w: connection closed (epoll events %#x)", hold.ErrClientGone, ev.Events))
			}
		}
		w.mu.Unlock()
	}
}

// probeOf returns a probe of c's socket that says, without waiting,
// whether bytes wait unread in the kernel and whether the peer has hung up,
// reset or half-closed it; nil if c is not a socket.
func probeOf(c net.Conn) func() (readable, left bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() (readable, left bool) {
		_ = rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
			if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
				left = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
				readable = fds[0].Revents&unix.POLLIN != 0
			}
		})
		return readable, left
	}
}
