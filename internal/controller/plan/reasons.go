package plan

// Condition reasons DesiredStatus sets, beyond the Active ones in
// internal/contract and those of the concern packages (refusals, targets,
// hpacustody, fallback) and of internal/scaling, which it passes on.
const (
	ReasonProxying            = "Proxying"
	ReasonServiceNotFound     = "ServiceNotFound"
	ReasonTargetNotFound      = "TargetNotFound"
	ReasonPortsExhausted      = "PortsExhausted"
	ReasonNoServicePorts      = "NoTCPServicePorts"
	ReasonNoReadyResolvers    = "NoReadyResolvers"
	ReasonResolversAvailable  = "ResolversAvailable"
	ReasonProxySliceReady     = "ProxySliceReady"
	ReasonAllTriggersIdle     = "AllTriggersIdle"
	ReasonTriggerActive       = "TriggerActive"
	ReasonTriggersUnhealthy   = "TriggersUnhealthy"
	ReasonNotEvaluated        = "NotEvaluated"
	ReasonNoTriggers          = "NoTriggers"
	ReasonKeepAwake           = "KeepAwake"
	ReasonEvaluated           = "Evaluated"
	ReasonInvalidEnabledRange = "InvalidEnabledPeriod"
	// ReasonEndpointReady and ReasonNoReadyEndpoint are TargetReady's.
	ReasonEndpointReady   = "EndpointReady"
	ReasonNoReadyEndpoint = "NoReadyEndpoint"
)
