package park

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"elasti.dev/elasti/internal/resolver/route"
)

// Arrives says whether new connections to t are read before the server,
// to park their first request (OnArrival): parking on arrival is on and t
// cannot serve now.
func (p *Parker) Arrives(t route.Target) bool {
	return p.c.Parking == ParkOnArrival && !p.c.Hold.ServableNow(t)
}

// OnArrival reads the first request of c, a new connection on rt's port,
// whose target cannot serve it, and parks it if it is one that would reach
// the hold (parksOnArrival). Anything else goes to the server with the
// bytes read replayed, so that it meets exactly what it would have; so does
// a head still being read when the ports close (drain). A head that does
// not arrive within the server's ReadHeaderTimeout closes the connection,
// as the server does.
func (p *Parker) OnArrival(c net.Conn, rt route.Route) {
	// Counted from the start, so that a drain waits for a head being read
	// before it shuts the server down.
	done := p.c.Track()
	head, req, err := p.readHead(c)
	switch {
	case err != nil && IsTimeout(err) && p.c.PortsClosed.Err() == nil:
		_ = c.Close()
		done()
		return
	case err == nil && p.parksOnArrival(rt, req):
		p.onArrival.Add(1)
		pk := &parked{route: rt, conn: c, rest: c, head: head, done: done, left: make(chan struct{})}
		// A goroutine of its own: this one's stack grew with the parse.
		go p.holdParked(pk)
		return
	}
	mc := &Conn{Conn: c, Route: rt}
	if len(head) > 0 {
		mc.Replay = io.MultiReader(bytes.NewReader(head), c)
	}
	p.c.Server.Push(mc)
	done()
}

// parksOnArrival says whether req, read before the server, is a request the
// server would take to a handler and that would reach the hold there: the
// checks of the handlers before the hold (Config.Answered), and those
// http.Server makes of a request it has parsed, are made here again.
func (p *Parker) parksOnArrival(rt route.Route, req *http.Request) bool {
	if !headParks(req) || p.c.Answered(rt, req) {
		return false
	}
	return !p.c.Hold.ServableNow(rt.Target)
}

// headParks says whether req, whatever its target, may be parked on
// arrival: a request the server takes to its handlers, and that
// requireMapping and the hold's parking would let through.
func headParks(req *http.Request) bool {
	return parkable(req) && req.Method != http.MethodConnect && req.Header.Get("Expect") == "" && serverTakes(req)
}

// serverTakes says whether http.Server would pass req, as http.ReadRequest
// parsed it, to its handler rather than answer it itself: 400 for a bad
// head, 200 for OPTIONS * (its general options handler). ReadRequest drops
// the Host field, so a request in absolute form, where the server still
// wants one, is left to the server.
func serverTakes(req *http.Request) bool {
	if req.URL.Host != "" || (req.ProtoAtLeast(1, 1) && req.Host == "") {
		return false
	}
	if req.Method == http.MethodOptions && req.RequestURI == "*" {
		return false
	}
	if req.Host != "" && !httpguts.ValidHostHeader(req.Host) {
		return false
	}
	for name, values := range req.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return false
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// readHead reads c's first request head as the server would, within its
// ReadHeaderTimeout and header size limit, or until the ports close. It
// returns every byte it read: the head and whatever the client sent after
// it.
func (p *Parker) readHead(c net.Conn) (read []byte, req *http.Request, err error) {
	// Socket deadlines are wall-clock by nature.
	_ = c.SetReadDeadline(time.Now().Add(p.c.ReadHeaderTimeout))
	cut := make(chan struct{})
	stop := context.AfterFunc(p.c.PortsClosed, func() {
		_ = c.SetReadDeadline(time.Unix(1, 0))
		close(cut)
	})
	defer func() {
		if !stop() {
			<-cut // so that the deadline is not set again after it is cleared
		}
		_ = c.SetReadDeadline(time.Time{})
	}()
	// The first bytes are waited for before a reader is taken from the
	// pool: in a burst, thousands of connections wait at once.
	rec := &headRecorder{conn: c, limit: p.c.MaxHeaderBytes + 4096, read: make([]byte, 0, 512)}
	if err := rec.fill(); err != nil {
		return rec.read, nil, err
	}
	br := headReaders.Get().(*bufio.Reader)
	br.Reset(rec)
	req, err = http.ReadRequest(br)
	br.Reset(nil)
	headReaders.Put(br)
	return rec.read, req, err
}

// headRecorder reads conn for http.ReadRequest and keeps every byte it
// read, up to limit (the server's: its MaxHeaderBytes, plus its slack).
type headRecorder struct {
	conn  net.Conn
	limit int
	read  []byte
	// served is how much of read the reader has had.
	served int
}

var errHeadTooLarge = errors.New("request head over the size limit")

func (h *headRecorder) Read(p []byte) (int, error) {
	if h.served == len(h.read) {
		if err := h.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, h.read[h.served:])
	h.served += n
	return n, nil
}

// fill reads more of conn into read.
func (h *headRecorder) fill() error {
	if len(h.read) >= h.limit {
		return errHeadTooLarge
	}
	if len(h.read) == cap(h.read) {
		h.read = slices.Grow(h.read, len(h.read))
	}
	n, err := h.conn.Read(h.read[len(h.read):min(cap(h.read), h.limit)])
	h.read = h.read[:len(h.read)+n]
	if n > 0 {
		// A socket's error comes again on the next read.
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

var headReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// IsTimeout says whether err is a timeout, such as a read deadline that
// another goroutine set to interrupt the read.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
