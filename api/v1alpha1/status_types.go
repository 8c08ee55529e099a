package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says where a Service's traffic goes.
// +kubebuilder:validation:Enum=serve;proxy
type Mode string

const (
	// ModeServe: the Service routes straight to the target's pods; Elasti is
	// not in the data path.
	ModeServe Mode = "serve"
	// ModeProxy: a proxy EndpointSlice sends the Service's traffic to the
	// resolvers, which hold it until the target is ready.
	ModeProxy Mode = "proxy"
)

// Condition types set on an ElastiService.
const (
	// ConditionReady is True when the ElastiService is fully reconciled and
	// its Service answers, either directly or through the resolvers.
	ConditionReady = "Ready"
	// ConditionActive is True while the target has replicas and False while
	// it is scaled to zero.
	ConditionActive = "Active"
	// ConditionIdle is True while every trigger reports idle.
	ConditionIdle = "Idle"
	// ConditionTriggersHealthy is False when a trigger cannot be evaluated.
	// Such a trigger never causes a scale-down.
	ConditionTriggersHealthy = "TriggersHealthy"
	// ConditionProxyReady is True when the proxy EndpointSlice lists ready
	// resolvers, or when none is needed.
	ConditionProxyReady = "ProxyReady"
	// ConditionTargetReady is True while the Service's own EndpointSlices
	// list a ready endpoint of the target. Its lastTransitionTime tells
	// when the target last became ready or stopped being ready: the
	// cooldown counts from the later of that and lastScaledUpTime, and a
	// target that has not been ready since its last wake is never put to
	// sleep.
	ConditionTargetReady = "TargetReady"
	// ConditionFallbackActive is True while spec.proxy.fallback's Service
	// takes the target's traffic, with the cause as its reason
	// (DeadlinePassed, PodsUnschedulable, ScaleRefused). False with reason
	// FallbackUnavailable when the fallback is needed but its Service does
	// not exist or has no ready endpoint: requests are then held.
	ConditionFallbackActive = "FallbackActive"
)

// ProxyPort records the resolver port allocated to one port of the Service.
type ProxyPort struct {
	// Name of the Service port; empty for a Service's single unnamed port.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
	// Port is the Service port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Protocol of the Service port: TCP, UDP or SCTP.
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// AppProtocol of the Service port, if set.
	// +optional
	AppProtocol string `json:"appProtocol,omitempty"`
	// ResolverPort is the resolver port that carries this Service port's
	// traffic and only this one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ResolverPort int32 `json:"resolverPort"`
}

// ElastiServiceStatus is the observed state of an ElastiService.
type ElastiServiceStatus struct {
	// Mode is serve or proxy.
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// ObservedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastScaledUpTime is when the target was last woken. The cooldown
	// counts from it.
	// +optional
	LastScaledUpTime *metav1.Time `json:"lastScaledUpTime,omitempty"`

	// LastScaledDownTime is when the target was last scaled to zero.
	// +optional
	LastScaledDownTime *metav1.Time `json:"lastScaledDownTime,omitempty"`

	// LastSleepCancelledTime is when traffic last cancelled a scale-down: a
	// request or connection reached a resolver during its grace period
	// (spec.scaleDownGracePeriod, the confirmation window). Scale-downs
	// called off for another reason (triggers busy at the end of the grace
	// period, another writer raising the target) do not set it.
	// +optional
	LastSleepCancelledTime *metav1.Time `json:"lastSleepCancelledTime,omitempty"`

	// LastPreWarmTime is the scheduled time of the last spec.preWarm firing
	// the operator acted on. A firing at or before it is never acted on
	// again.
	// +optional
	LastPreWarmTime *metav1.Time `json:"lastPreWarmTime,omitempty"`

	// LastReconciledTime is when the operator last reconciled this object.
	// +optional
	LastReconciledTime *metav1.Time `json:"lastReconciledTime,omitempty"`

	// Conditions: Ready, Active, Idle, TriggersHealthy and ProxyReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProxyPorts are the resolver ports allocated to the Service's ports.
	// +optional
	// +listType=atomic
	ProxyPorts []ProxyPort `json:"proxyPorts,omitempty"`

	// Ledger is the time at zero, the wakes, the last cold start and the
	// resources not reserved while asleep (docs/ledger.md).
	// +optional
	Ledger *Ledger `json:"ledger,omitempty"`

	// WakeProgress is how far the current wake from zero has got; unset
	// when no wake is in progress. The resolvers' waking page shows it.
	// +optional
	WakeProgress *WakeProgress `json:"wakeProgress,omitempty"`

	// Doze records the requests the current doze lowered, per pod and
	// container, so that a wake writes them back (spec.sleepMode Doze).
	// Unset while the target is not dozing.
	// +optional
	Doze *DozeStatus `json:"doze,omitempty"`
}
