package hpacustody

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

var webTarget = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

func externalMetric(name string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
	}}
}

func objectMetric(name string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"},
		Metric:          autoscalingv2.MetricIdentifier{Name: name},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("1"))},
	}}
}

func cpuMetric() autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
	}}
}

func externalReading(name string, value, average *resource.Quantity) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Current: autoscalingv2.MetricValueStatus{Value: value, AverageValue: average},
	}}
}

func objectReading(name string, value *resource.Quantity) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Current: autoscalingv2.MetricValueStatus{Value: value},
	}}
}

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// newHPA returns HPA web on Deployment web with minReplicas min (nil:
// unset) and the metrics given.
func newHPA(min *int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    min, MaxReplicas: 5, Metrics: metrics,
		},
	}
}

func held(h *autoscalingv2.HorizontalPodAutoscaler, custodian string) *autoscalingv2.HorizontalPodAutoscaler {
	h.Annotations = map[string]string{contract.AnnotationHPAMinReplicas: "0", contract.AnnotationHPACustodian: custodian}
	return h
}

// floorCall is one write through FloorControl.
type floorCall struct {
	op, hpa string
	restore bool
}

// fakeFloors records the writes and answers each with the next error of
// errs (nil once they run out).
type fakeFloors struct {
	calls []floorCall
	errs  []error
}

func (f *fakeFloors) next() error {
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *fakeFloors) HoldHPAFloor(_ context.Context, h *autoscalingv2.HorizontalPodAutoscaler, custodian string) error {
	f.calls = append(f.calls, floorCall{op: "hold " + custodian, hpa: h.Name})
	return f.next()
}

func (f *fakeFloors) ReleaseHPAFloor(_ context.Context, h *autoscalingv2.HorizontalPodAutoscaler, restore bool) error {
	f.calls = append(f.calls, floorCall{op: "release", hpa: h.Name, restore: restore})
	return f.next()
}

// fakeRecorder keeps "type reason" of each Event.
type fakeRecorder struct{ events []string }

func (r *fakeRecorder) Eventf(_, _ runtime.Object, eventtype, reason, _, _ string, _ ...interface{}) {
	r.events = append(r.events, eventtype+" "+reason)
}

// newCustody returns a Custody over a cache holding objs.
func newCustody(t *testing.T, floors *fakeFloors, objs ...client.Object) (*Custody, *fakeRecorder) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := elastiv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&elastiv1alpha1.ElastiService{}, IndexHPA, Index).Build()
	rec := &fakeRecorder{}
	return &Custody{Cache: c, Floors: floors, Recorder: rec}, rec
}

// namingES returns ElastiService web on Deployment web, naming HPA hpa.
func namingES(hpa string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web"},
		Spec: elastiv1alpha1.ElastiServiceSpec{ScaleTargetRef: webTarget,
			Autoscaler: &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: hpa}}}
}

// named sets an HPA's name.
func named(h *autoscalingv2.HorizontalPodAutoscaler, name string) *autoscalingv2.HorizontalPodAutoscaler {
	h.Name = name
	return h
}

