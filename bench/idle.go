//go:build bench

package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Idle: the memory of a freshly installed operator and resolver.

const secIdle = "Idle"

// idle samples the RSS of the freshly installed operator and resolver.
func (b *bench) idle(ctx context.Context) {
	// Let start-up garbage settle.
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	for _, c := range []struct {
		name string
		pods labels.Set
	}{{"operator RSS, idle", operatorPods}, {"resolver RSS, idle (11,000 ports open, no mappings)", resolverPods}} {
		xs, err := sampleRSS(ctx, c.pods, 5)
		if err != nil {
			b.add(skipped(secIdle, c.name, "MiB", nil, err.Error()))
			continue
		}
		b.add(fig(secIdle, c.name, "MiB", xs, nil, "VmRSS of the container's process, sampled 5 times 1 s apart, 10 s after both were Ready"))
	}
}
