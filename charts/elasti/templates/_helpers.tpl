{{/*
The name prefix of every object: the release name when it already contains
the chart name, else "<release>-<chart>". Cluster-scoped objects carry it
too, so two releases never collide.
*/}}
{{- define "elasti.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "elasti.operatorName" -}}{{ include "elasti.fullname" . }}-operator{{- end -}}
{{- define "elasti.resolverName" -}}{{ include "elasti.fullname" . }}-resolver{{- end -}}
{{- define "elasti.resolverMetricsName" -}}{{ include "elasti.fullname" . }}-resolver-metrics{{- end -}}
{{- define "elasti.webhookName" -}}{{ include "elasti.fullname" . }}-webhook{{- end -}}
{{- define "elasti.webhookSecretName" -}}{{ include "elasti.fullname" . }}-webhook-cert{{- end -}}
{{- define "elasti.activationCAName" -}}{{ include "elasti.fullname" . }}-activation-ca{{- end -}}
{{- define "elasti.metricsAPIName" -}}{{ include "elasti.fullname" . }}-metrics-api{{- end -}}

{{/* Labels on every object. */}}
{{- define "elasti.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Selector labels of one component. The operator finds the resolver pods in
its own namespace by app.kubernetes.io/component=resolver, so install one
release per namespace.
*/}}
{{- define "elasti.selectorLabels" -}}
app.kubernetes.io/name: {{ default .root.Chart.Name .root.Values.nameOverride }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "elasti.componentLabels" -}}
{{ include "elasti.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* image renders repository:tag, the tag defaulting to appVersion. */}}
{{- define "elasti.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag | toString) -}}
{{- end -}}

{{/*
The operator URL the resolvers call for activation: TLS with the webhook's
certificate, or plain HTTP when the webhook (and so the certificate) is off.
*/}}
{{- define "elasti.operatorURL" -}}
{{- printf "%s://%s.%s.svc:8013" (ternary "https" "http" .Values.webhook.enabled) (include "elasti.operatorName" .) .Release.Namespace -}}
{{- end -}}

{{/* The Prometheus job labels of the scraped Services (ServiceMonitor default: the Service name). */}}
{{- define "elasti.resolverJob" -}}{{ include "elasti.resolverMetricsName" . }}{{- end -}}
{{- define "elasti.operatorJob" -}}{{ include "elasti.operatorName" . }}{{- end -}}

{{/*
Sentry environment variables of both components: the DSN from an existing
Secret, optional so that a missing Secret only turns reporting off.
*/}}
{{- define "elasti.sentryEnv" -}}
{{- if .Values.sentry.existingSecret }}
- name: SENTRY_DSN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.sentry.existingSecret }}
      key: {{ .Values.sentry.key }}
      optional: true
{{- end }}
{{- if .Values.sentry.environment }}
- name: SENTRY_ENVIRONMENT
  value: {{ .Values.sentry.environment | quote }}
{{- end }}
{{- end -}}

{{/* The container's memory limit in bytes: the Go runtime's soft limit is
90% of it (internal/memlimit). Without a limit, the downward API gives the
node's allocatable memory. */}}
{{- define "elasti.memoryLimitEnv" -}}
- name: ELASTI_MEMORY_LIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end -}}

{{/* The pod's name, for the resolver's --pod-name (its drain waits until no proxy slice lists it). */}}
{{- define "elasti.podNameEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{/* Pod and container security settings, as in config/operator and config/resolver. */}}
{{- define "elasti.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "elasti.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
Documents of a multi-document YAML file under files/ (copies of the
kustomize manifests that a Go test keeps identical), as a list of maps.
*/}}
{{- define "elasti.docs" -}}
{{- $docs := list -}}
{{- range regexSplit "(?m)^---[ \t]*$" (.root.Files.Get .file) -1 -}}
{{- $d := fromYaml . -}}
{{- if $d.kind -}}
{{- $docs = append $docs $d -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "docs" $docs) -}}
{{- end -}}

{{/*
Resources that exist only at cluster scope: a rule naming one of them
cannot go into a Role.
*/}}
{{- define "elasti.clusterScopedResources" -}}
{{- toJson (list "tokenreviews" "subjectaccessreviews" "namespaces" "nodes" "nodes/stats" "persistentvolumes" "customresourcedefinitions" "clusterroles" "clusterrolebindings") -}}
{{- end -}}

{{/*
The operator's rules, from config/rbac/role.yaml (generated from the
+kubebuilder:rbac markers), split three ways: "cluster" (cluster-scoped
resources), "namespaced" (the rules of the generated ClusterRole on
namespaced resources) and "local" (the generated Role's rules: resolver
pods and the leader-election Lease, in the release namespace).
*/}}
{{- define "elasti.operatorRules" -}}
{{- $clusterScoped := include "elasti.clusterScopedResources" . | fromJsonArray -}}
{{- $cluster := list -}}
{{- $namespaced := list -}}
{{- $local := list -}}
{{- range (include "elasti.docs" (dict "root" . "file" "files/operator-role.yaml") | fromYaml).docs -}}
{{- if eq .kind "Role" -}}
{{- $local = concat $local .rules -}}
{{- else if eq .kind "ClusterRole" -}}
{{- range .rules -}}
{{- $isCluster := false -}}
{{- range .resources -}}
{{- if has . $clusterScoped -}}{{- $isCluster = true -}}{{- end -}}
{{- end -}}
{{- if $isCluster -}}
{{- $cluster = append $cluster . -}}
{{- else -}}
{{- $namespaced = append $namespaced . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "cluster" $cluster "namespaced" $namespaced "local" $local) -}}
{{- end -}}

{{/* The resolver port range as both binaries' --port-range takes it: START-END. */}}
{{- define "elasti.portRange" -}}
{{- printf "%d-%d" (int .Values.portRange.start) (int .Values.portRange.end) -}}
{{- end -}}

{{/* Fail early on values the binaries would refuse (the range: as contract.NewPortRange). */}}
{{- define "elasti.validate" -}}
{{- $start := int .Values.portRange.start -}}
{{- $end := int .Values.portRange.end -}}
{{- if or (lt $start 1) (gt $end 65535) (gt $start $end) -}}
{{- fail (printf "portRange %d-%d: want 1 <= start <= end <= 65535" $start $end) -}}
{{- end -}}
{{- $admin := int .Values.resolver.adminPort -}}
{{- if and (ge $admin $start) (le $admin $end) -}}
{{- fail (printf "resolver.adminPort %d lies inside portRange %d-%d" $admin $start $end) -}}
{{- end -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection.enabled) -}}
{{- fail "operator.replicas > 1 needs operator.leaderElection.enabled: only one operator may reconcile" -}}
{{- end -}}
{{- if and .Values.metricsAPI.enabled (not .Values.webhook.enabled) -}}
{{- fail "metricsAPI.enabled needs webhook.enabled: the metrics API serves with the webhook's certificate" -}}
{{- end -}}
{{- if and .Values.resolver.autoscaling.enabled (gt (int .Values.resolver.autoscaling.minReplicas) (int .Values.resolver.autoscaling.maxReplicas)) -}}
{{- fail "resolver.autoscaling.minReplicas must not exceed maxReplicas" -}}
{{- end -}}
{{- end -}}