// TestSync: what Sync writes, which Events it records and what it hands to
// observe, for the HPA the ElastiService names and for one it held before.
func TestSync(t *testing.T) {
	gr := schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
	forbidden := apierrors.NewForbidden(gr, "web", fmt.Errorf("no patch"))
	conflict := apierrors.NewConflict(gr, "web", fmt.Errorf("stale"))
	ext := externalMetric("queue")
	for _, tc := range []struct {
		name      string
		hpa       *autoscalingv2.HorizontalPodAutoscaler
		errs      []error
		wantCalls []floorCall
		wantEv    []string
		wantHold  Hold
		wantErr   bool
	}{
		{name: "floor 0: raised", hpa: newHPA(ptr.To[int32](0), ext),
			wantCalls: []floorCall{{op: "hold web", hpa: "web"}},
			wantEv:    []string{"Normal " + EventFloorRaised}, wantHold: Hold{Custody: true}},
		{name: "floor 0, raise forbidden: exposed", hpa: newHPA(ptr.To[int32](0), ext), errs: []error{forbidden},
			wantCalls: []floorCall{{op: "hold web", hpa: "web"}},
			wantEv:    []string{"Warning " + EventFloorNotRaised}, wantHold: Hold{Exposed: true}},
		{name: "held by another name, rewrite forbidden: the floor is held all the same",
			hpa: held(newHPA(ptr.To[int32](1), ext), "old"), errs: []error{forbidden},
			wantCalls: []floorCall{{op: "hold web", hpa: "web"}},
			wantEv:    []string{"Warning " + EventFloorNotRaised}, wantHold: Hold{Custody: true}},
		{name: "floor 0, a stale read: retried", hpa: newHPA(ptr.To[int32](0), ext), errs: []error{conflict},
			wantCalls: []floorCall{{op: "hold web", hpa: "web"}}, wantErr: true},
		{name: "held: kept, nothing written", hpa: held(newHPA(ptr.To[int32](1), ext), "web"), wantHold: Hold{Custody: true}},
		{name: "floor 1: left alone", hpa: newHPA(ptr.To[int32](1), ext)},
		{name: "held, owner set 3: released, 3 stands", hpa: held(newHPA(ptr.To[int32](3), ext), "web"),
			wantCalls: []floorCall{{op: "release", hpa: "web"}}, wantEv: []string{"Normal " + EventFloorReleased}},
		{name: "held, a CPU metric added: floor restored", hpa: held(newHPA(ptr.To[int32](1), ext, cpuMetric()), "web"),
			wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}}, wantEv: []string{"Normal " + EventFloorReleased}},
		{name: "held but no longer named: floor restored", hpa: held(named(newHPA(ptr.To[int32](1), ext), "old"), "web"),
			wantCalls: []floorCall{{op: "release", hpa: "old", restore: true}}, wantEv: []string{"Normal " + EventFloorReleased}},
		{name: "held by another ElastiService, not named: left alone", hpa: held(named(newHPA(ptr.To[int32](1), ext), "old"), "api")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			floors := &fakeFloors{errs: tc.errs}
			c, rec := newCustody(t, floors, tc.hpa)
			hold, err := c.Sync(context.Background(), namingES("web"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if (hold.HPA != nil) != hold.Custody {
				t.Errorf("custody %v with HPA %v", hold.Custody, hold.HPA)
			}
			hold.HPA = nil
			if diff := cmp.Diff(tc.wantHold, hold); diff != "" {
				t.Errorf("hold (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, floors.calls, cmp.AllowUnexported(floorCall{})); diff != "" {
				t.Errorf("writes (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEv, rec.events); diff != "" {
				t.Errorf("Events (-want +got)\n%s", diff)
			}
		})
	}
}

// TestRelease: a deletion lets go of the HPAs the ElastiService holds and
// never hangs on one it cannot release.
func TestRelease(t *testing.T) {
	gr := schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "web",
		field.ErrorList{field.Invalid(field.NewPath("spec", "minReplicas"), 0, "must be greater than or equal to 1")})
	forbidden := apierrors.NewForbidden(gr, "web", fmt.Errorf("no patch"))
	ext := externalMetric("queue")
	for _, tc := range []struct {
		name      string
		errs      []error
		wantCalls []floorCall
		wantEv    []string
		wantErr   bool
	}{
		{name: "restored", wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}},
			wantEv: []string{"Normal " + EventFloorReleased}},
		{name: "minReplicas 0 refused: left at 1, annotations gone", errs: []error{invalid},
			wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}, {op: "release", hpa: "web"}},
			wantEv:    []string{"Warning " + EventFloorNotRestored}},
		{name: "forbidden: reported, not retried", errs: []error{forbidden},
			wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}},
			wantEv:    []string{"Warning " + EventFloorNotRestored}},
		{name: "gone meanwhile", errs: []error{apierrors.NewNotFound(gr, "web")},
			wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}}},
		{name: "another error: retried", errs: []error{fmt.Errorf("connection refused")},
			wantCalls: []floorCall{{op: "release", hpa: "web", restore: true}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			floors := &fakeFloors{errs: tc.errs}
			other := held(named(newHPA(ptr.To[int32](1), ext), "other"), "api")
			c, rec := newCustody(t, floors, held(newHPA(ptr.To[int32](1), ext), "web"), other)
			if err := c.Release(context.Background(), namingES("web")); (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, floors.calls, cmp.AllowUnexported(floorCall{})); diff != "" {
				t.Errorf("writes (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEv, rec.events); diff != "" {
				t.Errorf("Events (-want +got)\n%s", diff)
			}
		})
	}
}

// TestMap: an HPA event reaches the ElastiServices that name the HPA and
// the one that holds it.
func TestMap(t *testing.T) {
	api := namingES("queue")
	api.Name = "api"
	other := namingES("web")
	other.Namespace = "m"
	c, _ := newCustody(t, &fakeFloors{}, namingES("web"), api, other)
	h := held(newHPA(ptr.To[int32](1), externalMetric("queue")), "old")
	got := c.Map(context.Background(), h)
	want := []reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: "n", Name: "web"}},
		{NamespacedName: client.ObjectKey{Namespace: "n", Name: "old"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if got := c.Map(context.Background(), newHPA(ptr.To[int32](1))); len(got) != 1 {
		t.Errorf("an HPA not held: %v, want the ElastiService naming it", got)
	}
}
