package targets

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

var deployments = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// fakeController records the watches started on it.
type fakeController struct {
	controller.Controller
	watches int
	err     error
}

func (c *fakeController) Watch(source.Source) error {
	c.watches++
	return c.err
}

// fakeCache has one informer per kind, synced or not, and the objects
// (by name) whose resourceVersion it holds.
type fakeCache struct {
	cache.Cache
	synced map[schema.GroupVersionKind]bool
	// versions maps a name to its resourceVersion.
	versions map[string]string
}

func (c *fakeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if c.synced[obj.GetObjectKind().GroupVersionKind()] {
		return controllertest.NewFakeInformer(controllertest.Synced), nil
	}
	return controllertest.NewFakeInformer(), nil
}

func (c *fakeCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	rv, ok := c.versions[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	obj.SetResourceVersion(rv)
	return nil
}

// liveLister answers every list with err, and records the namespace asked.
func liveLister(err error, namespace *string) client.Reader {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) error {
			lo := &client.ListOptions{}
			lo.ApplyOptions(opts)
			*namespace = lo.Namespace
			return err
		},
	}).Build()
}

func noEnqueue(schema.GroupVersionKind) func(context.Context, *metav1.PartialObjectMetadata) []reconcile.Request {
	return func(context.Context, *metav1.PartialObjectMetadata) []reconcile.Request { return nil }
}

func TestIndexValues(t *testing.T) {
	es := func(apiVersion, kind, name string) *elastiv1alpha1.ElastiService {
		return &elastiv1alpha1.ElastiService{Spec: elastiv1alpha1.ElastiServiceSpec{
			ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{APIVersion: apiVersion, Kind: kind, Name: name},
		}}
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"deployment", es("apps/v1", "Deployment", "web"), []string{"apps/Deployment/web"}},
		{"core group", es("v1", "ReplicationController", "rc"), []string{"/ReplicationController/rc"}},
		// Two versions of one kind name the same object.
		{"other version", es("argoproj.io/v1beta1", "Rollout", "r"), []string{Key("argoproj.io", "Rollout", "r")}},
		{"unparsable apiVersion", es("a/b/c", "Deployment", "web"), nil},
		{"not an ElastiService", &metav1.PartialObjectMetadata{}, nil},
	} {
		if diff := cmp.Diff(tc.want, IndexValues(tc.obj)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A kind is watched once; a watch that could not start is tried again;
// without a controller nothing is watched.
func TestEnsureWatchesEachKindOnce(t *testing.T) {
	if err := (&Watches{}).Ensure(deployments); err != nil {
		t.Fatalf("without a controller: %v", err)
	}
	var none *Watches
	if err := none.Ensure(deployments); err != nil {
		t.Fatalf("nil watches: %v", err)
	}

	c := &fakeController{err: errors.New("not started")}
	w := &Watches{Cache: &fakeCache{}, Controller: c, Enqueue: noEnqueue, Clock: clocktesting.NewFakeClock(time.Now())}
	if err := w.Ensure(deployments); err == nil || !strings.Contains(err.Error(), "watch apps/v1, Kind=Deployment targets") {
		t.Fatalf("a failed watch: %v", err)
	}
	c.err = nil
	for range 3 {
		if err := w.Ensure(deployments); err != nil {
			t.Fatal(err)
		}
	}
	if c.watches != 2 {
		t.Errorf("%d watches started, want 2 (the failed one, then one)", c.watches)
	}
	if watched, _ := w.synced(context.Background(), deployments); !watched {
		t.Error("the kind is not recorded as watched")
	}
}

// Problem says nothing of a kind not watched or synced; a list the
// operator may not make is reported at once, any other failure or a watch
// that does not sync only after SyncTimeout.
func TestProblem(t *testing.T) {
	ctx := context.Background()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("RBAC"))
	for _, tc := range []struct {
		name       string
		watched    bool
		synced     bool
		namespaced bool
		listErr    error
		after      time.Duration
		wantReason string
		wantInMsg  string
		wantListNS string
	}{
		{name: "not watched", listErr: forbidden},
		{name: "synced", watched: true, synced: true, listErr: forbidden},
		{name: "forbidden at once", watched: true, listErr: forbidden,
			wantReason: ReasonWatchForbidden, wantInMsg: "may not list and watch Deployment.apps"},
		{name: "forbidden, namespaced cache", watched: true, namespaced: true, listErr: forbidden,
			wantReason: ReasonWatchForbidden, wantInMsg: "grant it get, list and watch", wantListNS: "ns"},
		{name: "list fails", watched: true, listErr: errors.New("conversion webhook down"),
			wantReason: ReasonWatchNotSynced, wantInMsg: "list Deployment.apps: conversion webhook down"},
		{name: "syncing", watched: true, after: SyncTimeout - time.Second},
		{name: "not synced in time", watched: true, after: SyncTimeout,
			wantReason: ReasonWatchNotSynced, wantInMsg: "has not synced after 30s"},
	} {
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		var listNS string
		w := &Watches{
			Cache:      &fakeCache{synced: map[schema.GroupVersionKind]bool{deployments: tc.synced}},
			Controller: &fakeController{}, Enqueue: noEnqueue, Live: liveLister(tc.listErr, &listNS),
			Clock: clk, Namespaced: tc.namespaced,
		}
		if tc.watched {
			if err := w.Ensure(deployments); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(tc.after)
		reason, msg := w.Problem(ctx, "ns", deployments)
		if reason != tc.wantReason || !strings.Contains(msg, tc.wantInMsg) || (tc.wantReason == "") != (msg == "") {
			t.Errorf("%s: got %q %q, want %q with %q", tc.name, reason, msg, tc.wantReason, tc.wantInMsg)
		}
		if listNS != tc.wantListNS {
			t.Errorf("%s: listed in namespace %q, want %q", tc.name, listNS, tc.wantListNS)
		}
	}
}

// The metadata cache answers only for a kind watched and synced: otherwise
// the caller reads the API server.
func TestCachedAndResourceVersion(t *testing.T) {
	ctx := context.Background()
	ref := elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	missing := elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "gone"}
	c := &fakeCache{synced: map[schema.GroupVersionKind]bool{}, versions: map[string]string{"web": "42"}}
	w := &Watches{Cache: c, Controller: &fakeController{}, Enqueue: noEnqueue, Clock: clocktesting.NewFakeClock(time.Now())}

	if w.Cached(ctx, "ns", ref) || w.ResourceVersion(ctx, "ns", ref) != "" {
		t.Error("a kind not watched answered from the cache")
	}
	if err := w.Ensure(deployments); err != nil {
		t.Fatal(err)
	}
	if w.Cached(ctx, "ns", ref) || w.ResourceVersion(ctx, "ns", ref) != "" {
		t.Error("a kind not synced answered from the cache")
	}
	c.synced[deployments] = true
	if !w.Cached(ctx, "ns", ref) || w.ResourceVersion(ctx, "ns", ref) != "42" {
		t.Errorf("synced: cached %v, resourceVersion %q; want true, 42", w.Cached(ctx, "ns", ref), w.ResourceVersion(ctx, "ns", ref))
	}
	if w.Cached(ctx, "ns", missing) || w.ResourceVersion(ctx, "ns", missing) != "" {
		t.Error("a target not in the cache answered from it")
	}
	bad := elastiv1alpha1.ScaleTargetRef{APIVersion: "a/b/c", Kind: "Deployment", Name: "web"}
	if w.Cached(ctx, "ns", bad) || w.ResourceVersion(ctx, "ns", bad) != "" {
		t.Error("an unparsable apiVersion answered from the cache")
	}
}
