package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SleepMode says what a sleep does to the target's pods.
//
// The mode that keeps the pods and shrinks them is called Doze, not
// "park": in the resolver, a parked request is one held outside net/http
// while it waits (internal/resolver/park), and one word for two things
// would make every log line and doc ambiguous. A dozing pod is still
// there, still Ready and still listening, only with its requests lowered,
// which is what the word says.
//
// +kubebuilder:validation:Enum=ScaleToZero;Doze
type SleepMode string

// Sleep modes.
const (
	// SleepModeScaleToZero scales the target to zero replicas through its
	// /scale subresource. The default, and the only mode before Doze.
	SleepModeScaleToZero SleepMode = "ScaleToZero"
	// SleepModeDoze keeps the target's pods and lowers their CPU (and,
	// if asked, memory) requests in place, through the pods/resize
	// subresource, to spec.doze's floor; a wake resizes them back. Limits
	// are never changed. Deployments and StatefulSets only.
	SleepModeDoze SleepMode = "Doze"
)

// DozeSpec is the floor a doze lowers each container's requests to. The
// floor is per container: every container of the target's pods that
// requests CPU has its CPU request set to CPU, and, when Memory is set,
// every container that requests memory has its memory request set to
// Memory. Limits are kept, so a dozing container is never throttled or
// OOM-killed by the doze itself, and its probes answer as before while
// the node has spare CPU. Admission refuses a floor above a container's
// request in the target's pod template.
type DozeSpec struct {
	// CPU is the CPU request of each container while dozing, such as 5m.
	// At least 1m: a zero request could make a Burstable pod BestEffort,
	// which the API server refuses.
	// +required
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1m')) >= 0",messageExpression="'spec.doze.cpu must be a CPU quantity of at least 1m, such as 5m or 0.01; got \"' + string(self) + '\"'"
	CPU resource.Quantity `json:"cpu"`

	// Memory is the memory request of each container while dozing, such
	// as 32Mi. Unset leaves memory requests as they are. A lower memory
	// request frees the node's memory for the scheduler, but it makes the
	// pod one of the first the kubelet evicts under memory pressure, and
	// an evicted pod comes back at full size.
	// +optional
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1Mi')) >= 0",messageExpression="'spec.doze.memory must be a memory quantity of at least 1Mi, such as 32Mi; got \"' + string(self) + '\"'"
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// DozeStatus is what the current doze changed, so that a wake can undo
// it. Unset while the target is not dozing.
type DozeStatus struct {
	// Since is when the doze began: when the first pod was resized.
	Since metav1.Time `json:"since"`

	// TemplateHash is a hash of the target's pod template when the doze
	// began. Another hash means the template changed (a rollout, a
	// rollout restart): its new pods come at full size, and the target is
	// woken.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TemplateHash string `json:"templateHash,omitempty"`

	// Pods are the pods resized, one record each, keyed by the pod's UID:
	// a pod recreated under the same name (a StatefulSet ordinal, an
	// evicted pod) is a new pod at its template's size, and has no record.
	// +optional
	// +listType=map
	// +listMapKey=uid
	// +kubebuilder:validation:MaxItems=256
	Pods []DozedPod `json:"pods,omitempty"`
}

// DozedPod is one pod's record of a doze.
type DozedPod struct {
	// UID of the pod.
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid"`

	// Name of the pod, for people reading the status.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Generation is the pod's metadata.generation that the doze's resize
	// produced. The resize is done once the kubelet reports having
	// observed it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation,omitempty"`

	// Containers are the containers resized.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Containers []DozedContainer `json:"containers,omitempty"`
}

// DozedContainer is one container's resources before and during a doze.
type DozedContainer struct {
	// Name of the container.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// RestartCount is the container's restart count when it was resized.
	// A container restarted since runs at the dozing size from the start,
	// where a probe may fail it again, so a rise wakes the pod.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RestartCount int32 `json:"restartCount,omitempty"`

	// Requests are the container's requests before the doze; a wake
	// writes them back.
	// +optional
	Requests Resources `json:"requests,omitempty"`

	// Limits are the container's limits, which the doze keeps.
	// +optional
	Limits Resources `json:"limits,omitempty"`

	// Dozed are the requests the doze set; Requests minus Dozed is what
	// the doze freed.
	// +optional
	Dozed Resources `json:"dozed,omitempty"`
}

// Resources are a CPU and a memory amount; either may be unset.
type Resources struct {
	// CPU in cores.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory in bytes.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}
