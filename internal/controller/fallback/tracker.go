package fallback

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/keyed"
)

// Reader gets the fallback Service and lists its EndpointSlices; the
// operator's cache is one.
type Reader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Lister lists objects; the operator's live, uncached reader is one.
type Lister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// StatusWriter writes an ElastiService's status; the operator's client is
// one.
type StatusWriter interface {
	Status() client.SubResourceWriter
}

// Tracker follows the fallback of the ElastiServices: it reads what the
// FallbackActive condition needs (Observe, NotCreated) and remembers, per
// ElastiService, why the API server refused the last wake's scale write,
// until a wake goes through. In memory: a new leader learns a refusal again
// from its own first attempt. The operator keeps one.
type Tracker struct {
	// Services gets the fallback Service and lists its EndpointSlices.
	Services Reader
	// Targets reads what a scale target's own object says of the creation
	// of its pods.
	Targets CreationReader
	// Events lists a target's Events, live: the cache holds none. Nil
	// lists none, and pods a kind without ReplicaFailure cannot create are
	// then seen only at fallback.after.
	Events Lister
	// Status and Recorder write the condition and its Events at once when
	// a wake is refused (ReportRefusedWake).
	Status   StatusWriter
	Recorder Recorder

	refused keyed.Map[types.NamespacedName, string]
}

// Wake is what the reconcile observed of an ElastiService's wake.
type Wake struct {
	// InProgress: the ElastiService is in proxy mode and its target has
	// replicas but no ready endpoint of its own yet.
	InProgress bool
	// OwnReady: the Service's own EndpointSlices list a ready endpoint.
	OwnReady bool
	// Pods are the target's pods, listed live for the wake in progress;
	// nil when none were. NotCreated is why the workload controller
	// creates none of them (NotCreated).
	Pods       []corev1.Pod
	NotCreated string
}

// Observe reads what the FallbackActive condition needs, and only while a
// wake with a fallback is in progress: the fallback Service and its slices,
// through Services. A wake whose scale write was refused counts as in
// progress while the resolvers hold the traffic.
func (t *Tracker) Observe(ctx context.Context, es *elastiv1alpha1.ElastiService, w Wake) (Observed, error) {
	p := es.Spec.Proxy
	if p == nil || p.Fallback == nil {
		return Observed{}, nil
	}
	after, err := time.ParseDuration(p.Fallback.After)
	if err != nil || after <= 0 {
		return Observed{}, nil
	}
	f := Observed{After: after, Service: p.Fallback.Service}
	f.Refused, _ = t.refused.Get(client.ObjectKeyFromObject(es))
	// A wake in progress, or one whose scale write was refused while the
	// resolvers hold the traffic.
	f.Waking = w.InProgress || (f.Refused != "" && es.Status.Mode == elastiv1alpha1.ModeProxy && !w.OwnReady)
	if !f.Waking {
		return f, nil
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c != nil && c.Reason == contract.ReasonWaking {
		f.WokeAt = c.LastTransitionTime.Time
	}
	fb := &corev1.Service{}
	switch err := t.Services.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: p.Fallback.Service}, fb); {
	case err == nil:
		f.ServiceFound = true
		slices := &discoveryv1.EndpointSliceList{}
		if err := t.Services.List(ctx, slices, client.InNamespace(es.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: p.Fallback.Service}); err != nil {
			return f, fmt.Errorf("list EndpointSlices of fallback Service %s/%s: %w", es.Namespace, p.Fallback.Service, err)
		}
		f.Ready = proxyslices.OwnReady(slices.Items)
	case apierrors.IsNotFound(err):
	default:
		return f, fmt.Errorf("get fallback Service %s/%s: %w", es.Namespace, p.Fallback.Service, err)
	}
	f.NotCreated, f.Unschedulable = w.NotCreated, unschedulable(w.Pods)
	return f, nil
}

// unschedulable returns the scheduler's message on the first pod it cannot
// place, or "" when there is none.
func unschedulable(pods []corev1.Pod) string {
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s: %s", pods[i].Name, c.Message)
			}
		}
	}
	return ""
}

// ScaleRefusal reports whether err is the API server refusing a write (as
// opposed to failing to answer): forbidden, invalid, or denied by an
// admission webhook or policy.
func ScaleRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// ReportRefusedWake records a wake whose scale write the API server refused
// (err) and, with a fallback, writes the FallbackActive condition at once
// and announces it, so that the resolvers stop holding; the reconcile's
// error retries the wake with backoff. w carries no pods: the refused wake
// created none.
func (t *Tracker) ReportRefusedWake(ctx context.Context, es *elastiv1alpha1.ElastiService, w Wake, now time.Time, err error) error {
	t.refused.Set(client.ObjectKeyFromObject(es), err.Error())
	f, ferr := t.Observe(ctx, es, w)
	if ferr != nil || f.After <= 0 {
		return ferr
	}
	st := *es.Status.DeepCopy()
	SetCondition(&st, es.Generation, f, now)
	if equality.Semantic.DeepEqual(es.Status, st) {
		return nil
	}
	was := es.Status.Conditions
	es.Status = st
	if err := t.Status.Status().Update(ctx, es); err != nil {
		return fmt.Errorf("update status of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	Announce(t.Recorder, es, was, st.Conditions)
	return nil
}

// Woke forgets the refusal of key's wake: a wake went through.
func (t *Tracker) Woke(key types.NamespacedName) {
	t.refused.Delete(key)
}
