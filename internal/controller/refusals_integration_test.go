//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/scaling"
)

// createServiceWith creates a Service named name with one HTTP port,
// selecting app=<selectApp>, after mutate adjusts it.
func createServiceWith(t *testing.T, ns, name, selectApp string, mutate func(*corev1.Service)) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), AppProtocol: ptr.To("http")}},
			Selector: map[string]string{"app": selectApp},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	mustCreate(t, svc)
}

// wantReadyRefused checks Ready=False with reason and a message that
// contains each of words.
func wantReadyRefused(ns, name, reason string, words ...string) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
			return err
		}
		c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("Ready is %+v, want False/%s", c, reason)
		}
		for _, w := range words {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("Ready message %q does not mention %q", c.Message, w)
			}
		}
		return nil
	}
}

// TestRefusedServiceShapes: a Service whose shape would leave it pointing
// where nothing answers while the target sleeps is refused. The target is
// never put to sleep although its triggers say idle, no proxy slice is
// written, and Ready=False and a Warning Event name the problem. Before
// the refusals, every one of these was accepted and put to sleep.
func TestRefusedServiceShapes(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		mutate func(*corev1.Service)
		words  []string
	}{
		{"headless", refusals.ReasonHeadlessService, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }, []string{"clusterIP: None"}},
		{"external", refusals.ReasonExternalNameService, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.Selector = corev1.ServiceTypeExternalName, "db.example.invalid", nil
		}, []string{"ExternalName", "db.example.invalid"}},
		{"noselector", refusals.ReasonServiceNoSelector, func(s *corev1.Service) { s.Spec.Selector = nil }, []string{"no selector"}},
		{"udp", refusals.ReasonNonTCPServicePort, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		}, []string{"dns (53)", "UDP"}},
		{"itp", refusals.ReasonLocalTrafficPolicy, func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		}, []string{"internalTrafficPolicy: Local"}},
		{"etp", refusals.ReasonLocalTrafficPolicy, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
		}, []string{"externalTrafficPolicy: Local"}},
		{"othertarget", refusals.ReasonSelectorMissesTarget, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "someone-else"} },
			[]string{"app=someone-else", "app=othertarget"}},
	}
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	for _, tc := range cases {
		createDeployment(t, op.ns, tc.name, 1)
		createServiceWith(t, op.ns, tc.name, tc.name, tc.mutate)
		createES(t, op.ns, tc.name, tc.name, tc.name)
	}
	// A Service that is fine, beside them, does go to sleep: the triggers
	// say idle for all.
	createDeployment(t, op.ns, "fine", 1)
	createService(t, op.ns, "fine")
	createES(t, op.ns, "fine", "fine", "fine")
	eventually(t, wait, "the well-formed Service's target sleeps", wantReplicas(op.ns, "fine", 0))

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, wait, "Ready=False "+tc.reason, wantReadyRefused(op.ns, tc.name, tc.reason, tc.words...))
			eventually(t, wait, "a Warning Event "+tc.reason, wantEvent(op.ns, tc.name, tc.reason))
			if err := wantReplicas(op.ns, tc.name, 1)(); err != nil {
				t.Fatal(err)
			}
			if err := wantProxySlices(op.ns, tc.name, 0)(); err != nil {
				t.Fatal(err)
			}
			if es := getES(t, op.ns, tc.name); es.Status.Mode != elastiv1alpha1.ModeServe || len(es.Status.ProxyPorts) != 0 && tc.reason != refusals.ReasonSelectorMissesTarget {
				t.Fatalf("status %+v", es.Status)
			}
		})
	}
	never(t, 2*time.Second, "no refused target goes to sleep", func() error {
		for _, tc := range cases {
			if err := wantReplicas(op.ns, tc.name, 1)(); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestServiceTurnedUnworkableWhileAsleepWakesTheTarget: a Service changed
// into a refused shape while its target sleeps is not left pointing at
// resolvers that would hold traffic for it: the target is woken and the
// proxy slice goes.
func TestServiceTurnedUnworkableWhileAsleepWakesTheTarget(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createES(t, op.ns, "web", "web", "web")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "web", 0))
	eventually(t, wait, "proxy slice", wantProxySlices(op.ns, "web", 1))

	svc := &corev1.Service{}
	if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	if err := k8s.Update(ctxT(t), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "woken", wantReplicas(op.ns, "web", 1))
	eventually(t, wait, "proxy slice removed", wantProxySlices(op.ns, "web", 0))
	eventually(t, wait, "refused", wantReadyRefused(op.ns, "web", refusals.ReasonLocalTrafficPolicy))
	never(t, 2*time.Second, "kept awake although idle", wantReplicas(op.ns, "web", 1))
}

// perESTriggers answers each ElastiService's triggers separately.
type perESTriggers struct {
	mu    sync.Mutex
	state map[string]scaling.State
}

func (p *perESTriggers) set(name string, s scaling.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state[name] = s
}

func (p *perESTriggers) Evaluate(_ context.Context, es *elastiv1alpha1.ElastiService) scaling.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.state[es.Name]
	if !ok {
		s = scaling.StateActive
	}
	return scaling.Result{State: s, Message: "per-ElastiService " + string(s)}
}

