package e2e

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// VersionsIn maps each ElastiService, Deployment and proxy slice in ns
// ("kind/name") to its resource version: what a test compares to see
// which of them were written. It lists metadata only: with 10,000 of each
// (the bench's churn), whole objects took minutes to list on a busy
// 2-CPU machine.
func (e *Env) VersionsIn(ctx context.Context, ns string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range []struct {
		kind string
		list schema.GroupVersionKind
		opts []client.ListOption
	}{
		{"ElastiService", elastiv1alpha1.GroupVersion.WithKind("ElastiServiceList"), nil},
		{"Deployment", appsv1.SchemeGroupVersion.WithKind("DeploymentList"), nil},
		{"EndpointSlice", discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"),
			[]client.ListOption{client.MatchingLabels{contract.LabelManagedBy: contract.ManagedBy}}},
	} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(l.list)
		if err := e.Client.List(ctx, list, append(l.opts, client.InNamespace(ns))...); err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			out[l.kind+"/"+o.Name] = o.ResourceVersion
		}
	}
	return out, nil
}

// ChangedVersions lists the keys whose version differs, or that only one
// of a and b has, sorted.
func ChangedVersions(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// RestartCount is how often the kubelet restarted the pod's first
// container.
func RestartCount(p *corev1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

// PodReady tells whether the pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
