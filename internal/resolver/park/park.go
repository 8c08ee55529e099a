package park

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/route"
)

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

// Config are what a Parker is built from.
type Config struct {
	Hold  *hold.Hold
	Pacer *hold.Pacer
	// Server takes connections back to the L7 server.
	Server  *ConnListener
	Parking Parking
	// Answered says whether a handler before the hold would answer req
	// itself (a static response, the waking page): such a request is not
	// parked on arrival.
	Answered func(rt route.Route, req *http.Request) bool
	// Track counts a parked request until the returned function is
	// called: the drain waits for none to be left before it shuts the
	// server down.
	Track func() (done func())
	// PortsClosed ends the reading of request heads on arrival once the
	// ports are closed: what is left goes to the server, whose Shutdown
	// knows what to do with a connection that sent nothing yet.
	PortsClosed context.Context
	// ReadHeaderTimeout and MaxHeaderBytes are the L7 server's own, which
	// a head read on arrival meets as well.
	ReadHeaderTimeout time.Duration
	MaxHeaderBytes    int
	Log               logr.Logger
}

// Parker is where a held bodiless HTTP/1.x request waits without its
// handler, and the one way a request's handler enters the hold (Enter).
type Parker struct {
	c Config
	// onArrival counts the requests parked before the server read them
	// (OnArrival); for tests.
	onArrival atomic.Int64
}

// New builds a Parker.
func New(c Config) *Parker { return &Parker{c: c} }

// ParkedOnArrival counts the requests parked before the server read them;
// for tests.
func (p *Parker) ParkedOnArrival() int64 { return p.onArrival.Load() }

// Enter is the one way into the hold for an L7 request: it returns the
// outcome of the hold of a request parked earlier on this connection (the
// first request read from it after its return), or parks req when it must
// wait and can be parked (parked: the connection is not net/http's any
// more, and the handler returns at once), or holds it in its handler,
// watched by watch. rel is meaningful only without an error.
func (p *Parker) Enter(w http.ResponseWriter, req *http.Request, rt route.Route, watch hold.Watch) (rel route.Release, err error, parked bool) {
	if rel, err, ok := resumptionFrom(req.Context()).take(); ok {
		return rel, err, false
	}
	if p.parks(req) {
		// Only a request that must wait is parked.
		rel, passed := p.c.Hold.Passes(rt.Target)
		if passed {
			return rel, nil, false
		}
		if p.park(w, req, rt) {
			return route.Release{}, nil, true
		}
	}
	rel, err = p.c.Hold.Hold(req.Context(), rt.Target, watch)
	return rel, err, false
}

// parks says whether req, if it has to wait, is parked rather than held in
// its handler: HTTP/1.x without a body (net/http gives every bodiless
// request NoBody) and without an upgrade.
func (p *Parker) parks(req *http.Request) bool {
	return p.c.Parking != HoldInHandler && parkable(req)
}

func parkable(req *http.Request) bool {
	return req.ProtoMajor == 1 && req.Body == http.NoBody && req.Header.Get("Upgrade") == ""
}

// park takes req's connection from net/http and holds the request without
// its handler. It returns false, having changed nothing, when the
// connection cannot be taken; the caller then holds the request itself.
func (p *Parker) park(w http.ResponseWriter, req *http.Request, rt route.Route) bool {
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
	if m, ok := conn.(*Conn); ok {
		raw, rest = m.Conn, m.Conn
		if m.Replay != nil {
			// A connection that was parked before: what net/http has not
			// read of it yet starts in m.Replay.
			rest = m.Replay
		}
	}
	pk := &parked{route: rt, conn: raw, rest: rest, head: head, done: p.c.Track(), left: make(chan struct{})}
	go p.holdParked(pk)
	return true
}

// parked is a request held without its handler.
type parked struct {
	// route is where the connection came in.
	route route.Route
	// conn is the client's connection; rest reads what follows head on
	// it, which is conn itself unless bytes read before are replayed.
	conn net.Conn
	rest io.Reader
	// head is the request's head, as the client sent it (parked on
	// arrival) or as it could have (written back from the parsed request),
	// followed by whatever the client sent after it.
	head []byte
	// done ends the parked request's count (Config.Track), once the
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
func (pk *parked) watch() <-chan error {
	gone := make(chan error, 1)
	// Called at most once, and must not block (hangup_linux.go).
	leave := func(err error) {
		close(pk.left)
		gone <- err
	}
	if stop, ok := watchHangup(pk.conn, leave); ok {
		pk.stop = stop
		return gone
	}
	pk.reading = make(chan struct{})
	go func() {
		defer close(pk.reading)
		var b [1]byte
		n, err := pk.rest.Read(b[:])
		switch {
		case n > 0:
			pk.head = append(pk.head, b[0])
		case err != nil && !IsTimeout(err): // a timeout is stopWatch
			leave(fmt.Errorf("%w: %w", hold.ErrClientGone, err))
		}
	}()
	return gone
}

// stopWatch ends the watch's read and waits for it, so that nothing reads
// the connection once it is handed back.
func (pk *parked) stopWatch() {
	if pk.stop != nil {
		pk.stop()
		return
	}
	if pk.reading == nil {
		return
	}
	// Socket deadlines are wall-clock by nature.
	_ = pk.conn.SetReadDeadline(time.Unix(1, 0))
	<-pk.reading
	_ = pk.conn.SetReadDeadline(time.Time{})
}

// holdParked holds a parked request until its hold ends, then gives its
// connection back to the server with the outcome, or closes it if the
// client left. It is the goroutine of a parked request, so the two steps
// are functions of their own: only the first one's frames stay on its
// stack while it waits.
func (p *Parker) holdParked(pk *parked) {
	rel, err := p.c.Hold.Hold(context.Background(), pk.route.Target, pk.watch)
	p.unpark(pk, &rel, err)
}

// unpark ends a parked request's hold that ended with rel or err.
func (p *Parker) unpark(pk *parked, rel *route.Release, err error) {
	if err == nil && rel.ColdStart {
		// The release pacer's turn is waited for here, still parked and
		// watched, so that a burst comes back to the server no faster
		// than it is forwarded: the memory of a request in the server is
		// what parking saves.
		if done, ok := p.c.Pacer.Wait(pk.left, rel.Dest.ElastiService); ok {
			rel.Turn = done
		} else {
			err = fmt.Errorf("%w: while waiting for its turn", hold.ErrClientGone)
		}
	}
	pk.stopWatch()
	if errors.Is(err, hold.ErrClientGone) {
		p.c.Log.V(1).Info("request abandoned while held", "elastiservice", pk.route.Target.ElastiService.String(), "reason", err.Error())
		_ = pk.conn.Close()
		pk.done()
		return
	}
	resume := &resumption{rel: *rel, err: err, settled: pk.done}
	if !p.c.Server.Push(&Conn{
		Conn:   pk.conn,
		Route:  pk.route,
		Replay: io.MultiReader(bytes.NewReader(pk.head), pk.rest),
		resume: resume,
	}) {
		// The server is closed: Push closed the connection.
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
