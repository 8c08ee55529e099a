package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ElastiService puts an existing workload and its Service under scale-to-zero.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=esvc,categories=elasti
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.scaleTargetRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.scaleTargetRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minTargetReplicas`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ElastiService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ElastiServiceSpec   `json:"spec"`
	Status ElastiServiceStatus `json:"status,omitempty"`
}

// ElastiServiceList is a list of ElastiService.
//
// +kubebuilder:object:root=true
type ElastiServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ElastiService `json:"items"`
}

// ElastiServiceSpec says which Service and workload to manage and when the
// workload may sleep. Field names follow KubeElasti's, so a manifest migrates by
// changing its apiVersion.
type ElastiServiceSpec struct {
	// Service is the name of the existing Service, in the same namespace, that
	// clients call.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",messageExpression="'spec.service must be the name of a Service in the same namespace: lower-case letters, digits and -, starting with a letter and ending with a letter or digit, such as httpbin; got \"' + self + '\"'"
	Service string `json:"service"`

	// ScaleTargetRef names the workload to scale. It must have a /scale
	// subresource: a Deployment, StatefulSet, ReplicaSet, Argo Rollout or any
	// scalable custom resource.
	// +required
	ScaleTargetRef ScaleTargetRef `json:"scaleTargetRef"`

	// MinTargetReplicas is the replica count a wake scales the target to.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MinTargetReplicas int32 `json:"minTargetReplicas,omitempty"`

	// CooldownPeriod is how many seconds the target stays up after it woke
	// before it may be scaled to zero, and how long the triggers must have
	// reported idle.
	// +optional
	// +kubebuilder:default=900
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	CooldownPeriod int32 `json:"cooldownPeriod,omitempty"`

	// Triggers decide when the target is idle. All of them must report idle
	// before it is scaled to zero. Without triggers the target never sleeps on
	// its own.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Triggers []ScaleTrigger `json:"triggers,omitempty"`

	// Autoscaler names an HPA or KEDA ScaledObject that also scales the
	// target. A KEDA ScaledObject is paused while the target is at zero.
	// +optional
	Autoscaler *AutoscalerRef `json:"autoscaler,omitempty"`

	// EnabledPeriod limits scaling to zero to a recurring window. Outside it
	// the target stays up.
	// +optional
	EnabledPeriod *EnabledPeriod `json:"enabledPeriod,omitempty"`

	// PreWarm wakes the target on a schedule, ahead of a known busy time,
	// as a request would wake it.
	// +optional
	PreWarm *PreWarm `json:"preWarm,omitempty"`

	// Proxy tunes how the resolver holds traffic while the target is at zero.
	// +optional
	Proxy *ProxySpec `json:"proxy,omitempty"`
}

// ScaleTargetRef names a resource with a /scale subresource in the
// ElastiService's namespace.
//
// The rules on the whole reference read apiVersion and kind, so each first
// checks that the fields it reads are well formed: a malformed apiVersion or
// kind gets only its own field's message, not a second one about scaling.
//
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$') || !self.kind.matches('^[A-Z][A-Za-z0-9]*$') || self.apiVersion != 'v1' || self.kind == 'ReplicationController'",messageExpression="'spec.scaleTargetRef: kind ' + self.kind + ' of apiVersion v1 has no /scale subresource; in core v1 only ReplicationController scales. Name a scalable workload, such as apiVersion apps/v1 with kind Deployment'"
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$') || !self.kind.matches('^[A-Z][A-Za-z0-9]*$') || !self.apiVersion.startsWith('apps/') || (self.apiVersion == 'apps/v1' && self.kind in ['Deployment', 'StatefulSet', 'ReplicaSet'])",messageExpression="'spec.scaleTargetRef: ' + self.apiVersion + ' ' + self.kind + ' is not scalable; use apiVersion apps/v1 with kind Deployment, StatefulSet or ReplicaSet'"
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$') || !self.kind.matches('^[A-Z][A-Za-z0-9]*$') || !self.apiVersion.startsWith('argoproj.io/') || (self.apiVersion == 'argoproj.io/v1alpha1' && self.kind == 'Rollout')",messageExpression="'spec.scaleTargetRef: ' + self.apiVersion + ' ' + self.kind + ' is not scalable; use apiVersion argoproj.io/v1alpha1 with kind Rollout'"
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$') || self.apiVersion == 'v1' || self.apiVersion.startsWith('apps/') || self.apiVersion.split('/')[0].contains('.')",messageExpression="'spec.scaleTargetRef.apiVersion: ' + self.apiVersion + ' names a built-in group without scalable kinds; use apps/v1, v1 (ReplicationController) or the group/version of a scalable custom resource, such as argoproj.io/v1alpha1'",fieldPath=".apiVersion"
// +kubebuilder:validation:XValidation:rule="!self.apiVersion.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$') || !self.apiVersion.split('/')[0].endsWith('.k8s.io')",messageExpression="'spec.scaleTargetRef.apiVersion: ' + self.apiVersion + ' is a built-in Kubernetes group without scalable kinds; use apps/v1, v1 (ReplicationController) or the group/version of a scalable custom resource, such as argoproj.io/v1alpha1'",fieldPath=".apiVersion"
type ScaleTargetRef struct {
	// APIVersion of the target, e.g. apps/v1 or argoproj.io/v1alpha1.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$')",messageExpression="'spec.scaleTargetRef.apiVersion must be a version or a group/version: an optional lower-case DNS group and a slash, then v1, v1alpha1 or v1beta1 style, such as apps/v1 or argoproj.io/v1alpha1; got \"' + self + '\"'"
	APIVersion string `json:"apiVersion"`

	// Kind of the target, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",messageExpression="'spec.scaleTargetRef.kind must be a Kubernetes kind: a capital letter followed by letters and digits, such as Deployment; got \"' + self + '\"'"
	Kind string `json:"kind"`

	// Name of the target in the ElastiService's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TriggerType names a kind of trigger.
// +kubebuilder:validation:Enum=prometheus
type TriggerType string

// TriggerTypePrometheus evaluates a PromQL query against a threshold.
const TriggerTypePrometheus TriggerType = "prometheus"

// ScaleTrigger reports whether the target is idle.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || (has(self.metadata) && has(self.metadata.query) && size(self.metadata.query) > 0)",message="metadata.query is required for a prometheus trigger: a PromQL expression that returns one sample, such as sum(rate(http_requests_total[1m])) or vector(0)",fieldPath=".metadata.query",reason="FieldValueRequired"
type ScaleTrigger struct {
	// Type of the trigger. Only prometheus is supported today.
	// +required
	Type TriggerType `json:"type"`

	// Metadata configures the trigger.
	// +optional
	Metadata TriggerMetadata `json:"metadata,omitempty"`
}

// TriggerMetadata configures a trigger. The keys are KubeElasti's.
type TriggerMetadata struct {
	// ServerAddress is the Prometheus base URL. It defaults to the
	// operator's --prometheus-address.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^\\\\s/?#]+([/?#][^\\\\s]*)?$')",messageExpression="'metadata.serverAddress must be an http:// or https:// URL without spaces, such as http://prometheus.monitoring:9090; got \"' + self + '\"'"
	ServerAddress string `json:"serverAddress,omitempty"`

	// Query is a PromQL expression that returns one sample. It should return a
	// value even when there is no traffic, e.g. by ending in "or vector(0)".
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Query string `json:"query,omitempty"`

	// Threshold: a query result below it means idle. A number or a numeric
	// string between -1e308 and 1e308; admission rejects anything else (see
	// the elasti-trigger-threshold ValidatingAdmissionPolicy).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XPreserveUnknownFields
	Threshold *Threshold `json:"threshold,omitempty"`

	// UptimeFilter is a label selector, such as container="prometheus", for
	// Prometheus's own "up" series. The query is trusted only if that series
	// was 1 for the whole cooldown period.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	UptimeFilter string `json:"uptimeFilter,omitempty"`

	// Headers are extra HTTP headers sent with every query.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Headers map[string]string `json:"headers,omitempty"`

	// AuthSecretRef names a key of a Secret in the ElastiService's namespace
	// whose value is sent as a bearer token.
	// +optional
	AuthSecretRef *SecretKeySelector `json:"authSecretRef,omitempty"`
}

// SecretKeySelector names one key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// AutoscalerType names an autoscaler that also scales the target.
// +kubebuilder:validation:Enum=hpa;keda
type AutoscalerType string

// Autoscaler types.
const (
	AutoscalerHPA  AutoscalerType = "hpa"
	AutoscalerKEDA AutoscalerType = "keda"
)

// AutoscalerRef names an HPA or a KEDA ScaledObject in the same namespace.
type AutoscalerRef struct {
	// Type is hpa or keda.
	// +required
	Type AutoscalerType `json:"type"`
	// Name of the HorizontalPodAutoscaler or ScaledObject.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EnabledPeriod is a recurring window, a cron schedule and a duration, inside
// which the target may be scaled to zero.
type EnabledPeriod struct {
	// Schedule is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week) or a descriptor such as @daily, read
	// in TimeZone. Admission checks its shape and parses it with the
	// operator's cron parser, so out-of-range fields such as minute 61 are
	// refused.
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*/,?-]+( +[0-9A-Za-z*/,?-]+){4})$')",messageExpression="'spec.enabledPeriod.schedule must be a five-field cron expression (minute hour day-of-month month day-of-week) such as \"0 9 * * 1-5\", or a descriptor such as @daily; got \"' + self + '\"'"
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, such as
	// Europe/Berlin. Empty means UTC. Admission checks its shape and loads
	// it from the operator's time zone database.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$') && self != 'Local'",messageExpression="'spec.enabledPeriod.timeZone must be an IANA time zone name, area/location such as Europe/Berlin or America/New_York, or UTC; got \"' + self + '\"'"
	TimeZone string `json:"timeZone,omitempty"`

	// Two rules check a duration (here and in ProxySpec.HoldTimeout). The
	// first is Go's duration syntax, sign included, so that "-5m" is told it
	// must be positive rather than that it is not a duration. The second
	// reads the value with CEL's duration(), which is Go's time.ParseDuration,
	// but only when no number in it has more than five digits: with
	// MaxLength 64 such a value cannot overflow, so duration() never fails
	// at run time. A longer spelling is left to the operator's admission
	// webhook, which parses every duration with Go.

	// Duration of each window, a positive Go duration such as 8h or 90m.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",messageExpression="'spec.enabledPeriod.duration must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 8h, 90m or 1h30m; got \"' + self + '\"'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) > duration('0s')",messageExpression="'spec.enabledPeriod.duration must be positive, such as 8h, 90m or 1h30m; got \"' + self + '\", which is not above zero'"
	Duration string `json:"duration"`
}

// PreWarm is a schedule of wakes. At each firing a target at zero is woken
// as a request would wake it, and the cooldown starts again from the
// firing's wake.
type PreWarm struct {
	// Schedule is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week) or a descriptor such as @daily, read
	// in TimeZone: when to wake the target. Admission checks its shape and
	// parses it with the operator's cron parser.
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*/,?-]+( +[0-9A-Za-z*/,?-]+){4})$')",messageExpression="'spec.preWarm.schedule must be a five-field cron expression (minute hour day-of-month month day-of-week) such as \"55 8 * * 1-5\", or a descriptor such as @daily; got \"' + self + '\"'"
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, such as
	// Europe/Berlin. Empty means UTC. Admission checks its shape and loads
	// it from the operator's time zone database.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$') && self != 'Local'",messageExpression="'spec.preWarm.timeZone must be an IANA time zone name, area/location such as Europe/Berlin or America/New_York, or UTC; got \"' + self + '\"'"
	TimeZone string `json:"timeZone,omitempty"`
}

// ProxySpec tunes how the resolver holds traffic while the target is at zero.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fallback) || !has(self.holdTimeout) || !self.holdTimeout.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || !self.fallback.after.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self.fallback.after) < duration(self.holdTimeout)",messageExpression="'spec.proxy.fallback.after must be shorter than spec.proxy.holdTimeout, or held requests time out before they could go to the fallback; got after ' + self.fallback.after + ' with holdTimeout ' + self.holdTimeout + ', such as after: 30s with holdTimeout: 10m'",fieldPath=".fallback.after"
type ProxySpec struct {
	// HoldTimeout is the longest a request or connection is held, a
	// positive Go duration of at most 1h. After it HTTP gets 504 and TCP is
	// closed. Defaults to the resolver's --hold-timeout.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",messageExpression="'spec.proxy.holdTimeout must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s, 5m or 1h30m; got \"' + self + '\"'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) > duration('0s')",messageExpression="'spec.proxy.holdTimeout must be positive, such as 30s or 5m; got \"' + self + '\", which is not above zero. Leave holdTimeout out to use the resolver default (--hold-timeout)'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) <= duration('1h')",messageExpression="'spec.proxy.holdTimeout must be at most 1h, the longest a resolver holds a request or connection, such as 20m for a model that takes minutes to load; got \"' + self + '\"'"
	HoldTimeout string `json:"holdTimeout,omitempty"`

	// MaxHeldRequests bounds the requests held per resolver replica for this
	// service. Beyond it HTTP gets 503 with Retry-After. Defaults to the
	// resolver's --max-held-requests.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxHeldRequests int32 `json:"maxHeldRequests,omitempty"`

	// StaticResponses answer matching HTTP requests at the resolver, such
	// as health checks, without waking the target and without counting as
	// traffic. Rules are tried in order; the first that matches and applies
	// in the target's current state answers.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(s, s.name == r.name))",message="spec.proxy.staticResponses[].name must be unique in the list, and two rules share a name; give each rule its own name, such as healthz and readyz"
	StaticResponses []StaticResponse `json:"staticResponses,omitempty"`

	// Fallback names a Service in the same namespace that takes held and
	// new requests when the target is not ready within fallback.after, or
	// when its wake fails (pods unschedulable, scale write refused), until
	// the target is ready. See docs/cold-starts.md.
	// +optional
	Fallback *Fallback `json:"fallback,omitempty"`

	// WakingPage, when set, answers a browser's GET while the target wakes
	// with a page that reloads itself and shows the wake's progress, instead
	// of holding it. See docs/waking-page.md.
	// +optional
	WakingPage *WakingPage `json:"wakingPage,omitempty"`
}
