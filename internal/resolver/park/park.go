package resolver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Parking a held request.
//
// A request held in its net/http handler keeps everything net/http gave its
// connection: the serve loop's goroutine and deep stack, the background
// read's goroutine, a 4 KiB reader, a 4 KiB writer and a 2 KiB response
// writer, and the parsed request. That is about 30 KiB per held request
// (docs/benchmarks.md#burst), and the first burst after a night at zero
// holds thousands of them at once.
//
// A bodiless HTTP/1.x request does not need any of it while it waits. The
// handler writes the request's head back into bytes, takes the connection
// from net/http (Hijack) and returns; what is left is the connection, those
// bytes, the goroutine that waits for the hold's end and a watch of the
// client (hangup_linux.go: one epoll set for all). When the hold ends, the
// connection goes back to the same http.Server with the head in front of
// its unread bytes, and the hold's outcome attached: the server reads the
// same request again, and holdUntilReady acts on the outcome instead of
// holding a second time. From there on the request is forwarded, or
// refused, exactly as one held in its handler, and the connection lives on
// as any other (keep-alive, pipelining).
//
// Requests with a body stay in their handler: their body must be read ahead
// to see the client leave (heldbody.go). HTTP/2 streams cannot be taken from
// their connection, and upgrades stay where net/http's handling of them is.
//
// Taking a connection from net/http still leaves behind what net/http gave
// it, as garbage: a burst at zero allocates it thousands of times over
// before a collection, and that sets the resolver's peak. So the first
// request of a new connection to a target that cannot serve is read by the
// resolver itself, before net/http (parkOnArrival). Only a request the
// server would take to a handler, and that would reach the hold there, is
// parked that way; anything else, as well as the bytes read, goes to the
// server as if it had read them first. Later requests on a kept-alive
// connection are parked from their handler.

// Parking says where a held bodiless HTTP/1.x request waits.
type Parking int

const (
	// ParkOnArrival parks the first request of a new connection before
	// net/http reads it, and later ones from their handler.
	ParkOnArrival Parking = iota
	// ParkFromHandler parks requests from their handler only.
	ParkFromHandler
	// HoldInHandler parks nothing: every request is held in its handler,
	// as requests with a body always are.
	HoldInHandler
)

// resumption is a parked request's hold outcome, waiting for the first
// request read from its connection once that is back with the server.
type resumption struct {
	taken atomic.Bool
	end   holdEnd
	err   error
	// turn ends the release pacer's turn the request waited for while
	// parked; nil if it needs none.
	turn func()
	// settled ends the parked request's count (Resolver.parked) once the
	// server has it in hand: reading it (http.StateActive), or done with
	// the connection. From then on the server's Shutdown waits for it.
	settled func()
}

// connState is the server's ConnState hook: a resumed connection stops
// counting as parked once the server has left StateNew with it, and one
// that closes before its request was read gives back its turn.
func connState(c net.Conn, st http.ConnState) {
	mc, ok := c.(*mappedConn)
	if !ok || mc.resume == nil || st == http.StateNew {
		return
	}
	if st == http.StateClosed || st == http.StateHijacked {
		mc.resume.abandon()
	}
	mc.resume.settled()
}

// take returns the outcome once; later requests on the connection, and
// a nil resumption, get false. turn is the pacer's turn, if one is held.
func (s *resumption) take() (end holdEnd, turn func(), err error, ok bool) {
	if s == nil || !s.taken.CompareAndSwap(false, true) {
		return holdEnd{}, nil, nil, false
	}
	return s.end, s.turn, s.err, true
}

// abandon gives back the turn of an outcome nobody will take.
func (s *resumption) abandon() {
	if s.taken.CompareAndSwap(false, true) && s.turn != nil {
		s.turn()
	}
}

// parks says whether req, if it has to wait, is parked rather than held in
// its handler: HTTP/1.x without a body (net/http gives every bodiless
// request NoBody) and without an upgrade.
func (r *Resolver) parks(req *http.Request) bool {
	return r.opts.Parking != HoldInHandler && parkable(req)
}

func parkable(req *http.Request) bool {
	return req.ProtoMajor == 1 && req.Body == http.NoBody && req.Header.Get("Upgrade") == ""
}

