// Package upstream forwards what the hold released to a ready pod: it
// chooses the endpoint inside the dial (Dialer), which retries a refused
// dial on the next ready endpoint, keeps the connection pools and
// reverse-proxies HTTP requests (Proxy), and splices TCP connections after
// holding them (TCP). It owns the answer's Connection: close and its
// cold start header.
package upstream
