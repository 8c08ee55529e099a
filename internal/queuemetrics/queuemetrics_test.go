package queuemetrics

import (
	"testing"

	"k8s.io/client-go/util/workqueue"
	// Links controller-runtime's workqueue collectors, as the operator's
	// controllers do.
	_ "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestProviderReportsOnControllerRuntimesRegistry: the provider finds
// controller-runtime's own workqueue_* collectors (an error here means
// their descriptions changed, and find's must follow), and a queue built
// with it reports its depth there.
func TestProviderReportsOnControllerRuntimesRegistry(t *testing.T) {
	mp, err := Provider()
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "queuemetrics_probe", MetricsProvider: mp})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	if err := Has(ctrlmetrics.Registry, "queuemetrics_probe", 2); err != nil {
		t.Fatal(err)
	}
}
