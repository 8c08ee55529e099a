package controller

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Event reasons on an ElastiService.
const (
	EventScaledToZero       = "ScaledToZero"
	EventWoke               = "Woke"
	EventModeChanged        = "ModeChanged"
	EventTriggerUnhealthy   = "TriggerUnhealthy"
	EventResolversGone      = "ResolversUnavailable"
	EventScaleFailed        = "ScaleFailed"
	EventTargetChanged      = "ScaleTargetChanged"
	EventAutoscalerNotFound = "AutoscalerNotFound"
	EventScaleDownCalledOff = "ScaleDownCalledOff"
	EventRemovedBeforeReady = "ProxyRemovedBeforeReady"
)

// eventRecorder is the part of events.EventRecorder the reconciler uses.
type eventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}
