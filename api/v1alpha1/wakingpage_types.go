package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WakingPage is the page a browser gets while the target wakes, instead of
// a request held with nothing to show. Only a GET whose Accept header
// prefers text/html gets it; every other request is held as without it.
// The page reloads itself until the target answers, and shows how far the
// wake has got (status.wakeProgress).
type WakingPage struct {
	// RefreshSeconds is how often the page reloads itself, 1 to 60.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	RefreshSeconds int32 `json:"refreshSeconds,omitempty"`

	// HTML replaces the built-in page, at most 16384 characters. The
	// resolver replaces {{service}}, {{phase}}, {{message}}, {{elapsed}}
	// and {{refresh}} in it with HTML-escaped values, and sends a Refresh
	// header of refreshSeconds either way. Left out: the built-in page.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	HTML string `json:"html,omitempty"`
}

// WakePhase is how far a wake from zero has got, read from the target's
// pods: their conditions, container states and Events.
// +kubebuilder:validation:Enum=Scaling;Scheduling;PullingImage;Starting;Ready
type WakePhase string

const (
	// WakePhaseScaling: the scale write is done and no pod of the target
	// exists yet.
	WakePhaseScaling WakePhase = "Scaling"
	// WakePhaseScheduling: a pod exists and is not yet placed on a node.
	WakePhaseScheduling WakePhase = "Scheduling"
	// WakePhasePullingImage: the pod is placed and the kubelet is pulling
	// an image (a Pulling Event without its Pulled).
	WakePhasePullingImage WakePhase = "PullingImage"
	// WakePhaseStarting: the pod's containers are being created, or run
	// and are not yet Ready.
	WakePhaseStarting WakePhase = "Starting"
	// WakePhaseReady: a pod is Ready; the Service routes to it as soon as
	// its EndpointSlices say so.
	WakePhaseReady WakePhase = "Ready"
)

// WakeProgress is how far the current wake has got. The operator sets it
// when it wakes the target (or finds it raised while in proxy mode) and
// clears it when the target is at zero again or serves on its own.
type WakeProgress struct {
	// Phase is the furthest pod's phase.
	Phase WakePhase `json:"phase"`

	// Message says what the phase is waiting for, such as the image being
	// pulled or the scheduler's reason.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Pod is the pod the phase was read from.
	// +optional
	Pod string `json:"pod,omitempty"`

	// StartTime is when the wake began: the scale write.
	StartTime metav1.Time `json:"startTime"`

	// PhaseTime is when the operator first saw the current phase.
	PhaseTime metav1.Time `json:"phaseTime"`
}
