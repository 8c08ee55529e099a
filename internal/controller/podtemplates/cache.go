package podtemplates

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

// Cache reads what targets' pod templates say. A target's template is
// remembered by its resourceVersion, and the version is read from the
// metadata cache when the target's kind is watched, so that
// polling an unchanged target costs no API read. One read serves three
// concerns: the labels for the selector check (refusals.Selector), one
// replica's requests for the ledger, and what the target says of its pods'
// creation for the fallback (fallback.Tracker.NotCreated).
type Cache struct {
	// Live reads the target's object; Targets says from the metadata cache
	// whether it changed since.
	Live    client.Reader
	Targets *targets.Watches

	mu   sync.Mutex
	seen map[templateKey]Template
}

type templateKey struct {
	namespace string
	ref       elastiv1alpha1.ScaleTargetRef
}

// Template is what a target's pod template says.
type Template struct {
	resourceVersion string
	// Labels are the pod template's labels; found is false when the
	// target's kind has none.
	Labels map[string]string
	found  bool
	// Requests are one replica's requests, for the ledger (package ledger).
	Requests ledger.Requests
	// Creation is what the target says of its pods' creation, for the
	// fallback and status.wakeProgress (fallback.Tracker.NotCreated).
	Creation fallback.Creation
}

// Labels returns the pod-template labels of the target, or nil when its
// kind has no spec.template (a custom kind, a Rollout with a workloadRef)
// or it cannot be read.
func (p *Cache) Labels(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) map[string]string {
	t, ok := p.Read(ctx, namespace, ref)
	if !ok {
		return nil
	}
	return t.get()
}

// Read returns what the target's pod template says, and false when the
// target cannot be read.
func (p *Cache) Read(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (Template, bool) {
	if p == nil || p.Live == nil {
		return Template{}, false
	}
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return Template{}, false
	}
	key := templateKey{namespace, ref}
	rv := p.Targets.ResourceVersion(ctx, namespace, ref)
	p.mu.Lock()
	prev, ok := p.seen[key]
	p.mu.Unlock()
	if ok && rv != "" && prev.resourceVersion == rv {
		return prev, true
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := p.Live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, u); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("cannot read the target's pod template; the Service's selector is not checked", "error", err.Error())
		return Template{}, false
	}
	m, found, err := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	cur := Template{resourceVersion: u.GetResourceVersion(), Labels: m, found: found && err == nil, Requests: ledger.TemplateRequests(u), Creation: fallback.CreationOf(u)}
	p.mu.Lock()
	if p.seen == nil || len(p.seen) > 4096 {
		p.seen = map[templateKey]Template{}
	}
	p.seen[key] = cur
	p.mu.Unlock()
	return cur, true
}

// Creation returns what the target says of its pods' creation, for
// fallback.Tracker.NotCreated; the zero Creation when it cannot be read.
func (p *Cache) Creation(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) fallback.Creation {
	t, _ := p.Read(ctx, namespace, ref)
	return t.Creation
}

func (t Template) get() map[string]string {
	if !t.found {
		return nil
	}
	if t.Labels == nil {
		return map[string]string{}
	}
	return t.Labels
}
