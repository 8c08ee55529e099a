package scaletarget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// Scaler reads and sets a target's replicas through /scale.
type Scaler interface {
	Replicas(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (int32, error)
	Scale(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) error
	// ScaleFromZero scales only a target at zero, atomically, and reports
	// whether it did.
	ScaleFromZero(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) (bool, error)
	// ScaleToZero scales only a target that still has from replicas,
	// atomically, and reports whether the target is at zero.
	ScaleToZero(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, from int32) (bool, error)
}

// Autoscalers pauses KEDA and reads HPA floors.
type Autoscalers interface {
	PauseKEDA(ctx context.Context, namespace, name string) (bool, error)
	UnpauseKEDA(ctx context.Context, namespace, name string) error
	HPAMinReplicas(ctx context.Context, namespace, name string) (int32, error)
}

// Control writes the scale target, through /scale, and what goes with it:
// KEDA's pause, the annotation that remembers which target the
// ElastiService manages. Its four steps (Wake, Sleep, Restore, SyncManaged)
// are called by the reconcile (execute, and before observe) and by deletion
// and stand-down, always in the order of docs/architecture.md, "The order of
// the writes".
type Control struct {
	Scaler      Scaler
	Autoscalers Autoscalers
	Recorder    Recorder
	// Client patches the ElastiService's annotation (SyncManaged).
	Client client.Writer
}

// Recorder is the part of events.EventRecorder Control uses.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// Wake unpauses KEDA and, when the target is at zero, scales it to
// minTargetReplicas (or the HPA's floor if higher). It returns the replica
// count the target now has, and whether this call scaled it up.
func (r *Control) Wake(ctx context.Context, es *elastiv1alpha1.ElastiService, current int32) (int32, bool, error) {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		if err := r.Autoscalers.UnpauseKEDA(ctx, es.Namespace, a.Name); err != nil {
			return 0, false, err
		}
	}
	if current > 0 {
		return current, false, nil
	}
	want := max(es.Spec.MinTargetReplicas, 1)
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerHPA {
		floor, err := r.Autoscalers.HPAMinReplicas(ctx, es.Namespace, a.Name)
		if err != nil {
			return 0, false, err
		}
		want = max(want, floor)
	}
	scaled, err := r.Scaler.ScaleFromZero(ctx, es.Namespace, es.Spec.ScaleTargetRef, want)
	if err != nil || scaled {
		operations.WithLabelValues(es.Namespace, es.Name, "up", resultLabel(err)).Inc()
	}
	if err != nil {
		return 0, false, err
	}
	if !scaled {
		// Someone else raised the target since it was read (or observe
		// assumed zero): leave their replica count alone.
		n, err := r.Scaler.Replicas(ctx, es.Namespace, es.Spec.ScaleTargetRef)
		return n, false, err
	}
	return want, true, nil
}

// Sleep pauses KEDA, then scales the target to zero from the replica
// count observe read, never from another: the write is conditional, as the
// wake's is. It returns the replicas the target has afterwards: zero once it
// sleeps; more when someone raised it since it was read, in which case
// their count stands. A target lowered in the meantime (an HPA scaling in,
// KEDA applying its pause) is followed down, a few times at most; after that
// the scale-down is given up, which errs on the side of a target kept up.
func (r *Control) Sleep(ctx context.Context, es *elastiv1alpha1.ElastiService, from int32) (int32, error) {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		found, err := r.Autoscalers.PauseKEDA(ctx, es.Namespace, a.Name)
		if err != nil {
			return from, err
		}
		if !found {
			r.Recorder.Eventf(es, nil, corev1.EventTypeWarning, EventAutoscalerNotFound, "PauseKEDA", "KEDA ScaledObject %s not found; scaling to zero without pausing it", a.Name)
		}
	}
	ref := es.Spec.ScaleTargetRef
	for attempt := 1; ; attempt++ {
		done, err := r.Scaler.ScaleToZero(ctx, es.Namespace, ref, from)
		if err != nil || done {
			operations.WithLabelValues(es.Namespace, es.Name, "down", resultLabel(err)).Inc()
			return 0, err
		}
		n, err := r.Scaler.Replicas(ctx, es.Namespace, ref)
		switch {
		case err != nil:
			return from, err
		case n == 0:
			return 0, nil
		case n > from || attempt == 3:
			return n, nil
		}
		from = n
	}
}

// Restore puts a target Elasti may have put to sleep back to at least
// minTargetReplicas, and returns its replicas. A target that no longer
// exists is fine: found is false.
func (r *Control) Restore(ctx context.Context, es *elastiv1alpha1.ElastiService, ref elastiv1alpha1.ScaleTargetRef) (replicas int32, found bool, err error) {
	n, err := r.Scaler.Replicas(ctx, es.Namespace, ref)
	if apierrors.IsNotFound(err) || errors.Is(err, scaling.ErrTargetKindUnknown) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	want := max(es.Spec.MinTargetReplicas, 1)
	if n >= want {
		return n, true, nil
	}
	err = r.Scaler.Scale(ctx, es.Namespace, ref, want)
	operations.WithLabelValues(es.Namespace, es.Name, "up", resultLabel(err)).Inc()
	if err != nil {
		return n, true, err
	}
	return want, true, nil
}

// SyncManaged remembers the target in an annotation and, when
// spec.scaleTargetRef changed, restores the old target to at least
// minTargetReplicas. It reports whether the target changed.
func (r *Control) SyncManaged(ctx context.Context, es *elastiv1alpha1.ElastiService) (bool, error) {
	cur := Encode(es.Spec.ScaleTargetRef)
	prev, had := es.Annotations[contract.AnnotationScaleTarget]
	if had && prev == cur {
		return false, nil
	}
	if old, ok := Decode(prev); had && ok {
		if _, _, err := r.Restore(ctx, es, old); err != nil {
			return false, err
		}
		r.Recorder.Eventf(es, nil, corev1.EventTypeNormal, EventTargetChanged, "ChangeTarget", "scale target changed from %s %s; restored it", old.Kind, old.Name)
	}
	orig := es.DeepCopy()
	if es.Annotations == nil {
		es.Annotations = map[string]string{}
	}
	es.Annotations[contract.AnnotationScaleTarget] = cur
	if err := r.Client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
		return false, fmt.Errorf("record the scale target of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	return had, nil
}

// Encode is the value of the annotation that remembers which target
// the operator manages, so that a changed scaleTargetRef can restore the old
// one.
func Encode(ref elastiv1alpha1.ScaleTargetRef) string {
	b, err := json.Marshal(ref)
	if err != nil {
		// A struct of three strings always encodes.
		return ""
	}
	return string(b)
}

// Decode reads the annotation Encode wrote; false when it holds no
// complete reference.
func Decode(s string) (elastiv1alpha1.ScaleTargetRef, bool) {
	var ref elastiv1alpha1.ScaleTargetRef
	if err := json.Unmarshal([]byte(s), &ref); err != nil || ref.Name == "" || ref.Kind == "" || ref.APIVersion == "" {
		return ref, false
	}
	return ref, true
}
