//go:build bench

package main

import (
	"context"
	"fmt"
)

// Serve mode: the same load through the Service before Elasti is installed
// and with its ElastiService in serve mode, where Elasti is out of the path.

const (
	secServe  = "Serve mode (Elasti out of the path)"
	serveRate = 500
)

// serveLoad sends serveRate requests a second for 10 s through the
// Service's ClusterIP at url; what says with or without Elasti.
func (b *bench) serveLoad(ctx context.Context, url, what string) (*loadResult, error) {
	logf("serve mode %s: %d rps for 10s through %s", what, serveRate, url)
	return b.runLoad(ctx, "-mode", "rate", "-url", url, "-rate", fmt.Sprint(serveRate), "-duration", "10s")
}

// addServe adds the serve-mode figures: the run without Elasti installed,
// the run with it, and their difference.
func (b *bench) addServe(without, with *loadResult) {
	b.addPair(secServe, fmt.Sprintf("%d rps through the Service", serveRate), "without Elasti installed", "with Elasti, ElastiService in serve mode", without, with,
		"a new connection per request from the node's network namespace to the ClusterIP; latency from each request's scheduled send time")
}
