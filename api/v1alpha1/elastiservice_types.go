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
//
// +kubebuilder:validation:XValidation:rule="!has(self.sleepMode) || self.sleepMode != 'Doze' || has(self.doze)",message="spec.doze is required with spec.sleepMode: Doze: the CPU request (and, if wanted, the memory request) each container is lowered to while dozing, such as doze: {cpu: 5m}",fieldPath=".doze",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.doze) || (has(self.sleepMode) && self.sleepMode == 'Doze')",message="spec.doze is read only with spec.sleepMode: Doze; set sleepMode: Doze, or remove doze to scale the target to zero",fieldPath=".doze",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.sleepMode) || self.sleepMode != 'Doze' || !has(self.autoscaler)",messageExpression="'spec.sleepMode: Doze cannot be used with spec.autoscaler (' + self.autoscaler.type + ' ' + self.autoscaler.name + ') yet: the dozing pods keep their replicas, and an autoscaler that reads CPU or memory utilization against their lowered requests would scale the target out. Use sleepMode: ScaleToZero with an autoscaler'",fieldPath=".autoscaler"
// +kubebuilder:validation:XValidation:rule="!has(self.sleepMode) || self.sleepMode != 'Doze' || (self.scaleTargetRef.apiVersion == 'apps/v1' && self.scaleTargetRef.kind in ['Deployment', 'StatefulSet'])",messageExpression="'spec.sleepMode: Doze resizes the pods of a Deployment or StatefulSet (apiVersion apps/v1); ' + self.scaleTargetRef.apiVersion + ' ' + self.scaleTargetRef.kind + ' is neither. Use sleepMode: ScaleToZero for it'",fieldPath=".sleepMode"
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

	// The rules of scaleDownGracePeriod are those of EnabledPeriod.Duration,
	// with one more: no number in the value has more than five digits
	// before its decimal point. So CEL's duration() reads every value
	// admitted, and both bounds hold without the operator's webhook.

	// ScaleDownGracePeriod is how long a scale-down waits, with the proxy
	// EndpointSlice already sending the Service's traffic to the resolvers,
	// before the target goes to zero: a Go duration from 0s to 10m, such as
	// 30s. It is also the sleep's confirmation window: a request or
	// connection that reaches a resolver in it cancels the scale-down. A
	// longer window lets the resolvers see more traffic before a sleep, at
	// the cost of that traffic passing through a resolver meanwhile.
	// Defaults to the operator's --grace-period.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",messageExpression="'spec.scaleDownGracePeriod must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s, 2m or 1m30s; got \"' + self + '\"'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",messageExpression="'spec.scaleDownGracePeriod must write each number with at most five digits before its decimal point, in a larger unit if need be, such as 100s rather than 100000ms; got \"' + self + '\"'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) >= duration('0s')",messageExpression="'spec.scaleDownGracePeriod must not be negative, such as 0s, 30s or 2m; got \"' + self + '\". Leave scaleDownGracePeriod out to use the operator default (--grace-period)'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,5}(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) <= duration('10m')",messageExpression="'spec.scaleDownGracePeriod must be at most 10m, the longest a scale-down waits with the resolvers in the data path, such as 30s or 2m; got \"' + self + '\"'"
	ScaleDownGracePeriod string `json:"scaleDownGracePeriod,omitempty"`

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

	// SleepMode is what a sleep does to the target: ScaleToZero (the
	// default) scales it to zero replicas; Doze keeps its pods and lowers
	// their requests in place to spec.doze's floor (see SleepMode). Either
	// way the Service's traffic goes through the resolvers while the
	// target sleeps, and a request wakes it.
	// +optional
	// +kubebuilder:default=ScaleToZero
	SleepMode SleepMode `json:"sleepMode,omitempty"`

	// Doze is the floor of sleepMode Doze: required with it, refused
	// without it.
	// +optional
	Doze *DozeSpec `json:"doze,omitempty"`
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
// +kubebuilder:validation:Enum=prometheus;podMetrics;network
type TriggerType string

// Trigger types.
const (
	// TriggerTypePrometheus evaluates a PromQL query against a threshold.
	TriggerTypePrometheus TriggerType = "prometheus"
	// TriggerTypePodMetrics scrapes a request counter from the target's
	// ready pods itself, with no Prometheus server, and compares its rate
	// over the cooldown period with a threshold.
	TriggerTypePodMetrics TriggerType = "podMetrics"
	// TriggerTypeNetwork reads the bytes the target's pods receive from the
	// kubelets' Summary API, with no Prometheus server and no metrics in
	// the app, and compares what exceeds the pods' own probes with a
	// threshold.
	TriggerTypeNetwork TriggerType = "network"
)

