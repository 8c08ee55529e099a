package controller

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Event reasons on an ElastiService.
const (
	EventScaledToZero     = "ScaledToZero"
	EventWoke             = "Woke"
	EventModeChanged      = "ModeChanged"
	EventTriggerUnhealthy = "TriggerUnhealthy"
	EventResolversGone    = "ResolversUnavailable"
	EventScaleFailed      = "ScaleFailed"
	// EventScaleDownCalledOff: another writer raised the target before the
	// scale to zero; its count stands.
	EventScaleDownCalledOff = "ScaleDownCalledOff"
	// EventSleepCancelled: traffic reached a resolver during a scale-down's
	// grace period, its confirmation window, and cancelled the sleep.
	EventSleepCancelled     = "SleepCancelled"
	EventRemovedBeforeReady = "ProxyRemovedBeforeReady"
	// EventPreWarmed: a spec.preWarm firing was acted on: the target was
	// woken, or was up already and its cooldown starts again.
	EventPreWarmed = "PreWarmed"
	// EventDozed: a sleepMode Doze lowered the requests of the target's
	// pods; EventDozeRefused: they could not doze, and the target went to
	// zero instead; EventDozeWoke: their requests are back.
	EventDozed       = "Dozed"
	EventDozeRefused = "DozeRefused"
	EventDozeWoke    = "DozeWoke"
	// EventDozeWakeRefused: the API server refused to give a dozing pod
	// its requests back (its node has no room).
	EventDozeWakeRefused = "DozeWakeRefused"
)

// eventRecorder is the part of events.EventRecorder the reconciler uses.
type eventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}
