package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// annotationPatch is a JSON merge patch that sets annotation key to value, or
// removes it when value is nil.
func annotationPatch(key string, value *string) ([]byte, error) {
	var v any
	if value != nil {
		v = *value
	}
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{key: v}},
	})
	if err != nil {
		return nil, fmt.Errorf("encode patch of annotation %s: %w", key, err)
	}
	return b, nil
}

// patchAnnotation merge-patches one annotation of an ElastiService. A merge
// patch needs only the patch verb, touches nothing else and cannot conflict
// with the operator's writes.
func patchAnnotation(ctx context.Context, c client.Client, key client.ObjectKey, annotation string, value *string) (*elastiv1alpha1.ElastiService, error) {
	body, err := annotationPatch(annotation, value)
	if err != nil {
		return nil, err
	}
	es := &elastiv1alpha1.ElastiService{}
	es.Namespace, es.Name = key.Namespace, key.Name
	if err := c.Patch(ctx, es, client.RawPatch(types.MergePatchType, body)); err != nil {
		return nil, explain(err, esCall("patch", key.Namespace, key.Name))
	}
	return es, nil
}