// ScaleTrigger reports whether the target is idle.
//
// Each type reads its own metadata keys and refuses the other type's, so
// that a key that would be ignored is never accepted in silence.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || (has(self.metadata) && has(self.metadata.query) && size(self.metadata.query) > 0)",message="metadata.query is required for a prometheus trigger: a PromQL expression that returns one sample, such as sum(rate(http_requests_total[1m])) or vector(0)",fieldPath=".metadata.query",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || !has(self.metadata) || !has(self.metadata.metricName)",message="metadata.metricName is for podMetrics triggers only; a prometheus trigger reads its value from metadata.query: remove metricName, or write type: podMetrics with metricName: http_requests_total and port: 8080",fieldPath=".metadata.metricName",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || !has(self.metadata) || !has(self.metadata.labels)",message="metadata.labels is for podMetrics triggers only; a prometheus trigger selects series in metadata.query: remove labels, or move them into the query, such as sum(rate(http_requests_total{code=\"200\"}[1m])) or vector(0)",fieldPath=".metadata.labels",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || !has(self.metadata) || !has(self.metadata.port)",message="metadata.port is for podMetrics triggers only; a prometheus trigger reaches Prometheus at metadata.serverAddress: remove port, or write type: podMetrics with metricName: http_requests_total and port: 8080",fieldPath=".metadata.port",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'prometheus' || !has(self.metadata) || !has(self.metadata.path)",message="metadata.path is for podMetrics triggers only; a prometheus trigger reaches Prometheus at metadata.serverAddress: remove path, or write type: podMetrics with path: /metrics",fieldPath=".metadata.path",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'podMetrics' || (has(self.metadata) && has(self.metadata.metricName) && size(self.metadata.metricName) > 0)",message="metadata.metricName is required for a podMetrics trigger: the name of a counter the target's pods export, such as http_requests_total",fieldPath=".metadata.metricName",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type != 'podMetrics' || (has(self.metadata) && has(self.metadata.port))",message="metadata.port is required for a podMetrics trigger: the container port number the pods serve their metrics on, such as 8080",fieldPath=".metadata.port",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type != 'podMetrics' || !has(self.metadata) || !has(self.metadata.query)",message="metadata.query is for prometheus triggers only; a podMetrics trigger reads metadata.metricName from the pods' own metrics page: remove query, and name the counter instead, such as metricName: http_requests_total",fieldPath=".metadata.query",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'podMetrics' || !has(self.metadata) || !has(self.metadata.serverAddress)",message="metadata.serverAddress is for prometheus triggers only; a podMetrics trigger scrapes the target's ready pods itself: remove serverAddress, and name the pods' metrics port instead, such as port: 8080",fieldPath=".metadata.serverAddress",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'podMetrics' || !has(self.metadata) || !has(self.metadata.uptimeFilter)",message="metadata.uptimeFilter is for prometheus triggers only; a podMetrics trigger keeps its own history and reports active until it covers the cooldown period: remove uptimeFilter",fieldPath=".metadata.uptimeFilter",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="self.type != 'network' || !has(self.metadata) || (!has(self.metadata.query) && !has(self.metadata.serverAddress) && !has(self.metadata.uptimeFilter) && !has(self.metadata.headers) && !has(self.metadata.authSecretRef) && !has(self.metadata.basicAuthSecretRef) && !has(self.metadata.metricName) && !has(self.metadata.labels) && !has(self.metadata.port) && !has(self.metadata.path))",message="a network trigger takes only metadata.threshold, in bytes per second received beyond the pods' probes, such as 64; it reads the kubelets, not Prometheus or the pods: remove query, serverAddress, uptimeFilter, headers, authSecretRef, basicAuthSecretRef, metricName, labels, port and path",fieldPath=".metadata",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.authSecretRef) || !has(self.metadata.basicAuthSecretRef)",message="metadata.authSecretRef and metadata.basicAuthSecretRef cannot both be set: a request carries one Authorization header. Keep authSecretRef for a bearer token, or basicAuthSecretRef for a username and password",fieldPath=".metadata.basicAuthSecretRef",reason="FieldValueForbidden"
type ScaleTrigger struct {
	// Type of the trigger: prometheus (a PromQL query), podMetrics (a
	// counter scraped from the target's pods) or network (the bytes the
	// target's pods receive, from the kubelets).
	// +required
	Type TriggerType `json:"type"`

	// Metadata configures the trigger.
	// +optional
	Metadata TriggerMetadata `json:"metadata,omitempty"`
}

