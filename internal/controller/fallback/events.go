package fallback

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Event reasons on an ElastiService for its fallback.
const (
	// EventActive: the fallback Service took over, and why.
	EventActive = "FallbackActive"
	// EventUnavailable: the fallback is needed but cannot take the
	// traffic.
	EventUnavailable = "FallbackUnavailable"
)

// Recorder records Events; the operator's events.EventRecorder is one.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// Announce emits an Event when the FallbackActive condition, from was to
// now, says the fallback takes over, or is needed and cannot, naming the
// cause. An unchanged status and reason say nothing new.
func Announce(rec Recorder, es *elastiv1alpha1.ElastiService, was, now []metav1.Condition) {
	prev, cur := meta.FindStatusCondition(was, elastiv1alpha1.ConditionFallbackActive), meta.FindStatusCondition(now, elastiv1alpha1.ConditionFallbackActive)
	if cur == nil || (prev != nil && prev.Status == cur.Status && prev.Reason == cur.Reason) {
		return
	}
	switch {
	case cur.Status == metav1.ConditionTrue:
		rec.Eventf(es, nil, corev1.EventTypeWarning, EventActive, "Fallback", "%s: %s", cur.Reason, cur.Message)
	case cur.Reason == ReasonUnavailable:
		rec.Eventf(es, nil, corev1.EventTypeWarning, EventUnavailable, "Fallback", "%s", cur.Message)
	}
}
