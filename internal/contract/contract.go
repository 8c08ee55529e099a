package contract

import "time"

// ManagedBy is the value of the endpointslice.kubernetes.io/managed-by label
// on the proxy EndpointSlices the operator writes. The resolver ignores slices
// with this value when it tracks a Service's own endpoints.
const ManagedBy = "elasti.dev"

// Labels and annotations.
const (
	// LabelManagedBy is the standard EndpointSlice managed-by label key.
	LabelManagedBy = "endpointslice.kubernetes.io/managed-by"
	// LabelElastiService names the ElastiService a proxy EndpointSlice
	// belongs to.
	LabelElastiService = "elasti.dev/elastiservice"
	// LabelComponent marks Elasti's own pods: "operator" or "resolver".
	LabelComponent = "app.kubernetes.io/component"
	// ComponentResolver is LabelComponent's value on resolver pods.
	ComponentResolver = "resolver"
	// ComponentOperator is LabelComponent's value on operator pods.
	ComponentOperator = "operator"
	// LabelMetricsAPI is on the operator pod that leads, with the value
	// MetricsAPIServing, while the metrics API is on: the metrics API's
	// Service selects it, so the aggregation layer calls the one replica
	// that evaluates triggers.
	LabelMetricsAPI   = "elasti.dev/metrics-api"
	MetricsAPIServing = "serving"

	// AnnotationWakeNow asks the operator to wake the target now; the
	// operator removes it once acted on. Any value.
	AnnotationWakeNow = "elasti.dev/wake-now"
	// AnnotationKeepAwake, when KeepAwakeOn, keeps the target from
	// sleeping.
	AnnotationKeepAwake = "elasti.dev/keep-awake"
	// AnnotationKEDAPaused records that the operator paused a KEDA
	// ScaledObject, so that it unpauses only what it paused.
	AnnotationKEDAPaused = "elasti.dev/paused-by-elasti"
	// AnnotationScaleTarget is where the operator remembers the scale
	// target it manages (JSON of the scaleTargetRef), so that a changed
	// spec.scaleTargetRef restores the old target. Written by the operator.
	AnnotationScaleTarget = "elasti.dev/managed-scale-target"
	// AnnotationHPAMinReplicas, on a HorizontalPodAutoscaler, records the
	// minReplicas its owner set ("0") while the operator holds the HPA's
	// floor at 1, so that the last step to zero is the operator's alone.
	// Its presence marks the HPA as in the operator's custody; the
	// operator restores the recorded floor and removes it when it lets go.
	// Written by the operator.
	AnnotationHPAMinReplicas = "elasti.dev/hpa-min-replicas"
	// AnnotationHPACustodian, beside AnnotationHPAMinReplicas, names the
	// ElastiService (same namespace) that holds the HPA's floor, so that
	// the floor is restored when that ElastiService stops naming the HPA.
	// Written by the operator.
	AnnotationHPACustodian = "elasti.dev/hpa-custodian"
)

// KeepAwakeOn is the value of AnnotationKeepAwake that pins a target awake.
// Any other value is ignored.
const KeepAwakeOn = "true"

// KeepAwake reports whether an object's annotations pin its target awake.
func KeepAwake(annotations map[string]string) bool {
	return annotations[AnnotationKeepAwake] == KeepAwakeOn
}

// Reasons on the Active condition. The operator writes them, and they carry
// its phase across reconciles and leader changes; kubectl elasti reads them.
const (
	// ReasonServing: the target has replicas and the Service routes to it.
	ReasonServing = "Serving"
	// ReasonScalingDown: the triggers are idle, the proxy slice is in place
	// and the grace period runs before the target goes to zero.
	ReasonScalingDown = "ScalingDown"
	// ReasonScaledToZero: the target is at zero and the resolvers hold its
	// traffic.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonWaking: the target was woken and has no ready endpoint yet.
	ReasonWaking = "Waking"
	// ReasonDozing: the target's pods are kept with their requests lowered
	// to spec.doze's floor (sleepMode Doze), and the resolvers receive the
	// Service's traffic.
	ReasonDozing = "Dozing"
)

// Finalizer lets the operator restore the Service and the workload before an
// ElastiService goes away.
const Finalizer = "elasti.dev/finalizer"

// Activation API: the resolver asks the operator to wake a target.
const (
	// ActivationPath is the operator's activation endpoint. The request is a
	// POST with an ActivationRequest JSON body and an
	// "Authorization: Bearer <ServiceAccount token>" header.
	ActivationPath = "/v1/activate"
	// DefaultActivationPort is the port of the operator's activation server.
	DefaultActivationPort = 8013
)

// ActivationRequest is the body of an activation call.
type ActivationRequest struct {
	Namespace     string `json:"namespace"`
	ElastiService string `json:"elastiService"`
}

// ActivationResponse is the body of a successful activation call.
type ActivationResponse struct {
	// Replicas is the replica count the target was scaled to.
	Replicas int32 `json:"replicas"`
}

// DefaultHoldTimeout is the longest a resolver holds a request or connection
// when neither spec.proxy.holdTimeout nor --hold-timeout says otherwise. The
// operator waits as long for a target to come back before it removes the
// proxy of a deleted ElastiService: held requests time out then anyway.
const DefaultHoldTimeout = 5 * time.Minute

// MaxHoldTimeout is the longest spec.proxy.holdTimeout the API accepts
// (its CEL rule says 1h): long enough for a model that takes tens of
// minutes to load, short enough that a forgotten request does not hold a
// slot for a day. The resolver caps a longer value that reached it anyway.
const MaxHoldTimeout = time.Hour

// MaxScaleDownGracePeriod is the longest spec.scaleDownGracePeriod the API
// accepts (its CEL rule says 10m). The operator caps a longer value that
// reached it anyway.
const MaxScaleDownGracePeriod = 10 * time.Minute

// Resolver metrics the operator reads (its metrics API): the resolvers
// export them on their admin port, labelled with MetricLabelNamespace and
// MetricLabelElastiService.
const (
	ResolverHeldMetric       = "elasti_resolver_held_requests"
	ResolverForwardedMetric  = "elasti_resolver_forwarded_total"
	MetricLabelNamespace     = "namespace"
	MetricLabelElastiService = "elastiservice"
)
