//go:build integration

package controller

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
)

// TestModeSwitchBothDirections: idle triggers put the target to sleep behind
// a proxy slice of ready resolvers; a wake scales it up; its first ready
// endpoint brings the Service back to serve.
func TestModeSwitchBothDirections(t *testing.T) {
	trig := newFakeTriggers(scaling.StateActive)
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createResolver(t, op.resolverNS, "resolver-b", true, "10.0.0.2")
	createResolver(t, op.resolverNS, "resolver-c", false, "10.0.0.3")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "web", "web", "web")

	eventually(t, wait, "serve mode with ports", func() error {
		es := getES(t, op.ns, "web")
		if es.Status.Mode != elastiv1alpha1.ModeServe || len(es.Status.ProxyPorts) != 1 {
			return fmt.Errorf("status %+v", es.Status)
		}
		return nil
	})
	never(t, 1500*1e6, "active triggers keep the target up", wantReplicas(op.ns, "web", 1))

	trig.set(scaling.StateIdle)
	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "web", 0))
	eventually(t, wait, "proxy mode", wantMode(op.ns, "web", elastiv1alpha1.ModeProxy))
	eventually(t, wait, "Active=False", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))

	slices, err := proxySlicesOf(op.ns, "web")
	if err != nil || len(slices) != 1 {
		t.Fatalf("proxy slices: %v %d", err, len(slices))
	}
	es := getES(t, op.ns, "web")
	s := slices[0]
	if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Endpoints) != 2 {
		t.Fatalf("proxy slice %+v", s)
	}
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			t.Fatalf("endpoint %v lacks ready=true", ep.Addresses)
		}
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != es.Status.ProxyPorts[0].ResolverPort || ptr.Deref(s.Ports[0].AppProtocol, "") != "http" {
		t.Fatalf("proxy slice ports %+v, status %+v", s.Ports, es.Status.ProxyPorts)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != es.UID {
		t.Fatalf("owner %+v", s.OwnerReferences)
	}
	if es.Status.LastScaledDownTime == nil {
		t.Fatal("lastScaledDownTime not set")
	}

	// The pods are gone (no kubelet here: the test says so).
	setOwnSlice(t, op.ns, "web", false)
	trig.set(scaling.StateActive)
	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "web"})
	if err != nil || !res.Found || res.Replicas != 1 {
		t.Fatalf("wake: %+v %v", res, err)
	}
	if got := deploymentReplicas(t, op.ns, "web"); got != 1 {
		t.Fatalf("after the wake returned, replicas = %d", got)
	}
	eventually(t, wait, "waking", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	// Still proxying until an endpoint is ready.
	if err := wantProxySlices(op.ns, "web", 1)(); err != nil {
		t.Fatal(err)
	}
	setOwnSlice(t, op.ns, "web", true)
	eventually(t, wait, "serve mode", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))
	eventually(t, wait, "proxy slice removed", wantProxySlices(op.ns, "web", 0))
	if es := getES(t, op.ns, "web"); es.Status.LastScaledUpTime == nil {
		t.Fatal("lastScaledUpTime not set")
	}
}

// TestPortAllocationNoCollisions: 200 ElastiServices fill a 200-port range
// without a collision; the 201st finds it exhausted until one is deleted
// and the freed port has left its quarantine.
func TestPortAllocationNoCollisions(t *testing.T) {
	const n = 200
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateActive),
		cfg: func(c *Config) {
			c.PortRangeStart, c.PortRangeEnd = 21000, 21000+n-1
			// A freed port is no longer reused at once; a short
			// quarantine keeps the reuse below within the wait
			// (TestFreedPortNotReusedAtOnce covers the quarantine).
			c.PortQuarantine = 2 * time.Second
		},
	})
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%03d", i)
		createService(t, op.ns, name)
		createES(t, op.ns, name, name, name) // no Deployment: only ports matter here
	}
	allocated := func() (map[int32]string, error) {
		list := &elastiv1alpha1.ElastiServiceList{}
		if err := k8s.List(context.Background(), list); err != nil {
			return nil, err
		}
		seen := map[int32]string{}
		for _, es := range list.Items {
			if es.Namespace != op.ns {
				continue
			}
			for _, p := range es.Status.ProxyPorts {
				if other, dup := seen[p.ResolverPort]; dup {
					return nil, fmt.Errorf("port %d held by %s and %s", p.ResolverPort, other, es.Name)
				}
				if p.ResolverPort < 21000 || p.ResolverPort >= 21000+n {
					return nil, fmt.Errorf("port %d out of range", p.ResolverPort)
				}
				seen[p.ResolverPort] = es.Name
			}
		}
		return seen, nil
	}
	eventually(t, 3*wait, "200 distinct ports", func() error {
		seen, err := allocated()
		if err != nil {
			t.Fatal(err) // a collision is never acceptable, not even transiently
		}
		if len(seen) != n {
			return fmt.Errorf("%d ports allocated", len(seen))
		}
		return nil
	})

	createService(t, op.ns, "extra")
	createES(t, op.ns, "extra", "extra", "extra")
	eventually(t, wait, "range exhausted", wantCondition(op.ns, "extra", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, plan.ReasonPortsExhausted))

	victim := getES(t, op.ns, "svc-042")
	freed := victim.Status.ProxyPorts[0].ResolverPort
	if err := k8s.Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	// The release wakes "extra", which waits for a port
	// (TestPortWaiterWokenWhenPortFrees proves it without any polling).
	eventually(t, wait, "freed port reused", func() error {
		es := getES(t, op.ns, "extra")
		if len(es.Status.ProxyPorts) != 1 || es.Status.ProxyPorts[0].ResolverPort != freed {
			return fmt.Errorf("extra has %+v, want port %d", es.Status.ProxyPorts, freed)
		}
		return nil
	})
	if _, err := allocated(); err != nil {
		t.Fatal(err)
	}
}

