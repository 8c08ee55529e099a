//go:build integration

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/scaling"
)

// TestFreedPortNotReusedAtOnce: ElastiService a is deleted, and b, created
// right after a is gone, gets another port. The freed port then stays out of
// use while every other port is taken: d finds the range exhausted although
// a's port is free. Before the fix b got a's port (the lowest free one).
func TestFreedPortNotReusedAtOnce(t *testing.T) {
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateActive),
		cfg: func(c *Config) {
			c.PortRangeStart, c.PortRangeEnd = 24000, 24002
			c.PortQuarantine = time.Hour
			c.PollingInterval = time.Hour
		},
	})
	noTriggers := func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }
	for _, name := range []string{"a", "b", "c", "d"} {
		createService(t, op.ns, name)
	}
	createES(t, op.ns, "a", "a", "a", noTriggers)
	eventually(t, wait, "a has a port", wantPorts(op.ns, "a", 1))
	freed := getES(t, op.ns, "a").Status.ProxyPorts[0].ResolverPort
	if err := k8s.Delete(context.Background(), getES(t, op.ns, "a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "a gone", wantGone(op.ns, "a"))

	createES(t, op.ns, "b", "b", "b", noTriggers)
	eventually(t, wait, "b has a port", wantPorts(op.ns, "b", 1))
	if got := getES(t, op.ns, "b").Status.ProxyPorts[0].ResolverPort; got == freed {
		t.Fatalf("b got port %d, freed by a just before", got)
	}
	createES(t, op.ns, "c", "c", "c", noTriggers)
	eventually(t, wait, "c has a port", wantPorts(op.ns, "c", 1))
	createES(t, op.ns, "d", "d", "d", noTriggers)
	eventually(t, wait, "d waits: the only free port is quarantined",
		wantCondition(op.ns, "d", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, plan.ReasonPortsExhausted))
	if c := readyCondition(t, op.ns, "d"); !strings.Contains(c.Message, "quarantine") {
		t.Errorf("Ready message %q does not mention the quarantine", c.Message)
	}
	never(t, 2*time.Second, "d keeps waiting", wantPorts(op.ns, "d", 0))
}

// TestQuarantineSurvivesRestart: a port freed just before the operator
// stops stays in quarantine for the next operator, which has no memory of
// it: the quarantine is in the ConfigMap elasti-port-quarantine, written
// before the freed port's ElastiService lost its finalizer. With a range of
// two ports, the new operator gives b the other port and makes c wait,
// rather than hand c the port a lagging data plane may still route to a's
// Service. Before the fix the quarantine lived only in memory and c got it.
func TestQuarantineSurvivesRestart(t *testing.T) {
	var record types.NamespacedName
	rangeAndRecord := func(c *Config) {
		c.PortRangeStart, c.PortRangeEnd = 24100, 24101
		c.PortQuarantine = time.Hour
		c.PollingInterval = time.Hour
		if record.Name == "" {
			record = types.NamespacedName{Namespace: c.ResolverNamespace, Name: ports.QuarantineRecordName}
		}
		c.QuarantineRecord = record
	}
	first := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive), cfg: rangeAndRecord})
	noTriggers := func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }
	for _, name := range []string{"a", "b", "c"} {
		createService(t, first.ns, name)
	}
	createES(t, first.ns, "a", "a", "a", noTriggers)
	eventually(t, wait, "a has a port", wantPorts(first.ns, "a", 1))
	freed := getES(t, first.ns, "a").Status.ProxyPorts[0].ResolverPort
	if err := k8s.Delete(context.Background(), getES(t, first.ns, "a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "a gone", wantGone(first.ns, "a"))
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), record, cm); err != nil {
		t.Fatalf("the quarantine record: %v", err)
	}
	if _, ok := cm.Data[strconv.Itoa(int(freed))]; !ok {
		t.Fatalf("the quarantine record %v lacks port %d", cm.Data, freed)
	}
	first.stop()

	// A new operator, with nothing in memory, for the same namespace.
	startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive), cfg: func(c *Config) {
		rangeAndRecord(c)
		c.WatchNamespaces = []string{first.ns}
	}})
	createES(t, first.ns, "b", "b", "b", noTriggers)
	eventually(t, wait, "b has a port", wantPorts(first.ns, "b", 1))
	if got := getES(t, first.ns, "b").Status.ProxyPorts[0].ResolverPort; got == freed {
		t.Fatalf("b got port %d, freed by a before the restart", got)
	}
	createES(t, first.ns, "c", "c", "c", noTriggers)
	eventually(t, wait, "c waits: the only free port is quarantined",
		wantCondition(first.ns, "c", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, plan.ReasonPortsExhausted))
	never(t, 2*time.Second, "c keeps waiting", wantPorts(first.ns, "c", 0))
}

