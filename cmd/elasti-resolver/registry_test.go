package main

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The bench reads how long the resolver's goroutines waited for a CPU from
// this histogram; it must be exposed with its buckets.
func TestRegistryExposesSchedulerLatencies(t *testing.T) {
	families, err := newRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "go_sched_latencies_seconds" {
			continue
		}
		if f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("go_sched_latencies_seconds is a %v, want a histogram", f.GetType())
		}
		if n := len(f.GetMetric()[0].GetHistogram().GetBucket()); n < 3 {
			t.Fatalf("go_sched_latencies_seconds has %d buckets, want at least 3", n)
		}
		return
	}
	t.Fatal("go_sched_latencies_seconds not gathered")
}
