package wakecalls

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// A reconcile that neither woke the target nor found it unreadable leaves
// the calls waiting, but still removes the wake-now annotation it acted on.
func TestAnswerRemovesWakeNow(t *testing.T) {
	var patches atomic.Int32
	es := elastiService("web", func(es *elastiv1alpha1.ElastiService) {
		es.Annotations = map[string]string{contract.AnnotationWakeNow: "2030-01-01T12:00:00Z", "keep": "me"}
	})
	api := fakeAPI(t, &patches, es)
	reqs := NewRequests(nil)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	call, err := reqs.request(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}

	if err := reqs.Answer(context.Background(), api, es, Outcome{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-call.done:
		t.Fatal("a reconcile that did not wake answered the call")
	default:
	}
	if !reqs.Pending(key) {
		t.Fatal("the wake is no longer pending")
	}
	got := &elastiv1alpha1.ElastiService{}
	if err := api.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[contract.AnnotationWakeNow]; ok || got.Annotations["keep"] != "me" {
		t.Errorf("annotations after the answer: %v, want only keep=me", got.Annotations)
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("%d patches, want 1", n)
	}

	// Complete answers the calls of a wake that is not coming.
	reqs.Complete(key, 0, context.Canceled)
	<-call.done
	if !errors.Is(call.err, context.Canceled) {
		t.Errorf("call error %v, want %v", call.err, context.Canceled)
	}
}

// A wake that starts is performed once, at once, beside its event; calls
// that join it start nothing more, and a wake started after the first was
// answered is performed again.
func TestEachNewWakeIsPerformedOnce(t *testing.T) {
	performed := make(chan types.NamespacedName, 4)
	reqs := NewRequests(func(key types.NamespacedName) { performed <- key })
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	for range 3 {
		if _, err := reqs.request(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-performed; got != key {
		t.Fatalf("performed %s, want %s", got, key)
	}
	if n := len(reqs.Events()); n != 1 {
		t.Errorf("%d events for one wake, want 1", n)
	}
	reqs.Complete(key, 1, nil)
	if _, err := reqs.request(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	<-performed
	select {
	case extra := <-performed:
		t.Fatalf("a joined call performed the wake of %s again", extra)
	default:
	}
}
