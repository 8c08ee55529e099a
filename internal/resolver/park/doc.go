// Package park holds a held request without its handler, and watches the
// clients of held requests and connections.
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
// same request again, and the hold's one entry (Parker.Enter) gives the
// outcome instead of holding a second time. From there on the request is forwarded, or
// refused, exactly as one held in its handler, and the connection lives on
// as any other (keep-alive, pipelining).
//
// Requests with a body stay in their handler, with their body read ahead up
// to a memory bound (heldbody.go). HTTP/2 streams cannot be taken from their
// connection, and upgrades stay where net/http's handling of them is.
//
// Taking a connection from net/http still leaves behind what net/http gave
// it, as garbage: a burst at zero allocates it thousands of times over
// before a collection, and that sets the resolver's peak. So the first
// request of a new connection to a target that cannot serve is read by the
// resolver itself, before net/http (Parker.OnArrival, arrival.go). Only a
// request the server would take to a handler, and that would reach the hold there, is
// parked that way; anything else, as well as the bytes read, goes to the
// server as if it had read them first. Later requests on a kept-alive
// connection are parked from their handler.
//
// The package also owns what watches a held client while it waits: one
// watch of the socket for every held client (WatchSocket, watch.go), the
// read-ahead of an HTTP/1.x body (HeldBody, heldbody.go) and of a TCP
// connection (HeldConn, heldconn.go), up to a memory bound past which the
// client waits on its send, the guard of a held body's end (EndGuard), and
// the hand-off of connections to the one L7 server (ConnListener, conn.go),
// with what their port maps to and a parked request's outcome (resume.go).
// docs/architecture.md, "Holding", says why.
package park
