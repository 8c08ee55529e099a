package dozer

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/doze"
)

var (
	// ErrUnsupportedTarget: the target is not a Deployment or a
	// StatefulSet, the kinds whose pods a doze resizes.
	ErrUnsupportedTarget = errors.New("sleepMode Doze takes a Deployment or a StatefulSet")
	// ErrNoRoom: the API server refused to raise a pod's requests back
	// (HTTP 403). Kubernetes 1.37 refuses at admission a resize its node
	// has not the allocatable resources for, where the kubelet would
	// otherwise have said Infeasible; a policy refusing the write looks
	// the same. Either way the pod cannot wake in place, and the caller
	// scales out a fresh pod through /scale instead of waiting for room.
	ErrNoRoom = errors.New("the pod's requests cannot be raised back in place")
)

// Dozer reads a target's pods and resizes them.
type Dozer struct {
	// Live reads the target and lists its pods, uncached.
	Live client.Reader
	// Client writes the pods' resize subresource.
	Client client.Client
}

// Target is a Doze target as read now: its pod template's hash and its
// live pods.
type Target struct {
	TemplateHash string
	// Pods are the target's pods that are not being deleted, by name.
	Pods []corev1.Pod
}

// Read reads es's target and lists its pods by the target's selector.
func (d *Dozer) Read(ctx context.Context, es *elastiv1alpha1.ElastiService) (Target, error) {
	ref := es.Spec.ScaleTargetRef
	key := types.NamespacedName{Namespace: es.Namespace, Name: ref.Name}
	var sel *metav1.LabelSelector
	var tmpl *corev1.PodTemplateSpec
	switch {
	case ref.APIVersion == "apps/v1" && ref.Kind == "Deployment":
		obj := &appsv1.Deployment{}
		if err := d.Live.Get(ctx, key, obj); err != nil {
			return Target{}, fmt.Errorf("get Deployment %s: %w", key, err)
		}
		sel, tmpl = obj.Spec.Selector, &obj.Spec.Template
	case ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet":
		obj := &appsv1.StatefulSet{}
		if err := d.Live.Get(ctx, key, obj); err != nil {
			return Target{}, fmt.Errorf("get StatefulSet %s: %w", key, err)
		}
		sel, tmpl = obj.Spec.Selector, &obj.Spec.Template
	default:
		return Target{}, fmt.Errorf("%w: %s %s", ErrUnsupportedTarget, ref.APIVersion, ref.Kind)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return Target{}, fmt.Errorf("read the selector of %s %s: %w", ref.Kind, key, err)
	}
	if s.Empty() {
		// An empty selector would list every pod of the namespace.
		return Target{}, fmt.Errorf("%w: the selector of %s %s is empty", ErrUnsupportedTarget, ref.Kind, key)
	}
	list := &corev1.PodList{}
	if err := d.Live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return Target{}, fmt.Errorf("list the pods of %s %s: %w", ref.Kind, key, err)
	}
	t := Target{TemplateHash: doze.TemplateHash(tmpl)}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			t.Pods = append(t.Pods, p)
		}
	}
	sort.Slice(t.Pods, func(i, j int) bool { return t.Pods[i].Name < t.Pods[j].Name })
	return t, nil
}

// MaxPods and MaxContainers are the CRD's bounds on status.doze.pods and
// on a record's containers: a doze that would record more is refused
// rather than written and rejected.
const (
	MaxPods       = 256
	MaxContainers = 64
)

// Resizes are the writes of a doze, planned: each pod's patch, and the
// records for status.doze.pods.
type Resizes struct {
	// Records are one per pod with something to free, by pod name.
	Records []elastiv1alpha1.DozedPod
	writes  []write
}

type write struct {
	pod   *corev1.Pod
	patch doze.Patch
	// rec is the index of the pod's record in Records.
	rec int
}

