// Package activation is the wake-up channel between the planes: the
// resolver's client asks, the operator's server (the "ElastiServer") wakes.
//
// The wire protocol is contract.ActivationPath: a POST with a JSON
// contract.ActivationRequest and "Authorization: Bearer <token>", where the
// token is a projected ServiceAccount token of the resolver pod for Audience,
// which the API server itself refuses. The server verifies it with a
// TokenReview and accepts only the configured resolver ServiceAccount; it
// caches both verdicts and rate-limits reviews per source address, so that
// callers cannot turn it against the API server. Answers:
//
//	200 contract.ActivationResponse  the target was woken (or the wake was
//	                                 handed to the leader)
//	400 malformed request            405 not a POST
//	401 no token or invalid token    403 a valid token of another identity
//	404 unknown ElastiService        429 too many reviews from this source
//	503 the review or the wake did not finish; retry
//
// Both halves stay in one package because they are two ends of this one
// protocol: the operator runs a Server with an Authenticator and a Waker, the
// resolver calls a Client, which reports a refusal as a *StatusError. Server
// code lives in server*.go, client code in client*.go.
package activation