// parkOnArrival reads the first request of c, a new connection to t, which
// cannot serve it, and parks it if it is one that would reach the hold
// (parksOnArrival). Anything else goes to the server with the bytes read
// replayed, so that it meets exactly what it would have; so does a head
// still being read when the ports close (drain). A head that does not
// arrive within the server's ReadHeaderTimeout closes the connection, as
// the server does.
func (r *Resolver) parkOnArrival(c net.Conn, t Target, port int32) {
	// Counted from the start, so that a drain waits for a head being read
	// before it shuts the server down.
	done := r.parked.add()
	head, req, err := r.readHead(c)
	switch {
	case err != nil && isTimeout(err) && r.portsClosed.Err() == nil:
		_ = c.Close()
		done()
		return
	case err == nil && r.parksOnArrival(t, req):
		r.parkedOnArrival.Add(1)
		p := &parked{route: route{target: t, port: port, mapped: true}, conn: c, rest: c, head: head, done: done, left: make(chan struct{})}
		// A goroutine of its own: this one's stack grew with the parse.
		go r.holdParked(p)
		return
	}
	mc := &mappedConn{Conn: c, target: t, port: port, mapped: true}
	if len(head) > 0 {
		mc.r = io.MultiReader(bytes.NewReader(head), c)
	}
	r.httpConns.push(mc)
	done()
}

