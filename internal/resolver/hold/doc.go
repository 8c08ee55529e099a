// Package hold decides, for a request or connection on a mapped port,
// whether it goes through now and otherwise holds it until its target can
// take it. It owns:
//   - the bound on what is held per ElastiService (Queue, queue.go);
//   - the event-driven wait for a ready endpoint, against an endpoint source
//     (Hold, hold.go), and the release it ends with: where the request
//     goes, how long its dial may take, whether it lived a cold start;
//   - the fallback (fallback.go): when a held request goes to
//     spec.proxy.fallback's Service instead;
//   - activation: one loop per ElastiService that asks the operator to wake
//     the target while requests are held (waker.go), and the throttled
//     report of traffic let through at once (traffic.go);
//   - the pace at which a woken target gets a released burst (Pacer,
//     pacer.go).
//
// It knows nothing of HTTP or TCP: each layer watches its own client and
// hands the hold that watch.
package hold
