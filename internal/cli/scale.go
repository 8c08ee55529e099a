package cli

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// scaleReading is what the target's /scale subresource said, or why it could
// not be read.
type scaleReading struct {
	// current is status.replicas: the pods the workload has now.
	current int32
	// desired is spec.replicas: what the target is scaled to.
	desired int32
	err     error
}

// readScale reads the scale target's /scale subresource, as the operator
// does, so it works for any scalable kind.
func readScale(ctx context.Context, c client.Client, es *elastiv1alpha1.ElastiService) scaleReading {
	ref := es.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return scaleReading{err: fmt.Errorf("scaleTargetRef.apiVersion %q: %w", ref.APIVersion, err)}
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(gv.WithKind(ref.Kind))
	target.SetNamespace(es.Namespace)
	target.SetName(ref.Name)
	scale := &unstructured.Unstructured{}
	scale.SetGroupVersionKind(schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"})
	if err := c.SubResource("scale").Get(ctx, target, scale); err != nil {
		call := apiCall{verb: "get", group: gv.Group, resource: strings.ToLower(ref.Kind) + "s/scale", namespace: es.Namespace, name: ref.Name}
		if mapping, mErr := c.RESTMapper().RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version); mErr == nil {
			call.resource = mapping.Resource.Resource + "/scale"
		}
		return scaleReading{err: explain(err, call)}
	}
	desired, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	current, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas")
	return scaleReading{current: int32(current), desired: int32(desired)}
}
