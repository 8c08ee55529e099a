package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ledger is what sleeping cost and saved: the time the target spent at
// zero, how often it slept and woke, the last cold start split into its
// phases, and the resource requests that were not reserved while it slept.
// The operator updates it in the status writes that record a sleep or a
// wake; a period at zero still running is not in the totals, and readers
// add now - atZeroSince themselves (kubectl elasti does).
type Ledger struct {
	// AtZeroSince is when the current period at zero began; unset while
	// the target has replicas.
	// +optional
	AtZeroSince *metav1.Time `json:"atZeroSince,omitempty"`

	// SecondsAtZero is the time spent at zero over the periods that have
	// ended, in whole seconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SecondsAtZero int64 `json:"secondsAtZero,omitempty"`

	// Sleeps counts the periods at zero that began: the operator's own
	// scale-downs, and a target found at zero.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Sleeps int64 `json:"sleeps,omitempty"`

	// Wakes counts the periods at zero that ended with the target given
	// replicas again: the operator's wakes, and a target raised by someone
	// else.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Wakes int64 `json:"wakes,omitempty"`

	// Asleep is what went to zero in the current period: the replicas and
	// the requests of one replica that the savings of the period count.
	// Unset while the target has replicas.
	// +optional
	Asleep *LedgerAsleep `json:"asleep,omitempty"`

	// Saved is what the ended periods at zero did not reserve.
	// +optional
	Saved LedgerSavings `json:"saved,omitempty"`

	// LastColdStart is the last wake from zero, split into phases.
	// +optional
	LastColdStart *ColdStart `json:"lastColdStart,omitempty"`
}

// LedgerAsleep is what the target had when it went to zero.
type LedgerAsleep struct {
	// Replicas the target had before the scale to zero;
	// spec.minTargetReplicas when someone else put it there.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`

	// CPU requested by one replica (its pod template), in cores.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory requested by one replica (its pod template), in bytes.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// Unknown says why the requests of a replica are not known (a target
	// kind without a readable pod template); the period then adds nothing
	// to the savings.
	// +optional
	Unknown string `json:"unknown,omitempty"`
}

// LedgerSavings is what periods at zero did not reserve: the requests of
// one replica x the replicas x the seconds at zero, summed over the
// periods.
type LedgerSavings struct {
	// CPUCoreSeconds is CPU not reserved, in core-seconds (3600 is one
	// core-hour).
	// +optional
	CPUCoreSeconds *resource.Quantity `json:"cpuCoreSeconds,omitempty"`

	// MemoryByteSeconds is memory not reserved, in byte-seconds (3600Gi is
	// one GiB-hour).
	// +optional
	MemoryByteSeconds *resource.Quantity `json:"memoryByteSeconds,omitempty"`

	// UncountedSeconds is time at zero that added nothing to the savings,
	// because the requests of a replica were not known.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UncountedSeconds int64 `json:"uncountedSeconds,omitempty"`
}

// ColdStart is one wake from zero, as timestamps of its phases: the scale
// write, then the first woken pod scheduled, its containers started and
// the pod Ready. The first byte forwarded is known only to the resolvers
// (elasti_resolver_cold_start_seconds).
type ColdStart struct {
	// ScaleWriteTime is when the operator woke the target (or found it
	// raised by someone else).
	ScaleWriteTime metav1.Time `json:"scaleWriteTime"`

	// Pod is the woken pod the phases are read from: the first pod to
	// become Ready after the wake.
	// +optional
	Pod string `json:"pod,omitempty"`

	// ScheduledTime is when Pod was scheduled (its PodScheduled
	// condition).
	// +optional
	ScheduledTime *metav1.Time `json:"scheduledTime,omitempty"`

	// StartedTime is when the last of Pod's containers started running.
	// +optional
	StartedTime *metav1.Time `json:"startedTime,omitempty"`

	// ReadyTime is when Pod became Ready (its Ready condition).
	// +optional
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`

	// Message says why phases are missing, once the cold start is over.
	// +optional
	Message string `json:"message,omitempty"`
}
