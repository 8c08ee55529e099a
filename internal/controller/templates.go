package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/scaling"
)

// podTemplates reads the labels of targets' pod templates. A target's
// labels are remembered by its resourceVersion, and the version is read
// from the metadata cache when the target's kind is watched, so that
// polling an unchanged target costs no API read. One read serves three
// concerns: the labels for the selector check (refusals.Selector), one
// replica's requests for the ledger, and what the target says of its pods'
// creation for the fallback (fallback.Tracker.NotCreated). It reads
// through the target watches (package targets) and serves three packages,
// so it stays here rather than in package refusals.
type podTemplates struct {
	live    client.Reader
	targets *targets.Watches

	mu   sync.Mutex
	seen map[templateKey]templateLabels
}

type templateKey struct {
	namespace string
	ref       elastiv1alpha1.ScaleTargetRef
}

type templateLabels struct {
	resourceVersion string
	labels          map[string]string
	found           bool
	// requests are one replica's requests, for the ledger (package ledger).
	requests ledger.Requests
	// creation is what the target says of its pods' creation, for the
	// fallback and status.wakeProgress (fallback.Tracker.NotCreated).
	creation fallback.Creation
}

// labels returns the pod-template labels of the target, or nil when its
// kind has no spec.template (a custom kind, a Rollout with a workloadRef)
// or it cannot be read.
func (p *podTemplates) labels(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) map[string]string {
	t, ok := p.read(ctx, namespace, ref)
	if !ok {
		return nil
	}
	return t.get()
}

// read returns what the target's pod template says, and false when the
// target cannot be read.
func (p *podTemplates) read(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (templateLabels, bool) {
	if p == nil || p.live == nil {
		return templateLabels{}, false
	}
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return templateLabels{}, false
	}
	key := templateKey{namespace, ref}
	rv := p.targets.ResourceVersion(ctx, namespace, ref)
	p.mu.Lock()
	prev, ok := p.seen[key]
	p.mu.Unlock()
	if ok && rv != "" && prev.resourceVersion == rv {
		return prev, true
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := p.live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, u); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("cannot read the target's pod template; the Service's selector is not checked", "error", err.Error())
		return templateLabels{}, false
	}
	m, found, err := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	cur := templateLabels{resourceVersion: u.GetResourceVersion(), labels: m, found: found && err == nil, requests: ledger.TemplateRequests(u), creation: fallback.CreationOf(u)}
	p.mu.Lock()
	if p.seen == nil || len(p.seen) > 4096 {
		p.seen = map[templateKey]templateLabels{}
	}
	p.seen[key] = cur
	p.mu.Unlock()
	return cur, true
}

// Creation returns what the target says of its pods' creation, for
// fallback.Tracker.NotCreated; the zero Creation when it cannot be read.
func (p *podTemplates) Creation(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) fallback.Creation {
	t, _ := p.read(ctx, namespace, ref)
	return t.creation
}

func (t templateLabels) get() map[string]string {
	if !t.found {
		return nil
	}
	if t.labels == nil {
		return map[string]string{}
	}
	return t.labels
}
