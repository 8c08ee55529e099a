package park

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"elasti.dev/elasti/internal/resolver/hold"
)

// HeldBody reads an HTTP/1.x request body ahead while the request is held,
// at most limit bytes, and then hands it to the upstream.
//
// The bound is a memory bound, not a size limit. Once limit bytes wait in
// the buffer, the read-ahead stops: the rest stays in the kernel's socket
// buffers and TCP's flow control makes the client wait on its send, as it
// would for a slow server. Nothing is refused for its size. What sees the
// client leave is the watch of its socket (WatchSocket), which does not
// need the bytes read; a read that fails while held (a reset mid-body, a
// malformed chunk) is reported through left too.
//
// Once the hold lets the request through, HeldBody is the body the proxy
// sends: first what was read ahead, then the rest, read from the original
// body directly once the read-ahead goroutine has stopped. At most limit
// bytes are ever buffered, plus one read buffer of at most heldBodyChunk.
type HeldBody struct {
	src   io.ReadCloser
	limit int
	left  func(error)

	mu   sync.Mutex
	cond sync.Cond
	buf  []byte // read ahead, not yet handed on: buf[off:]
	off  int
	// reading says the read-ahead goroutine may still add to buf; once it
	// is false, src is the consumer's alone.
	reading bool
	// err is how src ended (io.EOF included); nil while it may yield more.
	err error
	// held says the hold is still on: the read-ahead goes on until the
	// bound; once released, it stops after the read it is in.
	held   bool
	closed bool
}

// heldBodyChunk is the largest single read of the read-ahead goroutine.
const heldBodyChunk = 16 << 10

// ReadAhead starts reading src ahead, keeping at most limit bytes; left is
// called, at most once and while held, with a hold.ErrClientGone if src
// fails.
func ReadAhead(src io.ReadCloser, limit int, contentLength int64, left func(error)) *HeldBody {
	b := &HeldBody{src: src, limit: max(limit, 1), left: left, reading: true, held: true}
	b.cond.L = &b.mu
	chunk := min(b.limit, heldBodyChunk)
	if contentLength > 0 && contentLength < int64(chunk) {
		// One more byte than declared, so that the read that ends the
		// body can also see its EOF.
		chunk = int(contentLength) + 1
	}
	go b.run(make([]byte, chunk))
	return b
}

func (b *HeldBody) run(scratch []byte) {
	for {
		b.mu.Lock()
		for b.held && !b.closed && len(b.buf)-b.off >= b.limit {
			b.cond.Wait() // full: the client waits on its send
		}
		if b.closed || !b.held {
			b.reading = false
			b.cond.Broadcast()
			b.mu.Unlock()
			return
		}
		room := b.limit - (len(b.buf) - b.off)
		b.mu.Unlock()

		n, err := b.src.Read(scratch[:min(len(scratch), room)])

		b.mu.Lock()
		b.buf = append(b.buf, scratch[:n]...)
		if err != nil {
			b.err = err
			b.reading = false
			if !errors.Is(err, io.EOF) && b.held && !b.closed {
				b.left(fmt.Errorf("%w: reading the request body: %w", hold.ErrClientGone, err))
			}
		}
		b.cond.Broadcast()
		b.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Release ends the hold: the read-ahead stops after the read it is in, and
// the consumer reads on from src. It returns hold.ErrClientGone if the
// body had already failed, which can race with the hold's release.
func (b *HeldBody) Release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	b.cond.Broadcast()
	if b.err != nil && !errors.Is(b.err, io.EOF) {
		return fmt.Errorf("%w: reading the request body: %w", hold.ErrClientGone, b.err)
	}
	return nil
}

// Abandon ends the hold without forwarding: the read-ahead goroutine stops
// after the read it is in, and readers get ErrBodyReadAfterClose.
func (b *HeldBody) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	b.closed = true
	b.cond.Broadcast()
}

// StillReading says whether the read-ahead goroutine is in a read.
func (b *HeldBody) StillReading() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reading
}

// Complete says whether the whole body was read ahead: nothing of it is
// left unread on the connection.
func (b *HeldBody) Complete() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return errors.Is(b.err, io.EOF)
}

// Read hands on what was read ahead, waits for the read-ahead goroutine
// while it may add more, then reads src directly.
func (b *HeldBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	for b.off == len(b.buf) && b.reading && !b.closed {
		b.cond.Wait()
	}
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	case b.off < len(b.buf):
		n := copy(p, b.buf[b.off:])
		b.off += n
		if b.off == len(b.buf) {
			b.buf, b.off = nil, 0
		}
		// Room again: a read-ahead waiting on a full buffer goes on.
		b.cond.Broadcast()
		b.mu.Unlock()
		return n, nil
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	// The read-ahead has stopped: src is ours alone now.
	b.mu.Unlock()
	return b.src.Read(p)
}

// Close stops the read-ahead and wakes a waiting Read. The original body
// is net/http's to close, after the handler returns.
func (b *HeldBody) Close() error {
	b.Abandon()
	return nil
}
