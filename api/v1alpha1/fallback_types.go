package v1alpha1

// Fallback is spec.proxy.fallback: a Service in the same namespace that
// takes the traffic of a target that does not come up in time. The
// resolver forwards to the fallback Service's own ready endpoints, on the
// port with the same name as the Service port the request came in on, so
// the fallback Service must name its ports as the main Service does (for a
// single unnamed port, leave both unnamed). The rule that after is shorter
// than holdTimeout is on ProxySpec, which sees both.
type Fallback struct {
	// Service is the name of the fallback Service, in the ElastiService's
	// namespace. It must not be spec.service itself.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",messageExpression="'spec.proxy.fallback.service must be the name of a Service in the same namespace: lower-case letters, digits and -, starting with a letter and ending with a letter or digit, such as httpbin-static; got \"' + self + '\"'"
	Service string `json:"service"`

	// After is how long a request or connection is held, from the start of
	// its hold, before it goes to the fallback Service: a positive Go
	// duration shorter than holdTimeout, such as 30s. Once one request has
	// gone, new requests go to the fallback at once until the target has a
	// ready endpoint. A wake that fails (pods unschedulable, scale write
	// refused) sends requests to the fallback without waiting for After.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",messageExpression="'spec.proxy.fallback.after must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s or 2m; got \"' + self + '\"'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) > duration('0s')",messageExpression="'spec.proxy.fallback.after must be positive, such as 30s or 2m; got \"' + self + '\", which is not above zero'"
	After string `json:"after"`
}
