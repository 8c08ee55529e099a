package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/scaling"
)

// Pods the workload controller cannot create. A ResourceQuota, a LimitRange
// or an admission webhook that forbids the target's pods lets the wake's
// scale write through; the workload controller then creates no pod, and
// says why. A Deployment (copying its ReplicaSet's) and a ReplicaSet carry
// the status condition ReplicaFailure=True, reason FailedCreate; a
// StatefulSet only records FailedCreate Warning Events about itself. The
// fallback turns True on it (PodsNotCreated), and status.wakeProgress says
// it in its Scaling message.

const (
	// conditionReplicaFailure is the workload kinds' status condition for
	// pods their controller failed to create (or delete).
	conditionReplicaFailure = "ReplicaFailure"
	// eventReasonFailedCreate is the workload controllers' Event reason
	// for a pod they failed to create.
	eventReasonFailedCreate = "FailedCreate"
)

// failureConditionKinds are the kinds whose controller reports a pod it
// cannot create in ReplicaFailure only: their FailedCreate Events are not
// their own (a Deployment's are its ReplicaSet's), so none is listed.
var failureConditionKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}: true,
	{Group: "apps", Kind: "ReplicaSet"}: true,
}

// targetCreation is what the target's own object says of its pods'
// creation. podTemplates keeps it with the pod template it reads from the
// same object (templates.go), so that it costs no read of its own.
type targetCreation struct {
	uid types.UID
	// failure is the ReplicaFailure=True condition; nil when there is none.
	failure *workloadCondition
}

// workloadCondition is a status condition as the workload kinds write it
// (appsv1.DeploymentCondition, appsv1.ReplicaSetCondition).
type workloadCondition struct {
	Type               string                 `json:"type"`
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
	LastUpdateTime     metav1.Time            `json:"lastUpdateTime,omitempty"`
}

// targetCreationOf reads the target's UID and its ReplicaFailure=True
// condition, of any kind that has one.
func targetCreationOf(u *unstructured.Unstructured) targetCreation {
	tc := targetCreation{uid: u.GetUID()}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	conds, _ := v.([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		var wc workloadCondition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &wc); err != nil {
			continue
		}
		if wc.Type == conditionReplicaFailure && wc.Status == corev1.ConditionTrue {
			tc.failure = &wc
			break
		}
	}
	return tc
}

// replicaFailure is the message of the target's ReplicaFailure condition
// when it turned True at or after since, less ledger.ClockSkew (since is stamped
// by the operator's clock, the condition by the controller's); "" when
// there is none or it is older: it is not this wake's. The condition's
// time is its lastTransitionTime, else its lastUpdateTime; one with
// neither counts only when since is unknown (zero).
func replicaFailure(tc targetCreation, since time.Time) string {
	c := tc.failure
	if c == nil {
		return ""
	}
	at := c.LastTransitionTime.Time
	if at.IsZero() {
		at = c.LastUpdateTime.Time
	}
	if !since.IsZero() && at.Before(since.Add(-ledger.ClockSkew)) {
		return ""
	}
	if c.Message == "" {
		return "ReplicaFailure=True, reason " + c.Reason
	}
	return c.Message
}

// failedCreate is the message of the latest FailedCreate Warning Event
// about the target (its kind and name, and its UID when both sides carry
// one) that happened at or after since, less ledger.ClockSkew; "" when there is
// none. Ties go to the Event whose name sorts first.
func failedCreate(events []corev1.Event, kind, name string, uid types.UID, since time.Time) string {
	var latest *corev1.Event
	for i := range events {
		e := &events[i]
		o := e.InvolvedObject
		if e.Type != corev1.EventTypeWarning || e.Reason != eventReasonFailedCreate || o.Kind != kind || o.Name != name ||
			(uid != "" && o.UID != "" && o.UID != uid) {
			continue
		}
		at := wakeprogress.EventTime(e)
		if !since.IsZero() && at.Before(since.Add(-ledger.ClockSkew)) {
			continue
		}
		if latest == nil || at.After(wakeprogress.EventTime(latest)) || (at.Equal(wakeprogress.EventTime(latest)) && e.Name < latest.Name) {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return latest.Message
}

// wakeBegan is the scale write of the wake in progress: the ledger's
// pending cold start, else the Active condition's turn to Waking; zero
// when neither tells.
func wakeBegan(es *elastiv1alpha1.ElastiService) time.Time {
	if began, ok := wakeprogress.ColdStartBegan(es.Status.Ledger); ok {
		return began
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c != nil && c.Reason == contract.ReasonWaking {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// observePodsNotCreated says, in the workload controller's words, why it
// creates none of the target's pods; "" when it does not say, or when there
// is no need to ask. It asks only when wakingPods listed the target's pods
// (a wake is in progress) and none of them is the wake's: first the
// target's object, through podTemplates (no API read for an unchanged
// target of a watched kind), for ReplicaFailure; then, for a kind without
// that condition, its FailedCreate Events, listed live by field selector.
// A refused Event list leaves the failure to fallback.after rather than
// failing the reconcile.
func (r *Reconciler) observePodsNotCreated(ctx context.Context, es *elastiv1alpha1.ElastiService, pods []corev1.Pod, listed bool) string {
	if !listed {
		return ""
	}
	since := wakeBegan(es)
	if len(wakeprogress.WokenCandidates(pods, since)) > 0 {
		return ""
	}
	ref := es.Spec.ScaleTargetRef
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return ""
	}
	tpl, _ := r.templates.read(ctx, es.Namespace, ref)
	if msg := replicaFailure(tpl.creation, since); msg != "" {
		return wakeprogress.TruncateMessage(msg)
	}
	if failureConditionKinds[gvk.GroupKind()] || r.live == nil {
		return ""
	}
	sel := []fields.Selector{
		fields.OneTermEqualSelector("involvedObject.kind", gvk.Kind),
		fields.OneTermEqualSelector("involvedObject.name", ref.Name),
	}
	if tpl.creation.uid != "" {
		sel = append(sel, fields.OneTermEqualSelector("involvedObject.uid", string(tpl.creation.uid)))
	}
	list := &corev1.EventList{}
	if err := r.live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingFieldsSelector{Selector: fields.AndSelectors(sel...)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot list the Events of the woken target; pods it cannot create are seen only at fallback.after", "target", klog.KRef(es.Namespace, ref.Name))
		return ""
	}
	return wakeprogress.TruncateMessage(failedCreate(list.Items, gvk.Kind, ref.Name, tpl.creation.uid, since))
}