func readyCondition(t *testing.T, ns, name string) metav1.Condition {
	t.Helper()
	for _, c := range getES(t, ns, name).Status.Conditions {
		if c.Type == elastiv1alpha1.ConditionReady {
			return c
		}
	}
	t.Fatalf("%s has no Ready condition", name)
	return metav1.Condition{}
}

// sliceWrite is one proxy EndpointSlice create or update the operator sent,
// with what the API server recorded in its ElastiService's status.proxyPorts
// at that moment.
type sliceWrite struct {
	method, slice string
	ports         []int32
	recorded      []int32
}

// sliceWriteRecorder sits in the operator's HTTP transports. Before a
// create or update of a proxy EndpointSlice goes out, it reads the owning
// ElastiService from the API server (not a cache) and records its
// status.proxyPorts next to the slice's ports.
type sliceWriteRecorder struct {
	t *testing.T

	mu     sync.Mutex
	writes []sliceWrite
}

// wrap is a rest.Config WrapTransport: every transport built from the
// config reports to the same recorder.
func (r *sliceWriteRecorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if (req.Method == http.MethodPost || req.Method == http.MethodPut) && strings.Contains(req.URL.Path, "/endpointslices") && req.Body != nil {
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(body))
			r.inspect(req.Method, body)
		}
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (r *sliceWriteRecorder) inspect(method string, body []byte) {
	s := &discoveryv1.EndpointSlice{}
	if err := json.Unmarshal(body, s); err != nil {
		r.t.Errorf("decode an EndpointSlice write (is the client not sending JSON?): %v", err)
		return
	}
	if s.Labels[contract.LabelManagedBy] != contract.ManagedBy || len(s.OwnerReferences) == 0 {
		return
	}
	w := sliceWrite{method: method, slice: s.Name}
	for _, p := range s.Ports {
		w.ports = append(w.ports, ptr.Deref(p.Port, 0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	es := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.OwnerReferences[0].Name}, es); err != nil {
		r.t.Errorf("read the ElastiService of slice %s: %v", s.Name, err)
		return
	}
	for _, p := range es.Status.ProxyPorts {
		w.recorded = append(w.recorded, p.ResolverPort)
	}
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
}

func (r *sliceWriteRecorder) seen() []sliceWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sliceWrite(nil), r.writes...)
}

// TestProxyPortsRecordedBeforeSlice: whenever the operator creates or
// updates a proxy EndpointSlice, the API server already records every port
// of that slice in the ElastiService's status.proxyPorts, checked at the
// moment of the request. The update case is a Service port added while the
// Service is proxied. Before the fix the slice went first and the status
// after, so a crash between the two left a slice on a port no status held.
func TestProxyPortsRecordedBeforeSlice(t *testing.T) {
	rec := &sliceWriteRecorder{t: t}
	cfg := rest.CopyConfig(env.Config)
	// JSON, not protobuf, so that the recorder can read the slices.
	cfg.ContentType = "application/json"
	cfg.Wrap(rec.wrap)
	op := startOperator(t, operatorOptions{rest: cfg, triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "api", 1)
	createService(t, op.ns, "api")
	createES(t, op.ns, "api", "api", "api")
	eventually(t, wait, "proxy mode", wantMode(op.ns, "api", elastiv1alpha1.ModeProxy))
	eventually(t, wait, "proxy slice", wantProxySlices(op.ns, "api", 1))

	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "api"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "grpc", Port: 9090, TargetPort: intstr.FromInt32(9090)})
	if err := k8s.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "the slice carries both ports", func() error {
		for _, w := range rec.seen() {
			if w.method == http.MethodPut && len(w.ports) == 2 {
				return nil
			}
		}
		return fmt.Errorf("slice writes so far: %+v", rec.seen())
	})

	writes := rec.seen()
	var created bool
	for _, w := range writes {
		created = created || w.method == http.MethodPost
		for _, p := range w.ports {
			if !slices.Contains(w.recorded, p) {
				t.Errorf("%s of slice %s with port %d while status.proxyPorts recorded %v", w.method, w.slice, p, w.recorded)
			}
		}
	}
	if !created {
		t.Errorf("no slice creation seen in %+v", writes)
	}
}
