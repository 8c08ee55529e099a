// Package endpoints tracks the ready endpoints of the Services the resolver
// forwards to, from each Service's own EndpointSlices, and tells waiters
// when they change. It decides which endpoint is ready (contract.EndpointReady)
// and the order in which a dialer tries them; it never dials.
package endpoints