// Plan plans the doze of pods at floor, writing nothing. prev are the
// records so far: a pod's own record keeps its requests from before the
// doze, and the records of pods no longer listed are dropped, so planning
// again over dozed pods changes nothing. Every pod is checked before any
// is written: one that cannot doze (doze.ErrRefused, such as a pod a VPA
// made Guaranteed) makes the whole doze fail.
func Plan(pods []corev1.Pod, floor elastiv1alpha1.DozeSpec, prev []elastiv1alpha1.DozedPod) (Resizes, error) {
	byUID := recordsByUID(prev)
	var out Resizes
	for i := range pods {
		p := &pods[i]
		var before *elastiv1alpha1.DozedPod
		if r, ok := byUID[string(p.UID)]; ok {
			before = &r
		}
		patch, rec, err := doze.Shrink(p, floor, before)
		if err != nil {
			return Resizes{}, err
		}
		if len(rec.Containers) == 0 {
			continue
		}
		if len(rec.Containers) > MaxContainers {
			return Resizes{}, fmt.Errorf("%w: pod %s has more than %d containers to resize, more than status.doze records", doze.ErrRefused, p.Name, MaxContainers)
		}
		if len(out.Records) == MaxPods {
			return Resizes{}, fmt.Errorf("%w: the target has more than %d pods to resize, more than status.doze records", doze.ErrRefused, MaxPods)
		}
		if !patch.Empty() {
			// A resize changes the spec, which the API server counts
			// with one generation: the record is written before the
			// resize, and Apply corrects it from the answer.
			rec.Generation = p.Generation + 1
		}
		out.Records = append(out.Records, rec)
		if !patch.Empty() {
			out.writes = append(out.writes, write{pod: p, patch: patch, rec: len(out.Records) - 1})
		}
	}
	return out, nil
}

// Apply writes the planned resizes, and sets each written pod's record
// to the generation the resize gave it. It stops at the first write that
// fails. The reconciler records Records in status.doze before it applies
// them, so that a doze cut short is still known, and undone by a wake.
func (d *Dozer) Apply(ctx context.Context, rs *Resizes) error {
	for _, w := range rs.writes {
		gen, err := d.resize(ctx, w.pod, w.patch)
		if err != nil {
			return err
		}
		rs.Records[w.rec].Generation = gen
	}
	return nil
}

// Shrink plans the doze of pods (Plan) and applies it, and returns the
// records; on a failed write, those planned, for the caller to record and
// undo.
func (d *Dozer) Shrink(ctx context.Context, pods []corev1.Pod, floor elastiv1alpha1.DozeSpec, prev []elastiv1alpha1.DozedPod) ([]elastiv1alpha1.DozedPod, error) {
	rs, err := Plan(pods, floor, prev)
	if err != nil {
		return nil, err
	}
	err = d.Apply(ctx, &rs)
	return rs.Records, err
}

// Restore writes the recorded requests back on each pod of pods that has
// a record; the caller waits for them with Observe. It writes every pod it
// can before it returns the first error; ErrNoRoom says that a pod's
// requests cannot be raised in place.
func (d *Dozer) Restore(ctx context.Context, pods []corev1.Pod, recs []elastiv1alpha1.DozedPod) error {
	byUID := recordsByUID(recs)
	var first error
	for i := range pods {
		p := &pods[i]
		rec, ok := byUID[string(p.UID)]
		if !ok {
			continue
		}
		patch := doze.Restore(p, rec)
		if patch.Empty() {
			continue
		}
		_, err := d.resize(ctx, p, patch)
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w: %w", ErrNoRoom, err)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// resize writes patch to pod's resize subresource and returns the pod's
// generation after it.
func (d *Dozer) resize(ctx context.Context, pod *corev1.Pod, patch doze.Patch) (int64, error) {
	data, err := patch.JSON()
	if err != nil {
		return 0, err
	}
	obj := pod.DeepCopy()
	if err := d.Client.SubResource("resize").Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return 0, fmt.Errorf("resize pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return obj.Generation, nil
}

func recordsByUID(recs []elastiv1alpha1.DozedPod) map[string]elastiv1alpha1.DozedPod {
	out := make(map[string]elastiv1alpha1.DozedPod, len(recs))
	for _, r := range recs {
		out[r.UID] = r
	}
	return out
}
