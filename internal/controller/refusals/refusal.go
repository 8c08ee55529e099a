package refusals

// Ready reasons of configurations Elasti refuses. A refused ElastiService
// never takes its Service into the data path: its target stays awake (or
// is woken, if it sleeps), no proxy slice exists, and Ready=False with one
// of these reasons says what to change. Each also goes out as a Warning
// Event with the same reason.
const (
	ReasonHeadlessService      = "HeadlessService"
	ReasonExternalNameService  = "ExternalNameService"
	ReasonServiceNoSelector    = "ServiceWithoutSelector"
	ReasonNonTCPServicePort    = "NonTCPServicePort"
	ReasonLocalTrafficPolicy   = "LocalTrafficPolicy"
	ReasonResolverFamilyAbsent = "NoResolverInIPFamily"
	ReasonSelectorMissesTarget = "ServiceDoesNotSelectTarget"
	// ReasonServiceClaimed and ReasonTargetClaimed: an older ElastiService
	// already manages the Service or the target.
	ReasonServiceClaimed = "ServiceAlreadyManaged"
	ReasonTargetClaimed  = "TargetAlreadyManaged"
)

// Refusal is why Elasti will not put a Service in the data path: the
// Ready reason and message. The zero value means it may.
type Refusal struct {
	Reason, Message string
}

// Refused reports whether f refuses.
func (f Refusal) Refused() bool { return f.Reason != "" }

// Is reports whether a Ready reason is one of the refusals above.
func Is(reason string) bool {
	switch reason {
	case ReasonHeadlessService, ReasonExternalNameService, ReasonServiceNoSelector, ReasonNonTCPServicePort,
		ReasonLocalTrafficPolicy, ReasonResolverFamilyAbsent, ReasonSelectorMissesTarget,
		ReasonServiceClaimed, ReasonTargetClaimed:
		return true
	}
	return false
}
