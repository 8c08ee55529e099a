package wakecalls

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
)

// fakeAPI is an API server holding objs; patches counts the patches it
// received.
func fakeAPI(t *testing.T, patches *atomic.Int32, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := elastiv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
}

func elastiService(name string, mutate ...func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: name, MinTargetReplicas: 3},
	}
	for _, m := range mutate {
		m(es)
	}
	return es
}

// A follower's wake-now value says it carries an activation call; the
// CLI's bare timestamp, or any other value, does not.
func TestForwardedActivation(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{"follower", map[string]string{contract.AnnotationWakeNow: wakeNowByActivation + now.Format(time.RFC3339Nano)}, true},
		{"kubectl elasti wake", map[string]string{contract.AnnotationWakeNow: now.Format(time.RFC3339Nano)}, false},
		{"by hand", map[string]string{contract.AnnotationWakeNow: "x"}, false},
		{"other annotation", map[string]string{"example.com/x": wakeNowByActivation}, false},
		{"none", nil, false},
	} {
		if got := Forwarded(tc.annotations); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A follower hands the call to the leader through the wake-now annotation,
// which the leader reads as forwarded traffic, and answers with the
// target's floor without waiting for the wake.
func TestFollowerForwardsThroughTheAnnotation(t *testing.T) {
	var patches atomic.Int32
	api := fakeAPI(t, &patches, elastiService("web"))
	w := &Waker{Reader: api, Writer: api, Elected: make(chan struct{})} // never elected
	key := types.NamespacedName{Namespace: "ns", Name: "web"}

	res, err := w.Wake(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if want := (activation.WakeResult{Found: true, Replicas: 3}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	got := &elastiv1alpha1.ElastiService{}
	if err := api.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if !Forwarded(got.Annotations) {
		t.Errorf("annotations %v do not carry a forwarded activation", got.Annotations)
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("%d patches, want 1", n)
	}
}

// A call for an ElastiService that does not exist is answered "not found"
// (no error); one being deleted is answered with its floor, as the deletion
// restores the target anyway, and nothing is written for either.
func TestWakeOfMissingOrDeletedElastiService(t *testing.T) {
	var patches atomic.Int32
	now := metav1.Now()
	deleting := elastiService("old", func(es *elastiv1alpha1.ElastiService) {
		es.DeletionTimestamp, es.Finalizers = &now, []string{"elasti.dev/finalizer"}
	})
	api := fakeAPI(t, &patches, deleting)
	w := &Waker{Reader: api, Writer: api}

	res, err := w.Wake(context.Background(), types.NamespacedName{Namespace: "ns", Name: "gone"})
	if err != nil || res.Found {
		t.Errorf("missing: %+v %v, want not found and no error", res, err)
	}
	res, err = w.Wake(context.Background(), types.NamespacedName{Namespace: "ns", Name: "old"})
	if want := (activation.WakeResult{Found: true, Replicas: 3}); err != nil || res != want {
		t.Errorf("deleting: %+v %v, want %+v", res, err, want)
	}
	if n := patches.Load(); n != 0 {
		t.Errorf("%d patches, want none", n)
	}
}

// On the leader, a call waits for the reconcile's answer and returns its
// replicas; a target that cannot be woken fails the call at once.
func TestLeaderWaitsForTheReconcile(t *testing.T) {
	var patches atomic.Int32
	api := fakeAPI(t, &patches, elastiService("web"), elastiService("broken"))
	reqs := NewRequests(nil)
	w := &Waker{Reader: api, Writer: api, Requests: reqs, Timeout: 5 * time.Second} // Elected nil: leads

	for _, tc := range []struct {
		name    string
		outcome Outcome
		want    activation.WakeResult
		wantErr error
	}{
		{"web", Outcome{Woke: true, Replicas: 2}, activation.WakeResult{Found: true, Replicas: 2}, nil},
		{"broken", Outcome{CannotWake: true, TargetErr: "it does not exist"}, activation.WakeResult{}, ErrCannotWake},
	} {
		key := types.NamespacedName{Namespace: "ns", Name: tc.name}
		type answer struct {
			res activation.WakeResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := w.Wake(context.Background(), key)
			done <- answer{res, err}
		}()
		ev := <-reqs.Events() // the reconcile the call enqueued
		if got := client.ObjectKeyFromObject(ev.Object); got != key {
			t.Fatalf("%s: enqueued %s", tc.name, got)
		}
		if !reqs.Pending(key) {
			t.Fatalf("%s: no wake pending", tc.name)
		}
		es := elastiService(tc.name)
		if err := reqs.Answer(context.Background(), api, es, tc.outcome); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.res != tc.want || !errors.Is(a.err, tc.wantErr) || (tc.wantErr == nil) != (a.err == nil) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, a.res, a.err, tc.want, tc.wantErr)
		}
		if a.err != nil && !strings.Contains(a.err.Error(), tc.outcome.TargetErr) {
			t.Errorf("%s: error %q does not say why", tc.name, a.err)
		}
		if reqs.Pending(key) {
			t.Errorf("%s: still pending after the answer", tc.name)
		}
	}
	if n := patches.Load(); n != 0 {
		t.Errorf("%d patches without a wake-now annotation, want none", n)
	}
}
