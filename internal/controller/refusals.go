package controller

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/scaling"
)

// Ready reasons of configurations Elasti refuses. A refused ElastiService
// never takes its Service into the data path: its target stays awake (or
// is woken, if it sleeps), no proxy slice exists, and Ready=False with one
// of these reasons says what to change. Each also goes out as a Warning
// Event with the same reason.
const (
	ReasonHeadlessService      = "HeadlessService"
	ReasonExternalNameService  = "ExternalNameService"
	ReasonServiceNoSelector    = "ServiceWithoutSelector"
	ReasonNonTCPServicePort    = "NonTCPServicePort"
	ReasonLocalTrafficPolicy   = "LocalTrafficPolicy"
	ReasonResolverFamilyAbsent = "NoResolverInIPFamily"
	ReasonSelectorMissesTarget = "ServiceDoesNotSelectTarget"
	// ReasonServiceClaimed and ReasonTargetClaimed: an older ElastiService
	// already manages the Service or the target.
	ReasonServiceClaimed = "ServiceAlreadyManaged"
	ReasonTargetClaimed  = "TargetAlreadyManaged"
)

// refusal is why Elasti will not put a Service in the data path; the zero
// value means it may.
type refusal struct {
	reason, message string
}

func (f refusal) refused() bool { return f.reason != "" }

// isRefusal reports whether a Ready reason is one of the refusals above.
func isRefusal(reason string) bool {
	switch reason {
	case ReasonHeadlessService, ReasonExternalNameService, ReasonServiceNoSelector, ReasonNonTCPServicePort,
		ReasonLocalTrafficPolicy, ReasonResolverFamilyAbsent, ReasonSelectorMissesTarget,
		ReasonServiceClaimed, ReasonTargetClaimed:
		return true
	}
	return false
}

// serviceRefusal decides from the Service alone whether its traffic can be
// held. Each refused shape would leave the Service pointing where nothing
// answers while the target sleeps.
func serviceRefusal(svc *corev1.Service) refusal {
	name := svc.Namespace + "/" + svc.Name
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return refusal{ReasonExternalNameService, fmt.Sprintf(
			"Service %s is of type ExternalName: DNS sends its clients to %q, so no endpoint of it can lead to a resolver; point spec.service at a Service that selects the target's pods",
			name, svc.Spec.ExternalName)}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return refusal{ReasonHeadlessService, fmt.Sprintf(
			"Service %s is headless (clusterIP: None): its DNS name resolves to endpoint addresses, which would be resolvers that do not listen on the Service's ports while the target sleeps; create a Service with a cluster IP that selects the same pods and name it in spec.service",
			name)}
	case len(svc.Spec.Selector) == 0:
		return refusal{ReasonServiceNoSelector, fmt.Sprintf(
			"Service %s has no selector: its endpoints are written by someone else, so woken pods would never become its endpoints; give it a selector that matches the target's pods",
			name)}
	}
	for _, p := range svc.Spec.Ports {
		if proto := p.Protocol; proto != "" && proto != corev1.ProtocolTCP {
			return refusal{ReasonNonTCPServicePort, fmt.Sprintf(
				"Service %s port %s is %s: the resolvers hold TCP only, so that port would drop its traffic while the target sleeps; move the %s ports to a Service of their own that Elasti does not manage",
				name, portLabel(p), proto, proto)}
		}
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
		return refusal{ReasonLocalTrafficPolicy, fmt.Sprintf(
			"Service %s has internalTrafficPolicy: Local: while the target sleeps its endpoints are the resolvers, and clients on a node without a resolver would have none; set internalTrafficPolicy: Cluster",
			name)}
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return refusal{ReasonLocalTrafficPolicy, fmt.Sprintf(
			"Service %s has externalTrafficPolicy: Local: while the target sleeps its endpoints are the resolvers, and nodes without a resolver would drop external traffic; set externalTrafficPolicy: Cluster",
			name)}
	}
	return refusal{}
}

