#!/usr/bin/env bash
# Records the network trigger's fixtures from the local cluster's real
# kubelet (make cluster-up images; then run it as root, from anywhere):
# four demo app pods: one with an HTTP readiness probe every second, one
# with an HTTP readiness probe every 10 s and a TCP liveness probe every
# 5 s, one with a gRPC readiness probe every second, one with no probe.
# Three Summary API responses 30 s apart; all the while the pod probe10s gets one keep-alive HTTP request every 5 s from the
# node's network namespace, and the others get only their probes.
set -euo pipefail
cd "$(dirname "$0")"
export KUBECONFIG=/tmp/elasti-cluster/kubeconfig PATH=$HOME/.cache/elasti/k8s-v1.37.2:$PATH
kubectl apply -f pods.yaml
kubectl -n measure wait --for=condition=Ready pod --all --timeout=60s
sleep 20 # past the pods' start-up traffic
token=$(kubectl -n measure create token reader --duration 10m)
summary() {
  ip netns exec elasti-node curl -sf --cacert /tmp/elasti-cluster/pki/ca.crt \
    -H "Authorization: Bearer $token" https://10.250.0.2:10250/stats/summary
}
ip=$(kubectl -n measure get pod probe10s -o jsonpath='{.status.podIP}')
ip netns exec elasti-node python3 keepalive.py "$ip" 19 5 &
sleep 2
: > times.txt
for i in 0 1 2; do
  [ "$i" = 0 ] || sleep 30
  summary > "summary-t$i.json"
  date -u +%Y-%m-%dT%H:%M:%S.%NZ >> times.txt
done
wait
kubectl -n measure get pods -o json > pods.json
