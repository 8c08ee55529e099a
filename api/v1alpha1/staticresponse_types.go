package v1alpha1

// The CEL rules below name a list element as staticResponses[] because a
// rule cannot know its index; the API server puts the exact path, index
// included, in front of every message.

// StaticResponse is one rule of spec.proxy.staticResponses: HTTP requests
// that match it are answered by the resolver itself, without waking the
// target and without counting as traffic.
type StaticResponse struct {
	// Name identifies the rule in the Elasti-Static-Response header and in
	// the resolver's metrics. A DNS label, unique within the list.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",messageExpression="'spec.proxy.staticResponses[].name must be a DNS label: lower-case letters, digits and -, starting and ending with a letter or digit, such as healthz; got \"' + self + '\"'"
	Name string `json:"name"`

	// Match says which requests the rule answers. Every condition set must
	// hold.
	// +required
	Match StaticResponseMatch `json:"match"`

	// Respond is the answer: a status, headers and a body. Left out: an
	// empty 200.
	// +optional
	// +kubebuilder:default={}
	Respond StaticReply `json:"respond,omitempty"`

	// When says in which state of the target the rule applies: AtZero (the
	// default) while the target has no ready endpoint, Always whenever the
	// request reaches the resolver.
	// +optional
	// +kubebuilder:default=AtZero
	When StaticResponseWhen `json:"when,omitempty"`
}

// StaticResponseWhen says when a static response rule applies.
// +kubebuilder:validation:Enum=AtZero;Always
type StaticResponseWhen string

const (
	// StaticResponseAtZero applies the rule only while the Service's port
	// has no ready endpoint: the target is at zero or still waking.
	StaticResponseAtZero StaticResponseWhen = "AtZero"
	// StaticResponseAlways applies the rule to every request that reaches
	// the resolver, which happens only while the Service is in proxy mode:
	// at zero, while waking, in the grace period of a scale-down and while
	// data planes converge back to serve mode.
	StaticResponseAlways StaticResponseWhen = "Always"
)

// StaticResponseMatch is the conjunction of a rule's conditions. At least
// one must be set, so that no rule answers every request by accident.
//
// +kubebuilder:validation:XValidation:rule="(has(self.methods) && size(self.methods) > 0) || has(self.path) || (has(self.headers) && size(self.headers) > 0) || (has(self.query) && size(self.query) > 0)",message="spec.proxy.staticResponses[].match must set at least one of methods, path, headers or query, such as path: {exact: /healthz}"
type StaticResponseMatch struct {
	// Methods the request's method must be one of, such as GET and HEAD.
	// Empty or left out: any method.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	Methods []HTTPMethod `json:"methods,omitempty"`

	// Path matches the request's path (decoded, without the query).
	// +optional
	Path *PathMatch `json:"path,omitempty"`

	// Headers must all match. This is how a User-Agent is matched.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Headers []HeaderMatch `json:"headers,omitempty"`

	// Query parameters must all match.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Query []QueryMatch `json:"query,omitempty"`
}

// HTTPMethod is an HTTP request method in capitals, such as GET.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Z_-]*$')",messageExpression="'spec.proxy.staticResponses[].match.methods must list HTTP methods in capitals, such as GET or HEAD; got \"' + self + '\"'"
type HTTPMethod string

// PathMatch matches the request's path exactly or by prefix.
//
// +kubebuilder:validation:XValidation:rule="has(self.exact) != has(self.prefix)",message="spec.proxy.staticResponses[].match.path must set exactly one of exact or prefix, such as exact: /healthz or prefix: /health/"
type PathMatch struct {
	// Exact: the path must equal it, such as /healthz.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",messageExpression="'spec.proxy.staticResponses[].match.path.exact must start with /, such as /healthz; got \"' + self + '\"'"
	Exact *string `json:"exact,omitempty"`

	// Prefix: the path must start with it, character by character, such as
	// /health/ (which /healthz does not match, while /health does).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",messageExpression="'spec.proxy.staticResponses[].match.path.prefix must start with /, such as /health/; got \"' + self + '\"'"
	Prefix *string `json:"prefix,omitempty"`
}

// HeaderMatch matches one request header. The name is compared without
// regard to case, the value exactly (case included). A header sent several
// times matches if any of its values does.
//
// +kubebuilder:validation:XValidation:rule="(has(self.exact) ? 1 : 0) + (has(self.prefix) ? 1 : 0) + (has(self.contains) ? 1 : 0) == 1",message="spec.proxy.staticResponses[].match.headers[] must set exactly one of exact, prefix or contains, such as {name: User-Agent, prefix: kube-probe/}"
type HeaderMatch struct {
	// Name of the header, such as User-Agent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9!#$%&*+.^_|~-]+$')",messageExpression="'spec.proxy.staticResponses[].match.headers[].name must be an HTTP header name: letters, digits and !#$%&*+.^_|~-, such as User-Agent; got \"' + self + '\"'"
	Name string `json:"name"`

	// Exact: a value of the header must equal it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Exact *string `json:"exact,omitempty"`

	// Prefix: a value of the header must start with it, such as
	// kube-probe/. An empty prefix matches any value: the header must be
	// present.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix *string `json:"prefix,omitempty"`

	// Contains: a value of the header must contain it, such as UptimeRobot.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Contains *string `json:"contains,omitempty"`
}

// QueryMatch matches one query parameter by name (case included).
type QueryMatch struct {
	// Name of the parameter, such as probe.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// Exact: a value of the parameter must equal it, after URL decoding.
	// Left out: the parameter must be present, with any value or none
	// (?probe, ?probe= and ?probe=1 all match).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Exact *string `json:"exact,omitempty"`
}

// StaticReply is what the resolver answers to a request a rule matches.
//
// +kubebuilder:validation:XValidation:rule="!has(self.body) || size(self.body) == 0 || !has(self.status) || !(self.status in [204, 304])",message="spec.proxy.staticResponses[].respond.body must be empty with status 204 or 304, which carry no body; use status 200 with a body such as ok"
type StaticReply struct {
	// Status is the HTTP status code, 200 to 599. 1xx codes are not final
	// answers in HTTP and are refused.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=200
	// +kubebuilder:validation:Maximum=599
	Status int32 `json:"status,omitempty"`

	// Headers are set on the answer. Headers that frame the connection or
	// the body (Connection, Content-Length, Keep-Alive, Proxy-Connection,
	// TE, Trailer, Transfer-Encoding, Upgrade) are the resolver's own and
	// are refused. Without a Content-Type, a non-empty body is sent as
	// text/plain; charset=utf-8.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 256 && k.matches('^[A-Za-z0-9!#$%&*+.^_|~-]+$'))",message="spec.proxy.staticResponses[].respond.headers must have HTTP header names of at most 256 characters: letters, digits and !#$%&*+.^_|~-, such as Cache-Control"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['connection', 'content-length', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']))",message="spec.proxy.staticResponses[].respond.headers must not set Connection, Content-Length, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding or Upgrade, which the resolver sets itself; set others, such as Cache-Control: no-store"
	Headers map[string]StaticHeaderValue `json:"headers,omitempty"`

	// Body of the answer, at most 4096 characters. Empty: no body.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Body string `json:"body,omitempty"`
}

// StaticHeaderValue is the value of a header of a static response: at
// most 1024 characters, without control characters other than tab.
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x08\\\\x0a-\\\\x1f\\\\x7f]')",message="spec.proxy.staticResponses[].respond.headers values must not contain control characters such as line breaks; write them on one line, such as no-store"
type StaticHeaderValue string