// TestRivalsOnOneService: two ElastiServices on one Service used to fight,
// one putting the target to sleep while the other's busy trigger woke it.
// The older one now wins: the younger stands down with Ready=False naming
// it, writes no proxy slice and touches no target; the winner's decisions
// stand. When the winner is deleted, the younger takes over.
func TestRivalsOnOneService(t *testing.T) {
	trig := &perESTriggers{state: map[string]scaling.State{"older": scaling.StateIdle, "younger": scaling.StateActive}}
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "older", "web", "web")
	eventually(t, wait, "the older one has a finalizer", func() error {
		if len(getES(t, op.ns, "older").Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	createES(t, op.ns, "younger", "web", "web")

	eventually(t, wait, "the younger stands down", wantReadyRefused(op.ns, "younger", refusals.ReasonServiceClaimed, "older", "Service web"))
	eventually(t, wait, "an Event says so", wantEvent(op.ns, "younger", refusals.ReasonServiceClaimed))
	eventually(t, wait, "the older one's idle trigger puts the target to sleep", wantReplicas(op.ns, "web", 0))
	setOwnSlice(t, op.ns, "web", false)
	never(t, 3*time.Second, "the younger's busy trigger never wakes it", func() error {
		if err := wantReplicas(op.ns, "web", 0)(); err != nil {
			return err
		}
		if err := wantMode(op.ns, "younger", elastiv1alpha1.ModeServe)(); err != nil {
			return err
		}
		return wantProxySlices(op.ns, "web", 1)()
	})
	s, err := proxySlicesOf(op.ns, "web")
	if err != nil || len(s) != 1 || s[0].OwnerReferences[0].Name != "older" {
		t.Fatalf("proxy slices %v %+v", err, s)
	}

	// Deleting a standing-down ElastiService leaves the winner's sleeping
	// target alone: its finalizer does not restore what it did not manage.
	createES(t, op.ns, "youngest", "web", "web")
	eventually(t, wait, "the youngest stands down", wantReadyRefused(op.ns, "youngest", refusals.ReasonServiceClaimed, "older"))
	if err := k8s.Delete(ctxT(t), getES(t, op.ns, "youngest")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "the youngest is gone", wantGone(op.ns, "youngest"))
	never(t, time.Second, "its deletion did not wake the target", wantReplicas(op.ns, "web", 0))

	// The winner goes; the younger takes over, from the target its
	// deletion restored.
	if err := k8s.Delete(ctxT(t), getES(t, op.ns, "older")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "restored by the deletion", wantReplicas(op.ns, "web", 1))
	setOwnSlice(t, op.ns, "web", true)
	eventually(t, wait, "the older one is gone", wantGone(op.ns, "older"))
	eventually(t, wait, "the younger manages the Service", wantCondition(op.ns, "younger", elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	trig.set("younger", scaling.StateIdle)
	eventually(t, wait, "and puts it to sleep when its trigger says idle", wantReplicas(op.ns, "web", 0))
	s, err = proxySlicesOf(op.ns, "web")
	if err != nil || len(s) != 1 || s[0].OwnerReferences[0].Name != "younger" {
		t.Fatalf("proxy slices %v %+v", err, s)
	}
}

// TestRivalsOnOneTarget: two ElastiServices with different Services but
// one scale target; the younger stands down naming the older.
func TestRivalsOnOneTarget(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createServiceWith(t, op.ns, "web-alt", "web", nil)
	older := createES(t, op.ns, "a-older", "web", "web")
	eventually(t, wait, "the older one is Ready", wantCondition(op.ns, older.Name, elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	createES(t, op.ns, "b-younger", "web-alt", "web")
	eventually(t, wait, "the younger stands down", wantReadyRefused(op.ns, "b-younger", refusals.ReasonTargetClaimed, "a-older", "Deployment web"))
	if es := getES(t, op.ns, "b-younger"); len(es.Status.ProxyPorts) != 0 {
		t.Fatalf("a standing-down ElastiService holds ports: %+v", es.Status.ProxyPorts)
	}
	// Renaming the older one's target frees it for the younger.
	createDeployment(t, op.ns, "other", 1)
	createServiceWith(t, op.ns, "other", "other", nil)
	updateES(t, op.ns, older.Name, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Service, es.Spec.ScaleTargetRef.Name = "other", "other"
	})
	eventually(t, wait, "the younger takes over", wantCondition(op.ns, "b-younger", elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	if err := wantCondition(op.ns, older.Name, elastiv1alpha1.ConditionReady, metav1.ConditionTrue, "")(); err != nil {
		t.Fatal(err)
	}
}