func portLabel(p corev1.ServicePort) string {
	if p.Name != "" {
		return fmt.Sprintf("%s (%d)", p.Name, p.Port)
	}
	return fmt.Sprint(p.Port)
}

// familyRefusal refuses a Service with an IP family that no ready resolver
// has an address in: kube-proxy programs each family from that family's
// slices only, so its clients would find no endpoint. Without ready
// resolvers at all there is nothing to compare (ProxyReady says so).
func familyRefusal(svc *corev1.Service, resolvers []resolverEndpoint) refusal {
	if len(resolvers) == 0 {
		return refusal{}
	}
	var v4, v6 bool
	for _, r := range resolvers {
		v4 = v4 || r.IPv4 != ""
		v6 = v6 || r.IPv6 != ""
	}
	for _, fam := range svc.Spec.IPFamilies {
		if (fam == corev1.IPv4Protocol && !v4) || (fam == corev1.IPv6Protocol && !v6) {
			return refusal{ReasonResolverFamilyAbsent, fmt.Sprintf(
				"Service %s/%s serves %s, and no ready resolver has an %s address: its %s clients would have no endpoint while the target sleeps; run the resolvers with an %s address (dual-stack pods) or make the Service single-stack in a family they have",
				svc.Namespace, svc.Name, fam, fam, fam, fam)}
		}
	}
	return refusal{}
}

// selectorRefusal refuses a Service whose selector does not match the
// labels of the target's pod template: woken pods would never become its
// endpoints, and every held request would time out. tpl is nil when the
// target's kind has no spec.template the operator could read; then nothing
// is refused.
func selectorRefusal(svc *corev1.Service, ref elastiv1alpha1.ScaleTargetRef, tpl map[string]string) refusal {
	if tpl == nil || len(svc.Spec.Selector) == 0 {
		return refusal{}
	}
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tpl)) {
		return refusal{}
	}
	return refusal{ReasonSelectorMissesTarget, fmt.Sprintf(
		"Service %s/%s selects %s, but the pod template of %s %s has labels %s: woken pods would never become the Service's endpoints; fix the Service's selector or spec.scaleTargetRef",
		svc.Namespace, svc.Name, labels.Set(svc.Spec.Selector), ref.Kind, ref.Name, labelsOrNone(tpl))}
}

func labelsOrNone(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	return labels.Set(m).String()
}

// podTemplates reads the labels of targets' pod templates. A target's
// labels are remembered by its resourceVersion, and the version is read
// from the metadata cache when the target's kind is watched, so that
// polling an unchanged target costs no API read.
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

