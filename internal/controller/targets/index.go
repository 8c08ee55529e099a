package targets

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// Index is the field index of ElastiServices by the "group/Kind/name" of
// their target (Key), which IndexValues computes: the target watches map a
// target to the ElastiServices that name it through it, and the reconciler
// finds rivals for one target with it.
const Index = "elasti.spec.scaleTargetRef"

// Key is a target's value in Index. The version is left out: two
// ElastiServices that name one target in two versions name the same object.
func Key(group, kind, name string) string { return group + "/" + kind + "/" + name }

// IndexValues is the indexer of Index: the Key of an ElastiService's
// target, none when the target's apiVersion cannot be parsed.
func IndexValues(obj client.Object) []string {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	gvk, err := scaling.TargetGVK(es.Spec.ScaleTargetRef)
	if err != nil {
		return nil
	}
	return []string{Key(gvk.Group, gvk.Kind, es.Spec.ScaleTargetRef.Name)}
}
