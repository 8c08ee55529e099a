package hold

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/route"
)

// BenchmarkTrafficSeen is the cost the report adds to every request
// forwarded at once: one map lookup while a report is recent.
func BenchmarkTrafficSeen(b *testing.B) {
	tr := &trafficReporter{activator: noActivator{}, interval: time.Hour}
	t := route.Target{ElastiService: types.NamespacedName{Namespace: "default", Name: "httpbin"}}
	tr.recent.Store(t.ElastiService, struct{}{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tr.seen(ctx, t)
		}
	})
}

// noActivator stands in for the operator; the benchmark never calls it.
type noActivator struct{}

func (noActivator) Activate(context.Context, string, string) (*contract.ActivationResponse, error) {
	return &contract.ActivationResponse{}, nil
}
