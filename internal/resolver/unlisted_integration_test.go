//go:build integration

package resolver

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/unlisted"
)

// TestDrainWaitsUntilNoSliceListsThePod: a draining resolver keeps
// accepting while any proxy EndpointSlice, in any namespace it follows and
// on any page of the list, still lists its pod, and stops waiting once the
// last one is rewritten without it; at most until its bound, or until no
// slice was rewritten for its stall period. Slices of other writers, or
// listing another pod, do not count.
func TestDrainWaitsUntilNoSliceListsThePod(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UnixNano() % 100000
	var namespaces []string
	for i := range 2 {
		ns := fmt.Sprintf("drain-%d-%d", stamp, i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns)
	}
	slice := func(ns, name, managedBy string, pods ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				contract.LabelManagedBy: managedBy, discoveryv1.LabelServiceName: name,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for i, p := range pods {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: p},
			})
		}
		return s
	}
	create := func(s *discoveryv1.EndpointSlice) {
		t.Helper()
		if _, err := cs.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// More than a page (500) of proxy slices in the first namespace, all
	// listing the pod; one in the second; and slices that must not count.
	const many = 520
	for i := range many {
		create(slice(namespaces[0], fmt.Sprintf("svc-%d-elasti-ipv4", i), contract.ManagedBy, "resolver-a", "resolver-b"))
	}
	create(slice(namespaces[1], "last-elasti-ipv4", contract.ManagedBy, "resolver-a"))
	create(slice(namespaces[1], "own", "endpointslice-controller.k8s.io", "resolver-a"))
	create(slice(namespaces[1], "other-elasti-ipv4", contract.ManagedBy, "resolver-b"))

	l := unlisted.Lister{Client: cs, Namespaces: namespaces, Pod: "resolver-a"}
	listing, read, err := l.Listing(ctx)
	if err != nil || listing != many+1 || read != many+2 {
		t.Fatalf("Listing = %d listing of %d read, %v; want %d of %d", listing, read, err, many+1, many+2)
	}

	// Bounded: still listed when the bound comes.
	start := time.Now()
	<-l.After(100*time.Millisecond, time.Hour, 0, 2*time.Second, testLogger(t))
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the drain stopped accepting after %s while slices still list the pod, before its 2s bound", waited)
	}
	// Stalled: nobody rewrites the slices (the operator is gone, as in an
	// uninstall), so the drain does not wait for its bound.
	start = time.Now()
	<-l.After(0, 2*time.Second, 0, 5*time.Minute, testLogger(t))
	if waited := time.Since(start); waited < 2*time.Second || waited > time.Minute {
		t.Fatalf("with no slice rewritten, the drain stopped accepting after %s; want its 2s stall (and well before its 5m bound)", waited)
	}

	over := l.After(0, time.Hour, time.Second, 5*time.Minute, testLogger(t))
	// The operator's refresh: every slice rewritten without the pod.
	for _, ns := range namespaces {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			select {
			case <-over:
				t.Fatalf("the drain stopped accepting while %s/%s and others still list the pod", s.Namespace, s.Name)
			default:
			}
			var keep []discoveryv1.Endpoint
			for _, ep := range s.Endpoints {
				if ep.TargetRef.Name != "resolver-a" {
					keep = append(keep, ep)
				}
			}
			if len(keep) == len(s.Endpoints) {
				continue
			}
			s.Endpoints = keep
			if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	unlistedAt := time.Now()
	select {
	case <-over:
	case <-time.After(time.Minute):
		t.Fatal("the drain still accepts a minute after no proxy slice lists the pod")
	}
	// And not before its settle period (1s) for kube-proxy has passed.
	if waited := time.Since(unlistedAt); waited < time.Second {
		t.Fatalf("the drain stopped accepting %s after the last slice dropped the pod, within its 1s settle period", waited)
	}
}
