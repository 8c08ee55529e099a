package scaletarget

// Event reasons on an ElastiService that Control records.
const (
	// EventTargetChanged: spec.scaleTargetRef changed, and the old target
	// was restored.
	EventTargetChanged = "ScaleTargetChanged"
	// EventAutoscalerNotFound: the KEDA ScaledObject spec.autoscaler names
	// does not exist; the scale to zero went ahead without pausing it.
	EventAutoscalerNotFound = "AutoscalerNotFound"
)
