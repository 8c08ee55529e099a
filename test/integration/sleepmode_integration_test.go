//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// A manifest without sleepMode reads back as ScaleToZero, so every
// ElastiService written before the field existed keeps its behaviour; a
// Doze with its floor is stored as written.
func TestSleepModeIsDefaultedAndDozeAccepted(t *testing.T) {
	ctx := context.Background()
	obj := decode(t, validManifest)
	obj.SetName("sleepmode-default")
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
	got := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.SleepMode != elastiv1alpha1.SleepModeScaleToZero {
		t.Errorf("sleepMode defaulted to %q, want ScaleToZero", got.Spec.SleepMode)
	}

	for i, tc := range []struct {
		kind        string
		cpu, memory any
	}{
		{"Deployment", "5m", nil},
		{"StatefulSet", "1m", "32Mi"},
		{"Deployment", "0.01", "1Mi"},
		{"Deployment", int64(1), nil},
	} {
		obj := decode(t, validManifest)
		obj.SetName(fmt.Sprintf("doze-ok-%d", i))
		// A Doze takes no autoscaler yet (TestInvalidSleepModeIsRefused).
		unstructured.RemoveNestedField(obj.Object, "spec", "autoscaler")
		set(obj.Object, tc.kind, "spec", "scaleTargetRef", "kind")
		set(obj.Object, "Doze", "spec", "sleepMode")
		set(obj.Object, tc.cpu, "spec", "doze", "cpu")
		if tc.memory != nil {
			set(obj.Object, tc.memory, "spec", "doze", "memory")
		}
		if err := k8s.Create(ctx, obj); err != nil {
			t.Errorf("%s with doze cpu %v memory %v refused: %v", tc.kind, tc.cpu, tc.memory, err)
			continue
		}
		got := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		want := resource.MustParse(fmt.Sprint(tc.cpu))
		if got.Spec.SleepMode != elastiv1alpha1.SleepModeDoze || got.Spec.Doze == nil || got.Spec.Doze.CPU.Cmp(want) != 0 {
			t.Errorf("stored as sleepMode %q doze %+v, want Doze with cpu %v", got.Spec.SleepMode, got.Spec.Doze, tc.cpu)
		}
		_ = k8s.Delete(ctx, obj)
	}
}

func TestInvalidSleepModeIsRefused(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		edit func(o map[string]any)
		want []string
	}{
		{"unknown mode", func(o map[string]any) { set(o, "Freeze", "spec", "sleepMode") },
			[]string{"spec.sleepMode", `supported values: "ScaleToZero", "Doze"`}},
		{"doze without floor", func(o map[string]any) { set(o, "Doze", "spec", "sleepMode") },
			[]string{"spec.doze", "spec.doze is required with spec.sleepMode: Doze"}},
		{"floor without doze", func(o map[string]any) { set(o, "5m", "spec", "doze", "cpu") },
			[]string{"spec.doze", "spec.doze is read only with spec.sleepMode: Doze"}},
		{"floor with ScaleToZero", func(o map[string]any) {
			set(o, "ScaleToZero", "spec", "sleepMode")
			set(o, "5m", "spec", "doze", "cpu")
		}, []string{"spec.doze is read only with spec.sleepMode: Doze"}},
		{"floor without cpu", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "32Mi", "spec", "doze", "memory")
		}, []string{"spec.doze.cpu", "Required value"}},
		{"zero cpu", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "0", "spec", "doze", "cpu")
		}, []string{"spec.doze.cpu", `spec.doze.cpu must be a CPU quantity of at least 1m, such as 5m or 0.01; got "0"`}},
		{"sub-milli cpu", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "100u", "spec", "doze", "cpu")
		}, []string{"spec.doze.cpu must be a CPU quantity of at least 1m"}},
		{"negative cpu", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "-5m", "spec", "doze", "cpu")
		}, []string{"spec.doze.cpu must be a CPU quantity of at least 1m"}},
		{"tiny memory", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "5m", "spec", "doze", "cpu")
			set(o, "1k", "spec", "doze", "memory")
		}, []string{"spec.doze.memory", `spec.doze.memory must be a memory quantity of at least 1Mi, such as 32Mi; got "1k"`}},
		{"not a quantity", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "lots", "spec", "doze", "cpu")
		}, []string{"spec.doze.cpu"}},
		{"rollout", func(o map[string]any) {
			set(o, "argoproj.io/v1alpha1", "spec", "scaleTargetRef", "apiVersion")
			set(o, "Rollout", "spec", "scaleTargetRef", "kind")
			set(o, "Doze", "spec", "sleepMode")
			set(o, "5m", "spec", "doze", "cpu")
		}, []string{"spec.sleepMode", "spec.sleepMode: Doze resizes the pods of a Deployment or StatefulSet (apiVersion apps/v1); argoproj.io/v1alpha1 Rollout is neither. Use sleepMode: ScaleToZero for it"}},
		{"with an autoscaler", func(o map[string]any) {
			set(o, "Doze", "spec", "sleepMode")
			set(o, "5m", "spec", "doze", "cpu")
		}, []string{"spec.autoscaler", "spec.sleepMode: Doze cannot be used with spec.autoscaler (keda httpbin) yet"}},
		{"replicaset", func(o map[string]any) {
			set(o, "ReplicaSet", "spec", "scaleTargetRef", "kind")
			set(o, "Doze", "spec", "sleepMode")
			set(o, "5m", "spec", "doze", "cpu")
		}, []string{"apps/v1 ReplicaSet is neither"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, validManifest)
			obj.SetName(fmt.Sprintf("sleepmode-bad-%d", i))
			tc.edit(obj.Object)
			expectRejected(t, ctx, obj, tc.want...)
		})
	}
}
