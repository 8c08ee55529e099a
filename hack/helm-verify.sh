#!/usr/bin/env bash
# `make helm-verify`: helm lint the chart, and helm template it with the
# default values and with each toggle on (and all of them together), failing
# on any error. Each case also names a kind its output must contain, so that
# a toggle that silently renders nothing fails too.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
helm=$(hack/helm.sh)
chart=charts/elasti
kube=${K8S_VERSION:-v1.37.2}

# name | --set flags | a kind the output must contain ("-": none)
cases=(
  "default||ValidatingAdmissionPolicy"
  "service-monitor|serviceMonitor.enabled=true|ServiceMonitor"
  "prometheus-rule|prometheusRule.enabled=true|PrometheusRule"
  "resolver-hpa|resolver.autoscaling.enabled=true|HorizontalPodAutoscaler"
  "resolver-pdb|resolver.podDisruptionBudget.enabled=true|PodDisruptionBudget"
  "no-pdb|resolver.podDisruptionBudget.enabled=false|-"
  "namespace-scoped|watchNamespaces={team-a,team-b}|RoleBinding"
  "grafana-dashboard|grafanaDashboard.enabled=true|ConfigMap"
  "all-on|serviceMonitor.enabled=true,prometheusRule.enabled=true,resolver.autoscaling.enabled=true,grafanaDashboard.enabled=true,watchNamespaces={team-a},sentry.existingSecret=sentry,sentry.environment=ci,operator.activationAudiences={elasti},resolver.declarePortRange=true,prometheusAddress=http://prometheus.monitoring:9090|ServiceMonitor"
)

template() { "$helm" template elasti "$chart" --namespace elasti-system --kube-version "$kube" "$@"; }

"$helm" lint "$chart" --strict --kube-version "$kube"

for c in "${cases[@]}"; do
  IFS='|' read -r name set kind <<<"$c"
  args=()
  [[ -n "$set" ]] && args=(--set "$set")
  if ! "$helm" lint "$chart" --strict --quiet --kube-version "$kube" "${args[@]}" >/dev/null; then
    echo "helm-verify: $name: helm lint failed:" >&2
    "$helm" lint "$chart" --strict --kube-version "$kube" "${args[@]}" >&2 || true
    exit 1
  fi
  if ! out=$(template "${args[@]}"); then
    echo "helm-verify: $name: helm template failed" >&2
    exit 1
  fi
  if [[ "$kind" != "-" ]] && ! grep -q "^kind: $kind\$" <<<"$out"; then
    echo "helm-verify: $name: no $kind rendered" >&2
    exit 1
  fi
  echo "helm-verify: $name: ok ($(grep -c '^kind: ' <<<"$out") objects)"
done

# The toggles are off by default: the monitoring.coreos.com CRDs must not
# be needed for a plain install.
defaults=$(template)
for kind in ServiceMonitor PrometheusRule HorizontalPodAutoscaler ConfigMap; do
  if grep -q "^kind: $kind\$" <<<"$defaults"; then
    echo "helm-verify: the default values render a $kind" >&2
    exit 1
  fi
done

# Values the binaries would refuse are refused at render time.
for bad in "portRange.start=30000,portRange.end=20000" "resolver.adminPort=20001" "operator.leaderElection.enabled=false"; do
  if template --set "$bad" >/dev/null 2>&1; then
    echo "helm-verify: --set $bad was not refused" >&2
    exit 1
  fi
done

echo "helm-verify: ok"
