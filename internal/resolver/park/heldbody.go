package park

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"elasti.dev/elasti/internal/resolver/hold"
)

// HeldBody reads an HTTP/1.x request body ahead, into a bounded buffer,
// while the request is held, and then replays it to the upstream.
//
// Reading is what lets a held request be watched. net/http notices that an
// HTTP/1.x client left only by reading its connection, and it starts that
// background read only once the handler has read the body to its end. So:
//   - a body that ends within the bound is read to its end, after which
//     net/http cancels the request's context when the client leaves;
//   - a client that leaves mid-body makes the read fail;
//   - a body still going at the bound is reported as ErrReadAheadFull:
//     reading on would take unbounded memory, and not reading would leave a
//     departure unseen, so the request is not held on.
//
// Once the hold lets the request through, HeldBody is the body the proxy
// sends: first what was read ahead, then the rest, which the read-ahead
// goroutine keeps fetching until the body ends or the bound is reached, after
// which the proxy reads the original body directly. At most limit+1 bytes
// are ever buffered, plus one read buffer of at most heldBodyChunk.
type HeldBody struct {
	src   io.ReadCloser
	limit int

	mu   sync.Mutex
	cond sync.Cond
	buf  []byte // read ahead, not yet handed on: buf[off:]
	off  int
	// reading says the read-ahead goroutine may still add to buf; once it
	// is false, src is the consumer's alone.
	reading bool
	// err is how src ended (io.EOF included); nil while it may yield more.
	err error
	// held says the hold is still on: reaching the bound then ends the
	// hold instead of handing src over.
	held   bool
	closed bool
	// ended tells the hold, once, why it must end early.
	ended chan error
}

// heldBodyChunk is the largest single read of the read-ahead goroutine.
const heldBodyChunk = 16 << 10

// ReadAhead starts reading src ahead, at most limit bytes at a time.
func ReadAhead(src io.ReadCloser, limit int, contentLength int64) *HeldBody {
	b := &HeldBody{src: src, limit: limit, reading: true, held: true, ended: make(chan error, 1)}
	b.cond.L = &b.mu
	chunk := min(limit, heldBodyChunk)
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
		// room may reach 0 with the body complete but its EOF not yet
		// seen, so one byte past the bound is read: only a body that
		// really goes on beyond it counts as full.
		room := b.limit - (len(b.buf) - b.off)
		if b.closed || room < 0 {
			if !b.closed && b.held {
				b.ended <- hold.ErrReadAheadFull
			}
			b.reading = false
			b.cond.Broadcast()
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()

		n, err := b.src.Read(scratch[:min(len(scratch), room+1)])

		b.mu.Lock()
		b.buf = append(b.buf, scratch[:n]...)
		if err != nil {
			b.err = err
			b.reading = false
			if !errors.Is(err, io.EOF) && b.held && !b.closed {
				b.ended <- fmt.Errorf("%w: reading the request body: %w", hold.ErrClientGone, err)
			}
		}
		b.cond.Broadcast()
		b.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Watch is the hold's view of the read-ahead (a hold.Watch).
func (b *HeldBody) Watch() <-chan error { return b.ended }

// Release ends the hold: from now on reaching the bound hands src over to
// the consumer. It returns hold.ErrClientGone if the body had already
// failed, which can race with the hold's release.
func (b *HeldBody) Release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
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
			b.buf, b.off = b.buf[:0], 0
		}
		b.mu.Unlock()
		return n, nil
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	// The bound was reached after the release: src is ours alone now.
	b.mu.Unlock()
	return b.src.Read(p)
}

// Close stops the read-ahead and wakes a waiting Read. The original body
// is net/http's to close, after the handler returns.
func (b *HeldBody) Close() error {
	b.Abandon()
	return nil
}
