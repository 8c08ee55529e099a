package metricsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

// Endpoint makes the elected leader the metrics API's only endpoint: the
// rate in serve mode comes from the leader's trigger evaluations, so a
// replica that does not lead would answer without it. While it leads it
// labels its own pod contract.LabelMetricsAPI, which the metrics API's
// Service selects. A replica that stops leading exits (controller-runtime's
// default) and unlabels its pod when it starts again, before it can be
// ready (Unlabel).
type Endpoint struct {
	// Client writes the pod: a patch of its labels.
	Client client.Client
	Pod    types.NamespacedName
}

// Unlabel removes the label from the pod, if there: call it before the
// manager starts.
func (e *Endpoint) Unlabel(ctx context.Context) error {
	return e.label(ctx, nil)
}

// Start labels the pod and keeps the label until ctx ends (manager.Runnable,
// on the leader only); it then removes it, within a few seconds.
func (e *Endpoint) Start(ctx context.Context) error {
	value := contract.MetricsAPIServing
	if err := e.label(ctx, &value); err != nil {
		return err
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.label(stop, nil) // best effort: the pod may be on its way out
	return nil
}

// NeedLeaderElection: the leader only.
func (e *Endpoint) NeedLeaderElection() bool { return true }

func (e *Endpoint) label(ctx context.Context, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{contract.LabelMetricsAPI: value}}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = e.Pod.Namespace, e.Pod.Name
	if err := e.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("metrics API: label the operator's pod %s: %w", e.Pod, err)
	}
	return nil
}
