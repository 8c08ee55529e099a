package route

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// What an ElastiService's spec.proxy says about its ports, read once per
// informer event into values every Target of the ElastiService shares.

// TargetsOf derives the Targets an ElastiService claims, keyed by resolver
// port: none unless its status.mode is proxy, else the allocated ones of
// the ports the resolver carries (contract.ResolverCarries).
func TargetsOf(es *elastiv1alpha1.ElastiService) map[int32]Target {
	out := map[int32]Target{}
	if es.Status.Mode != elastiv1alpha1.ModeProxy {
		return out
	}
	key := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	var hold time.Duration
	var maxHeld int
	var static *StaticRules
	var page *WakingPage
	fallback := FallbackOf(es)
	if p := es.Spec.Proxy; p != nil {
		if d, err := time.ParseDuration(p.HoldTimeout); err == nil && d > 0 {
			hold = min(d, contract.MaxHoldTimeout)
		}
		maxHeld = int(p.MaxHeldRequests)
		static = NewStaticRules(p.StaticResponses)
		page = NewWakingPage(p.WakingPage)
	}
	for _, pp := range es.Status.ProxyPorts {
		if pp.ResolverPort <= 0 || !contract.ResolverCarries(corev1.Protocol(pp.Protocol)) {
			continue
		}
		out[pp.ResolverPort] = Target{
			ElastiService: key,
			Service:       types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service},
			PortName:      pp.Name,
			Port:          pp.Port,
			AppProtocol:   pp.AppProtocol,
			HoldTimeout:   hold,
			MaxHeld:       maxHeld,
			Static:        static,
			Fallback:      fallback,
			WakingPage:    page,
		}
	}
	return out
}

// StaticRules are an ElastiService's spec.proxy.staticResponses, in order.
// Every Target of the ElastiService shares one by pointer, which keeps
// Target comparable, and nobody modifies it once built.
type StaticRules struct {
	Rules []elastiv1alpha1.StaticResponse
}

// NewStaticRules copies rules, so that requests never share the
// informer's object; nil for none.
func NewStaticRules(rules []elastiv1alpha1.StaticResponse) *StaticRules {
	if len(rules) == 0 {
		return nil
	}
	out := &StaticRules{Rules: make([]elastiv1alpha1.StaticResponse, len(rules))}
	for i := range rules {
		rules[i].DeepCopyInto(&out.Rules[i])
	}
	return out
}

// FallbackRoute is spec.proxy.fallback as the resolver uses it: where a
// held request goes when its target does not come up in time.
type FallbackRoute struct {
	// Service is the fallback Service. Its own ready endpoints are dialed,
	// on the port with the name of the Service port the request came in on.
	Service types.NamespacedName
	// After is how long a request is held before it goes to Service.
	After time.Duration
}

// FallbackOf reads spec.proxy.fallback; nil when there is none or it cannot
// be used (admission refuses both: an unparsable after, or the Service
// itself as its own fallback).
func FallbackOf(es *elastiv1alpha1.ElastiService) *FallbackRoute {
	p := es.Spec.Proxy
	if p == nil || p.Fallback == nil || p.Fallback.Service == "" || p.Fallback.Service == es.Spec.Service {
		return nil
	}
	after, err := time.ParseDuration(p.Fallback.After)
	if err != nil || after <= 0 {
		return nil
	}
	return &FallbackRoute{Service: types.NamespacedName{Namespace: es.Namespace, Name: p.Fallback.Service}, After: after}
}

// OperatorSaysFallback reads the operator's FallbackActive condition: True
// when the wake failed (scale write refused, pods not created, pods
// unschedulable) or has taken longer than fallback.after, until the target
// is ready.
func OperatorSaysFallback(es *elastiv1alpha1.ElastiService) bool {
	return FallbackOf(es) != nil && meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionFallbackActive)
}

// Bounds and default of spec.proxy.wakingPage.refreshSeconds, as the API
// declares them; applied again here for objects the API's defaulting or
// validation did not see.
const (
	defaultPageRefresh = 2
	minPageRefresh     = 1
	maxPageRefresh     = 60
)

// WakingPage is spec.proxy.wakingPage as the resolver uses it. Every Target
// of the ElastiService shares one by pointer, which keeps Target
// comparable, and nobody modifies it once built.
type WakingPage struct {
	// Refresh is how often the page reloads itself, in seconds.
	Refresh int
	// HTML replaces the built-in page when not empty; its placeholders are
	// replaced per answer (see the handler package's waking page).
	HTML string
}

// NewWakingPage reads spec.proxy.wakingPage; nil when there is none.
func NewWakingPage(p *elastiv1alpha1.WakingPage) *WakingPage {
	if p == nil {
		return nil
	}
	refresh := int(p.RefreshSeconds)
	if refresh == 0 {
		refresh = defaultPageRefresh
	}
	return &WakingPage{Refresh: min(max(refresh, minPageRefresh), maxPageRefresh), HTML: p.HTML}
}