// TriggerMetadata configures a trigger. The prometheus keys are KubeElasti's;
// metricName, labels, port and path are podMetrics'.
type TriggerMetadata struct {
	// ServerAddress is the Prometheus base URL of a prometheus trigger. It
	// defaults to the operator's --prometheus-address.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^\\\\s/?#]+([/?#][^\\\\s]*)?$')",messageExpression="'metadata.serverAddress must be an http:// or https:// URL without spaces, such as http://prometheus.monitoring.svc:9090; got \"' + self + '\"'"
	ServerAddress string `json:"serverAddress,omitempty"`

	// Query is a prometheus trigger's PromQL expression that returns one
	// sample. It should return a value even when there is no traffic, e.g. by
	// ending in "or vector(0)".
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Query string `json:"query,omitempty"`

	// Threshold: a result below it means idle. For a prometheus trigger the
	// result is the query's value; for a podMetrics trigger it is the
	// counter's rate in increments per second over the cooldown period,
	// summed over the pods (0.01 is one request in 100 s); for a network
	// trigger it is the bytes per second the pods received over the
	// cooldown period beyond what their probes account for, and it
	// defaults to the operator's --network-threshold. A number or a
	// numeric string between -1e308 and 1e308; admission rejects anything
	// else (see the elasti-trigger-threshold ValidatingAdmissionPolicy).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XPreserveUnknownFields
	Threshold *Threshold `json:"threshold,omitempty"`

	// UptimeFilter is a label selector, such as container="prometheus", for
	// Prometheus's own "up" series. The query is trusted only if that series
	// was 1 for the whole cooldown period. Prometheus triggers only.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	UptimeFilter string `json:"uptimeFilter,omitempty"`

	// Headers are extra HTTP headers sent with every Prometheus query, or
	// with every scrape of a podMetrics trigger.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Headers map[string]string `json:"headers,omitempty"`

	// AuthSecretRef names a key of a Secret in the ElastiService's namespace
	// whose value is sent as a bearer token, to Prometheus or, for a
	// podMetrics trigger, to every pod scraped.
	// +optional
	AuthSecretRef *SecretKeySelector `json:"authSecretRef,omitempty"`

	// BasicAuthSecretRef names a Secret in the ElastiService's namespace
	// whose keys username and password (those of a kubernetes.io/basic-auth
	// Secret) are sent as HTTP basic authentication, to Prometheus or, for
	// a podMetrics trigger, to every pod scraped. It cannot be set with
	// authSecretRef.
	// +optional
	BasicAuthSecretRef *LocalSecretReference `json:"basicAuthSecretRef,omitempty"`

	// MetricName is the counter a podMetrics trigger reads from each pod's
	// metrics page, as the page names it, such as http_requests_total. A
	// counter exposed in OpenMetrics as http_requests (samples
	// http_requests_total) is found under either name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z_:][a-zA-Z0-9_:]*$')",messageExpression="'metadata.metricName must be a Prometheus metric name: letters, digits, _ and :, not starting with a digit, such as http_requests_total; got \"' + self + '\"'"
	MetricName string `json:"metricName,omitempty"`

	// Labels select the counter's series that count, by exact label values,
	// such as {code: "200"} or {handler: "/api"}; the selected series of
	// each pod are summed. Without labels every series of the counter
	// counts. podMetrics triggers only.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))",message="metadata.labels keys must be Prometheus label names: letters, digits and _, not starting with a digit, such as code or handler"
	Labels map[string]string `json:"labels,omitempty"`

	// Port is the number of the container port each ready pod serves its
	// metrics page on, such as 8080 or 9090; the operator scrapes the pod
	// IP on it. A number, not a name: the metrics port is often not one of
	// the Service's ports, and a number needs no Pod read to resolve.
	// podMetrics triggers only, where it is required.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// Path is the HTTP path of the pods' metrics page; /metrics when left
	// out. podMetrics triggers only.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^/[^\\\\s#]*$')",messageExpression="'metadata.path must be an HTTP path starting with / and without spaces or #, such as /metrics; got \"' + self + '\"'"
	Path string `json:"path,omitempty"`
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

// LocalSecretReference names a Secret in the same namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
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
