// Package unlisted answers the one question a draining resolver asks before
// it closes its ports: does any proxy EndpointSlice still list this pod? The
// operator points every sleeping Service's proxy slice at the ready
// resolvers once a resolver stops being ready, one write per slice; with
// thousands asleep that takes a while, and until a Service's slice no longer
// lists this pod, kube-proxy may still send it new connections
// (docs/architecture.md, "When the resolvers change").
package unlisted

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"elasti.dev/elasti/internal/contract"
)

// pageSize is how many slices one list call returns.
const pageSize = 500

// Lister reads the proxy EndpointSlices, live: a draining resolver asks at
// most every interval, and only while it drains.
type Lister struct {
	Client kubernetes.Interface
	// Namespaces are those the resolver follows; empty means all.
	Namespaces []string
	// Pod is this resolver pod's name, as proxy slices name it in each
	// endpoint's targetRef.
	Pod string
}

// Listing counts the proxy slices that list the pod, and how many slices it
// read.
func (l Lister) Listing(ctx context.Context) (listing, read int, err error) {
	namespaces := l.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	selector := contract.LabelManagedBy + "=" + contract.ManagedBy
	for _, ns := range namespaces {
		opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
		for {
			page, err := l.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
			if err != nil {
				return 0, read, fmt.Errorf("list proxy EndpointSlices: %w", err)
			}
			for i := range page.Items {
				read++
				for _, ep := range page.Items[i].Endpoints {
					if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name == l.Pod {
						listing++
						break
					}
				}
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
	}
	return listing, read, nil
}

// After returns a channel that closes when a draining resolver may close
// its ports: period after the call, and then settle after no proxy slice
// lists the pod any more (kube-proxy on every node applies the last
// rewrite in that time), or once their count has not fallen for stall
// (nobody is rewriting them: the operator is not running, as during an
// uninstall, or there is no other ready resolver to point them at); at
// most max after the call.
func (l Lister) After(period, stall, settle, max time.Duration, log logr.Logger) <-chan struct{} {
	over := make(chan struct{})
	go func() {
		defer close(over)
		ctx, cancel := context.WithTimeout(context.Background(), max)
		defer cancel()
		select {
		case <-time.After(period):
		case <-ctx.Done():
			log.Info("the longest drain period is over; closing the ports", "max", max)
			return
		}
		switch l.Wait(ctx, time.Second, stall, func(listing, read int, err error) {
			if err != nil {
				log.Error(err, "cannot tell whether proxy EndpointSlices still list this pod; still accepting")
				return
			}
			log.Info("proxy EndpointSlices that still list this pod", "listing", listing, "read", read)
		}) {
		case Unlisted:
			log.Info("no proxy EndpointSlice lists this pod; closing the ports once kube-proxy has applied it", "settle", settle)
			select {
			case <-time.After(settle):
			case <-ctx.Done():
			}
		case Stalled:
			log.Info("proxy EndpointSlices still list this pod, but none was rewritten for a while; closing the ports", "stall", stall)
		case Bounded:
			log.Info("the longest drain period is over; closing the ports", "max", max)
		}
	}()
	return over
}

// Outcome is why Wait returned.
type Outcome int

const (
	// Unlisted: no proxy slice lists the pod.
	Unlisted Outcome = iota
	// Stalled: some still do, but their count has not fallen for the
	// stall period.
	Stalled
	// Bounded: the context ended first.
	Bounded
)

// Wait returns once no proxy slice lists the pod, asking every interval;
// once the count of those that do has not fallen for stall; or when ctx
// ends. A failed list is no progress: the resolver keeps accepting until a
// stall or its bound rather than close early on a guess.
func (l Lister) Wait(ctx context.Context, interval, stall time.Duration, progress func(listing, read int, err error)) Outcome {
	fewest, since := -1, time.Now()
	for {
		listing, read, err := l.Listing(ctx)
		if ctx.Err() != nil {
			return Bounded
		}
		if progress != nil {
			progress(listing, read, err)
		}
		if err == nil {
			if listing == 0 {
				return Unlisted
			}
			if fewest < 0 || listing < fewest {
				fewest, since = listing, time.Now()
			}
		}
		if time.Since(since) >= stall {
			return Stalled
		}
		select {
		case <-ctx.Done():
			return Bounded
		case <-time.After(interval):
		}
	}
}
