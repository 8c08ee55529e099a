// Package handler is the resolver's L7 handler chain: one type per handler,
// built into a chain in one place (Chain, chain.go), and the one L7 server
// that runs it (NewServer). Each handler decides one thing about a request
// on a mapped port:
//   - recoverPanics (recover.go) and requireMapping (mapping.go): a bug
//     answers 500; a port that maps to nothing 404, CONNECT 405;
//   - answerStatic (static.go): whether a rule of spec.proxy.staticResponses
//     answers it, without holding, waking or counting it as traffic;
//   - answerWakingPage (wakingpage.go, wakingpagehtml.go, accept.go):
//     whether a browser's page load gets the waking page, which wakes the
//     target but is not held;
//   - holdUntilReady (hold.go): how a hold that ends early is answered (503,
//     504); the hold itself is entered through park.Parker.Enter;
//   - forward (forward.go): hands a released request to upstream.Proxy.
//
// The Route every request carries is put in its context by the server
// (park.ConnContext) and never changed; the handlers after requireMapping
// read it through one guard (routed). The hold adds a route.Release.
package handler