// parksOnArrival says whether req, read before the server, is a request the
// server would take to a handler and that would reach the hold there: the
// checks of the handlers before holdUntilReady, and those http.Server makes
// of a request it has parsed, are made here again.
func (r *Resolver) parksOnArrival(t Target, req *http.Request) bool {
	switch {
	case !headParks(req):
		return false
	case t.Static != nil && matchStatic(t.Static.Rules, req, false) != nil:
		return false
	case t.WakingPage != nil && wantsWakingPage(req):
		return false
	}
	return !r.servableNow(t)
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
func (r *Resolver) readHead(c net.Conn) (read []byte, req *http.Request, err error) {
	// Socket deadlines are wall-clock by nature.
	_ = c.SetReadDeadline(time.Now().Add(r.opts.ReadHeaderTimeout))
	cut := make(chan struct{})
	stop := context.AfterFunc(r.portsClosed, func() {
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
	rec := &headRecorder{conn: c, limit: r.opts.MaxHeaderBytes + 4096, read: make([]byte, 0, 512)}
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

// park takes req's connection from net/http and holds the request without
// its handler. It returns false, having changed nothing, when the
// connection cannot be taken; the caller then holds the request itself.
func (r *Resolver) park(w http.ResponseWriter, req *http.Request, rt route) bool {
	head := requestHead(req)
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// Bytes the client sent after the request (a pipelined next one) are
	// in net/http's reader, which is dropped with the rest.
	if n := rw.Reader.Buffered(); n > 0 {
		ahead, _ := rw.Peek(n)
		head = append(head, ahead...)
	}
	raw, rest := conn, io.Reader(conn)
	if m, ok := conn.(*mappedConn); ok {
		raw, rest = m.Conn, m.Conn
		if m.r != nil {
			// A connection that was parked before: what net/http has not
			// read of it yet starts in m.r.
			rest = m.r
		}
	}
	p := &parked{route: rt, conn: raw, rest: rest, head: head, done: r.parked.add(), left: make(chan struct{})}
	go r.holdParked(p)
	return true
}

// parked is a request held without its handler.
type parked struct {
	// route is where the connection came in.
	route route
	// conn is the client's connection; rest reads what follows head on
	// it, which is conn itself unless bytes read before are replayed.
	conn net.Conn
	rest io.Reader
	// head is the request's head, as the client sent it (parked on
	// arrival) or as it could have (written back from the parsed request),
	// followed by whatever the client sent after it.
	head []byte
	// done ends the parked request's count (Resolver.parked), once the
	// server has its connection back in hand (connState) or it is closed:
	// drain waits for the count to reach zero before it shuts the server
	// down, so that parked requests still find it serving when their hold
	// ends, and its Shutdown then waits for them as for any request.
	done func()
	// left is closed when the watch sees the client leave.
	left chan struct{}
	// stop ends the shared watcher's watch (hangup_linux.go); nil if
	// there is none.
	stop func()
	// reading is closed when the watch's own read has returned, where
	// there is no shared watcher; nil until that watch starts.
	reading chan struct{}
}

// watch sees the client leave while its request is parked, as net/http's
// background read does for a request in its handler. On Linux the shared
// watcher does it (hangup_linux.go), with no goroutine per request.
// Elsewhere, and for a connection it cannot watch, a read does: a byte that
// arrives (a pipelined request) ends that watch and is kept, as in net/http;
// the client is there, and the rest of what it sent waits in the socket.
func (p *parked) watch() <-chan error {
	gone := make(chan error, 1)
	// Called at most once, and must not block (hangup_linux.go).
	leave := func(err error) {
		close(p.left)
		gone <- err
	}
	if stop, ok := watchHangup(p.conn, leave); ok {
		p.stop = stop
		return gone
	}
	p.reading = make(chan struct{})
	go func() {
		defer close(p.reading)
		var b [1]byte
		n, err := p.rest.Read(b[:])
		switch {
		case n > 0:
			p.head = append(p.head, b[0])
		case err != nil && !isTimeout(err): // a timeout is stopWatch
			leave(fmt.Errorf("%w: %w", ErrClientGone, err))
		}
	}()
	return gone
}

// stopWatch ends the watch's read and waits for it, so that nothing reads
// the connection once it is handed back.
func (p *parked) stopWatch() {
	if p.stop != nil {
		p.stop()
		return
	}
	if p.reading == nil {
		return
	}
	// Socket deadlines are wall-clock by nature.
	_ = p.conn.SetReadDeadline(time.Unix(1, 0))
	<-p.reading
	_ = p.conn.SetReadDeadline(time.Time{})
}

// holdParked holds a parked request until its hold ends, then gives its
// connection back to the server with the outcome, or closes it if the
// client left. It is the goroutine of a parked request, so the two steps
// are functions of their own: only the first one's frames stay on its
// stack while it waits.
func (r *Resolver) holdParked(p *parked) {
	end, err := r.hold(context.Background(), p.route.target, p.watch)
	r.unpark(p, &end, err)
}

// unpark ends a parked request's hold that ended with end or err.
func (r *Resolver) unpark(p *parked, end *holdEnd, err error) {
	var turn func()
	if err == nil && end.coldStart {
		// The release pacer's turn is waited for here, still parked and
		// watched, so that a burst comes back to the server no faster
		// than it is forwarded: the memory of a request in the server is
		// what parking saves.
		if done, ok := r.pacer.wait(p.left, end.dest.ElastiService); ok {
			turn = done
		} else {
			err = fmt.Errorf("%w: while waiting for its turn", ErrClientGone)
		}
	}
	p.stopWatch()
	if errors.Is(err, ErrClientGone) {
		r.opts.Log.V(1).Info("request abandoned while held", "elastiservice", p.route.target.ElastiService.String(), "reason", err.Error())
		_ = p.conn.Close()
		p.done()
		return
	}
	resume := &resumption{end: *end, err: err, turn: turn, settled: p.done}
	if !r.httpConns.push(&mappedConn{
		Conn:   p.conn,
		target: p.route.target,
		port:   p.route.port,
		mapped: true,
		r:      io.MultiReader(bytes.NewReader(p.head), p.rest),
		resume: resume,
	}) {
		// The server is closed: push closed the connection.
		resume.abandon()
		resume.settled()
	}
}

// requestHead writes req's request line and header fields back into the
// bytes net/http parsed them from, up to the order and case of the header
// names, which carry no meaning. req has no body.
func requestHead(req *http.Request) []byte {
	var b bytes.Buffer
	b.Grow(256)
	fmt.Fprintf(&b, "%s %s HTTP/%d.%d\r\n", req.Method, req.RequestURI, req.ProtoMajor, req.ProtoMinor)
	if req.Host != "" {
		fmt.Fprintf(&b, "Host: %s\r\n", req.Host)
	}
	_ = req.Header.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}