// rival finds the ElastiService that keeps this one from acting: an older
// one (by creation time, then name) that names the same Service or the
// same scale target. Two ElastiServices on one Service or one target would
// fight, one waking what the other puts to sleep; the older one wins,
// deterministically, and the younger stands down. It returns nil when
// there is none.
func (r *Reconciler) rival(ctx context.Context, es *elastiv1alpha1.ElastiService) (*elastiv1alpha1.ElastiService, string, error) {
	var found []elastiv1alpha1.ElastiService
	byService := &elastiv1alpha1.ElastiServiceList{}
	if err := r.client.List(ctx, byService, client.InNamespace(es.Namespace), client.MatchingFields{indexService: es.Spec.Service}); err != nil {
		return nil, "", fmt.Errorf("list ElastiServices of Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	found = append(found, byService.Items...)
	if keys := targets.IndexValues(es); len(keys) == 1 {
		byTarget := &elastiv1alpha1.ElastiServiceList{}
		if err := r.client.List(ctx, byTarget, client.InNamespace(es.Namespace), client.MatchingFields{targets.Index: keys[0]}); err != nil {
			return nil, "", fmt.Errorf("list ElastiServices of target %s: %w", keys[0], err)
		}
		found = append(found, byTarget.Items...)
	}
	var older []elastiv1alpha1.ElastiService
	for i := range found {
		if found[i].UID != es.UID && olderThan(&found[i], es) {
			older = append(older, found[i])
		}
	}
	if len(older) == 0 {
		return nil, "", nil
	}
	sort.Slice(older, func(i, j int) bool { return olderThan(&older[i], &older[j]) })
	w := &older[0]
	if w.Spec.Service == es.Spec.Service {
		return w, ReasonServiceClaimed, nil
	}
	return w, ReasonTargetClaimed, nil
}

// olderThan orders ElastiServices by creation time, then by name, so that
// every replica of the operator and every reconcile picks the same winner.
func olderThan(a, b *elastiv1alpha1.ElastiService) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// standDown is the reconcile of an ElastiService that a rival keeps from
// acting. It leaves nothing of its own in the data path: its proxy slices
// go, its ports are freed, and a target that it managed and the rival does
// not is restored to minTargetReplicas, so that nothing stays at zero
// unmanaged. Ready=False names the rival. It is reconciled again when the
// rival goes or changes (forRivals).
func (r *Reconciler) standDown(ctx context.Context, es *elastiv1alpha1.ElastiService, rival *elastiv1alpha1.ElastiService, reason string) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(es)
	if err := r.ensureSlices(ctx, es, nil); err != nil {
		return ctrl.Result{}, err
	}
	r.ports.Release(key)
	r.grace.Delete(key)
	r.wakes.Complete(key, 0, fmt.Errorf("ElastiService %s stands down: %s manages the same %s", key, rival.Name, claimedWhat(reason)))
	if prev, had := es.Annotations[contract.AnnotationScaleTarget]; had {
		if old, ok := decodeTarget(prev); ok && !sameTarget(old, rival.Spec.ScaleTargetRef) {
			if _, _, err := r.restoreTarget(ctx, es, old); err != nil {
				return ctrl.Result{}, err
			}
		}
		orig := es.DeepCopy()
		delete(es.Annotations, contract.AnnotationScaleTarget)
		if err := r.client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, fmt.Errorf("forget the scale target of ElastiService %s: %w", key, err)
		}
	}

	var msg string
	if reason == ReasonServiceClaimed {
		msg = fmt.Sprintf("ElastiService %s, created earlier, already manages Service %s; this one does nothing until that one is deleted or names another Service. Delete one of the two",
			rival.Name, es.Spec.Service)
	} else {
		msg = fmt.Sprintf("ElastiService %s, created earlier, already manages %s %s; this one does nothing until that one is deleted or names another target. Delete one of the two",
			rival.Name, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	st := *es.Status.DeepCopy()
	now := metav1.NewTime(r.clock.Now())
	st.ObservedGeneration = es.Generation
	st.Mode = elastiv1alpha1.ModeServe
	st.ProxyPorts = nil
	st.WakeProgress = nil
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: es.Generation, LastTransitionTime: now,
	})
	if !statusChanged(es.Status, st) {
		return ctrl.Result{}, nil
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c == nil || c.Reason != reason || c.Message != msg {
		r.recorder.Eventf(es, rival, corev1.EventTypeWarning, reason, "StandDown", "%s", msg)
	}
	stamp(&st, now.Time)
	es.Status = st
	if err := r.client.Status().Update(ctx, es); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of ElastiService %s: %w", key, err)
	}
	setModeMetric(es.Namespace, es.Name, elastiv1alpha1.ModeServe)
	return ctrl.Result{}, nil
}

func claimedWhat(reason string) string {
	if reason == ReasonServiceClaimed {
		return "Service"
	}
	return "scale target"
}

// sameTarget compares two target references by group, kind and name, as
// the target index does.
func sameTarget(a, b elastiv1alpha1.ScaleTargetRef) bool {
	ga, erra := scaling.TargetGVK(a)
	gb, errb := scaling.TargetGVK(b)
	if erra != nil || errb != nil {
		return a == b
	}
	return targets.Key(ga.Group, ga.Kind, a.Name) == targets.Key(gb.Group, gb.Kind, b.Name)
}
