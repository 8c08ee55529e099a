package hpacustody

// Event reasons of the custody, on the ElastiService that names the HPA.
const (
	// EventFloorRaised: the HPA spec.autoscaler names had minReplicas 0;
	// the operator raised it to 1 and takes the last step to zero itself.
	EventFloorRaised = "HPAFloorRaised"
	// EventFloorNotRaised: that floor could not be raised; the target is
	// kept awake.
	EventFloorNotRaised = "HPAFloorNotRaised"
	// EventFloorReleased: the operator let go of the HPA's floor.
	EventFloorReleased = "HPAFloorReleased"
	// EventFloorNotRestored: letting go of the floor failed.
	EventFloorNotRestored = "HPAFloorNotRestored"
)

// Condition reasons of the custody.
const (
	// ReasonMetricsUnavailable (TriggersHealthy): the HPA in custody does
	// not report a reading for each of its metrics, so it cannot say the
	// target is idle.
	ReasonMetricsUnavailable = "HPAMetricsUnavailable"
	// ReasonFloorNotRaised (Idle): the HPA could take the target to zero
	// itself and its floor could not be raised, so the target is kept awake.
	ReasonFloorNotRaised = "HPAFloorNotRaised"
)
