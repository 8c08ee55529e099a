package scaling

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"elasti.dev/elasti/internal/contract"
)

// TestHPAFloor: holding an HPA's floor raises minReplicas 0 to 1 and
// records the 0 and the holder; releasing puts the 0 back, or leaves an
// owner's higher floor; a write from a stale read is refused.
func TestHPAFloor(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web", Annotations: map[string]string{"keep": "me"}},
		Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](0), MaxReplicas: 5},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(h).Build()
	a := &Autoscalers{Reader: c, Writer: c}
	get := func() *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		got := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(h), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	read := get()
	stale := read.DeepCopy()
	if err := a.HoldHPAFloor(ctx, read, "web-es"); err != nil {
		t.Fatal(err)
	}
	got := get()
	if ptr.Deref(got.Spec.MinReplicas, -1) != 1 {
		t.Errorf("held: minReplicas %v, want 1", got.Spec.MinReplicas)
	}
	want := map[string]string{"keep": "me", contract.AnnotationHPAMinReplicas: "0", contract.AnnotationHPACustodian: "web-es"}
	if diff := cmp.Diff(want, got.Annotations); diff != "" {
		t.Errorf("held: annotations (-want +got)\n%s", diff)
	}
	if err := a.HoldHPAFloor(ctx, stale, "web-es"); !apierrors.IsConflict(err) {
		t.Errorf("hold from a stale read: %v, want a conflict", err)
	}

	if err := a.ReleaseHPAFloor(ctx, get(), true); err != nil {
		t.Fatal(err)
	}
	got = get()
	if ptr.Deref(got.Spec.MinReplicas, -1) != 0 {
		t.Errorf("restored: minReplicas %v, want 0", got.Spec.MinReplicas)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, got.Annotations); diff != "" {
		t.Errorf("restored: annotations (-want +got)\n%s", diff)
	}

	// The owner raised the floor to 3 while it was held: releasing
	// without restore leaves their 3.
	if err := a.HoldHPAFloor(ctx, get(), "web-es"); err != nil {
		t.Fatal(err)
	}
	owner := get()
	owner.Spec.MinReplicas = ptr.To[int32](3)
	if err := c.Update(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseHPAFloor(ctx, get(), false); err != nil {
		t.Fatal(err)
	}
	got = get()
	if ptr.Deref(got.Spec.MinReplicas, -1) != 3 {
		t.Errorf("ended: minReplicas %v, want 3", got.Spec.MinReplicas)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, got.Annotations); diff != "" {
		t.Errorf("ended: annotations (-want +got)\n%s", diff)
	}
}
