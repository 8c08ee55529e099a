package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/route"
)

// TCP forwards plain TCP connections: hold, dial, splice.
type TCP struct {
	hold   *hold.Hold
	dialer *Dialer
	rec    Recorder
	log    logr.Logger
	// readAhead bounds what is read ahead from a held connection (a memory
	// bound: the rest waits in the kernel's buffers).
	readAhead int
	// budget bounds what all held connections and bodies read ahead
	// together.
	budget *park.Budget
	// stop ends holds and dials (the resolver's drain timeout).
	stop context.Context
	// drains bounds the backlogs read at once (drainBacklog).
	drains chan struct{}
}

// concurrentDrains is how many held connections' backlogs are read at
// once: at most this many times park.MaxBacklog of memory.
const concurrentDrains = 4

// NewTCP holds through h and dials through d; stop ends holds and dials.
func NewTCP(stop context.Context, h *hold.Hold, d *Dialer, rec Recorder, log logr.Logger, readAhead int, budget *park.Budget) *TCP {
	return &TCP{hold: h, dialer: d, rec: rec, log: log, readAhead: readAhead, budget: budget, stop: stop, drains: make(chan struct{}, concurrentDrains)}
}

// Serve holds a TCP connection until its Target (or, with
// spec.proxy.fallback, the fallback Service) has a ready endpoint, dials
// one, replays what was read while holding, and splices the two. A
// full queue, a hold timeout, a client that left, or a failed dial close
// the client connection: TCP has no way to say more.
func (p *TCP) Serve(c net.Conn, t route.Target) {
	defer c.Close()
	log := p.log.WithValues("elastiservice", t.ElastiService.String())
	// A spent budget reads one byte ahead at most: the socket watch (or
	// that byte's read) still sees the client go.
	reserved := p.budget.Take(p.readAhead)
	// Given back once the backlog is written to the pod (the hold's reads
	// are over), not when the connection ends: a connection may live for
	// hours after its wake.
	done := sync.OnceFunc(func() { p.budget.Give(reserved) })
	defer done()
	h := park.WatchHeld(c, reserved)
	rel, err := p.hold.Hold(p.stop, t, h.Watch)
	pending, werr := h.StopWatching()
	if err == nil && errors.Is(werr, hold.ErrClientGone) {
		// Gone as the hold let it through: still never forwarded.
		err = werr
	}
	if err == nil {
		pending, err = p.drainBacklog(h)
	}
	if err != nil {
		if errors.Is(err, hold.ErrStopping) {
			p.rec.Draining(t.ElastiService)
		}
		log.V(1).Info("TCP connection not forwarded", "reason", err.Error())
		return
	}
	dctx, dcancel := context.WithDeadline(p.stop, rel.Deadline)
	up, err := p.dialer.Dial(dctx, rel.Dest, "")
	dcancel()
	if err != nil {
		p.rec.DialFailed(t.ElastiService)
		log.Error(err, "TCP forwarding failed")
		return
	}
	defer up.Close()
	p.rec.Forwarded(t.ElastiService)
	// What was read while holding goes first, on the copy towards the pod,
	// while the copy back already runs: a pod that answers as it reads (an
	// echo, a database streaming results) must not stall on an answer
	// nobody reads while megabytes of backlog are written to it.
	splice(c, up, pending, done)
}

// drainBacklog is h.DrainBacklog, a few connections at a time: each may
// take park.MaxBacklog of memory for the moment of its release.
func (p *TCP) drainBacklog(h *park.HeldConn) ([]byte, error) {
	select {
	case p.drains <- struct{}{}:
	case <-p.stop.Done():
		return nil, hold.ErrStopping
	}
	defer func() { <-p.drains }()
	return h.DrainBacklog()
}

// splice copies both ways until both directions are done, passing each
// half-close on to the other side; pending goes to up before the rest of
// client, and written is called once it has. If one direction fails, both connections
// are closed so the other copy ends too.
func splice(client, up net.Conn, pending []byte, written func()) {
	errc := make(chan error, 1)
	go func() {
		_, err := up.Write(pending)
		pending = nil
		written()
		if err == nil {
			// Copied straight from socket to socket (splice) from here.
			_, err = io.Copy(up, client)
		}
		closeWrite(up)
		errc <- err
	}()
	_, err := io.Copy(client, up)
	closeWrite(client)
	if err != nil {
		_ = client.Close()
		_ = up.Close()
	}
	if err := <-errc; err != nil {
		_ = client.Close()
		_ = up.Close()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