// TestServicePortChange: the proxy slice and status.proxyPorts follow the
// Service's ports, keeping the resolver port of a port that stays.
func TestServicePortChange(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "api", 1)
	createService(t, op.ns, "api")
	createES(t, op.ns, "api", "api", "api")
	eventually(t, wait, "proxy mode", wantMode(op.ns, "api", elastiv1alpha1.ModeProxy))
	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "api", 0))
	before := getES(t, op.ns, "api").Status.ProxyPorts[0].ResolverPort

	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "api"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports,
		corev1.ServicePort{Name: "grpc", Port: 9090, TargetPort: intstr.FromInt32(9090), AppProtocol: ptr.To("kubernetes.io/h2c")})
	// (A UDP port is refused as a whole: TestRefusedServiceShapes.)
	svc.Spec.Ports[0].Port = 8081
	if err := k8s.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "slice follows the ports", func() error {
		es := getES(t, op.ns, "api")
		if len(es.Status.ProxyPorts) != 2 {
			return fmt.Errorf("proxyPorts %+v", es.Status.ProxyPorts)
		}
		if es.Status.ProxyPorts[0].ResolverPort != before || es.Status.ProxyPorts[0].Port != 8081 {
			return fmt.Errorf("http port moved: %+v", es.Status.ProxyPorts[0])
		}
		slices, err := proxySlicesOf(op.ns, "api")
		if err != nil || len(slices) != 1 {
			return fmt.Errorf("slices %d %w", len(slices), err)
		}
		var names []string
		for _, p := range slices[0].Ports {
			names = append(names, fmt.Sprintf("%s/%s/%d", *p.Name, *p.Protocol, *p.Port))
		}
		sort.Strings(names)
		want := []string{fmt.Sprintf("grpc/TCP/%d", es.Status.ProxyPorts[1].ResolverPort), fmt.Sprintf("http/TCP/%d", before)}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			return fmt.Errorf("slice ports %v, want %v", names, want)
		}
		return nil
	})
}

// TestResolverChurn: the slice follows resolver readiness and address
// families; when every resolver is gone the target is woken and the slice
// removed.
func TestResolverChurn(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	appBehindTwoResolvers(t, op, func(es *elastiv1alpha1.ElastiService) { es.Spec.MinTargetReplicas = 2 })
	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "app", 0))

	endpoints := func(family discoveryv1.AddressType, want ...string) func() error {
		return func() error {
			slices, err := proxySlicesOf(op.ns, "app")
			if err != nil {
				return err
			}
			var got []string
			for _, s := range slices {
				if s.AddressType != family {
					continue
				}
				for _, ep := range s.Endpoints {
					got = append(got, ep.Addresses...)
				}
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s endpoints %v, want %v", family, got, want)
			}
			return nil
		}
	}
	eventually(t, wait, "two resolvers", endpoints(discoveryv1.AddressTypeIPv4, "10.0.0.1", "10.0.0.2"))

	setResolverStatus(t, op.resolverNS, "r2", false, "10.0.0.2")
	eventually(t, wait, "unready resolver dropped", endpoints(discoveryv1.AddressTypeIPv4, "10.0.0.1"))

	createResolver(t, op.resolverNS, "r3", true, "10.0.0.3", "fd00::3")
	eventually(t, wait, "dual-stack resolver", endpoints(discoveryv1.AddressTypeIPv6, "fd00::3"))
	eventually(t, wait, "v4 too", endpoints(discoveryv1.AddressTypeIPv4, "10.0.0.1", "10.0.0.3"))
	if got := deploymentReplicas(t, op.ns, "app"); got != 0 {
		t.Fatalf("replicas %d during churn", got)
	}

	deletePod(t, op.resolverNS, "r1")
	deletePod(t, op.resolverNS, "r3")
	setResolverStatus(t, op.resolverNS, "r2", false)
	eventually(t, wait, "woken", wantReplicas(op.ns, "app", 2))
	eventually(t, wait, "no proxy slice", wantProxySlices(op.ns, "app", 0))
	eventually(t, wait, "ProxyReady=False", wantCondition(op.ns, "app", elastiv1alpha1.ConditionProxyReady, metav1.ConditionFalse, plan.ReasonNoReadyResolvers))
	eventually(t, wait, "serve", wantMode(op.ns, "app", elastiv1alpha1.ModeServe))
	// Without resolvers the idle target must stay up.
	never(t, 2e9, "stays up without resolvers", wantReplicas(op.ns, "app", 2))
}
