//go:build integration

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/scaling"
)

// serviceAccountToken creates a ServiceAccount and returns a token for it
// from the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mustCreate(t, sa)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("request a token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// startActivationServer serves the activation API on loopback with waker.
func startActivationServer(t *testing.T, resolverNS string, waker activation.Waker) string {
	t.Helper()
	srv := &activation.Server{
		Addr: "127.0.0.1:0",
		Authenticator: &activation.Authenticator{
			Client: k8s, ServiceAccountNamespace: resolverNS, ServiceAccountName: "elasti-resolver",
		},
		Waker: waker,
		Log:   ctrl.Log.WithName("activation"),
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + addr.String() + contract.ActivationPath
}

func activate(url, token, ns, name string) (int, contract.ActivationResponse, error) {
	body, _ := json.Marshal(contract.ActivationRequest{Namespace: ns, ElastiService: name})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, contract.ActivationResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return 0, contract.ActivationResponse{}, err
	}
	defer resp.Body.Close()
	var out contract.ActivationResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return resp.StatusCode, out, err
		}
	}
	return resp.StatusCode, out, nil
}

// TestActivation: a call with the resolver's ServiceAccount token, verified
// by a real TokenReview, wakes the target at once; other callers are refused;
// concurrent calls share one wake.
func TestActivation(t *testing.T) {
	gs := newHeldWakeScaler()
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		deps:     func(d *Deps) { d.Scaler = gs },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createES(t, op.ns, "web", "web", "web", func(es *elastiv1alpha1.ElastiService) { es.Spec.MinTargetReplicas = 2 })
	eventually(t, wait, "asleep", wantReplicas(op.ns, "web", 0))

	url := startActivationServer(t, op.resolverNS, op.waker)
	good := serviceAccountToken(t, op.resolverNS, "elasti-resolver")
	intruder := serviceAccountToken(t, op.resolverNS, "intruder")
	sameNameElsewhere := serviceAccountToken(t, op.ns, "elasti-resolver")

	for _, tc := range []struct {
		name, token, es string
		want            int
	}{
		{"no token", "", "web", http.StatusUnauthorized},
		{"garbage token", "not-a-jwt", "web", http.StatusUnauthorized},
		{"wrong ServiceAccount", intruder, "web", http.StatusForbidden},
		{"right name, wrong namespace", sameNameElsewhere, "web", http.StatusForbidden},
		{"unknown ElastiService", good, "nope", http.StatusNotFound},
	} {
		code, _, err := activate(url, tc.token, op.ns, tc.es)
		if err != nil || code != tc.want {
			t.Errorf("%s: got %d (%v), want %d", tc.name, code, err, tc.want)
		}
	}
	if got := deploymentReplicas(t, op.ns, "web"); got != 0 {
		t.Fatalf("a refused call woke the target: %d replicas", got)
	}

	// Concurrent calls share one wake; each answers once the target has
	// been scaled. The calls start together, and the wake's scale from zero
	// is held until every call has been registered, so none can arrive
	// after the wake completed: a call that started a wake of its own is a
	// broken share, not a late arrival.
	const calls = 20
	// The counter lives in package wakecalls: read it from the registry,
	// by the name and labels the docs give it.
	wakes := func(outcome string) int {
		for _, m := range metricSeries(t, "elasti_operator_wake_requests_total", op.ns, "web") {
			for _, l := range m.GetLabel() {
				if l.GetName() == "wake" && l.GetValue() == outcome {
					return int(m.GetCounter().GetValue())
				}
			}
		}
		return 0
	}
	t.Cleanup(gs.open) // before the activation server and the operator stop
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, resp, err := activate(url, good, op.ns, "web")
			if err != nil || code != http.StatusOK || resp.Replicas != 2 {
				errs <- fmt.Errorf("activation: %d %+v %w", code, resp, err)
			}
		}()
	}
	close(start)
	eventually(t, wait, "every call registered while the wake is held", func() error {
		if gs.calls.Load() == 0 {
			return fmt.Errorf("the wake has not reached its scale from zero")
		}
		if n := wakes("started") + wakes("joined"); n < calls {
			return fmt.Errorf("%d of %d calls registered", n, calls)
		}
		return nil
	})
	gs.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if started, joined := wakes("started"), wakes("joined"); started != 1 || joined != calls-1 {
		t.Errorf("%d concurrent calls: %d started a wake and %d joined a pending one; want 1 started and %d joined",
			calls, started, joined, calls-1)
	}
	if n, scaled := gs.calls.Load(), gs.scaled.Load(); n != 1 || scaled != 1 {
		t.Errorf("%d concurrent calls sent %d scales from zero to the API server, %d of which scaled; want 1 that scaled",
			calls, n, scaled)
	}
	if got := deploymentReplicas(t, op.ns, "web"); got != 2 {
		t.Fatalf("after 200 OK the target has %d replicas, want 2", got)
	}
	if es := getES(t, op.ns, "web"); es.Status.LastScaledUpTime == nil {
		t.Fatal("lastScaledUpTime not recorded")
	}
}

// TestActivationThroughNonLeader: a replica that does not lead hands the
// wake to the leader through the wake-now annotation.
func TestActivationThroughNonLeader(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "api", 1)
	createService(t, op.ns, "api")
	createES(t, op.ns, "api", "api", "api")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "api", 0))

	follower := &wakecalls.Waker{Reader: k8s, Writer: k8s, Elected: make(chan struct{})} // never elected
	url := startActivationServer(t, op.resolverNS, follower)
	code, resp, err := activate(url, serviceAccountToken(t, op.resolverNS, "elasti-resolver"), op.ns, "api")
	if err != nil || code != http.StatusOK || resp.Replicas != 1 {
		t.Fatalf("activation through a follower: %d %+v %v", code, resp, err)
	}
	eventually(t, wait, "leader woke the target", wantReplicas(op.ns, "api", 1))
	eventually(t, wait, "wake-now consumed", func() error {
		if _, ok := getES(t, op.ns, "api").Annotations[contract.AnnotationWakeNow]; ok {
			return fmt.Errorf("annotation still set")
		}
		return nil
	})
}

// heldWakeScaler is the real /scale client, except that a scale from zero
// waits until the test opens the gate: the wake stays pending meanwhile. It
// counts the scales from zero asked of it, and those that scaled.
type heldWakeScaler struct {
	*scaling.Scaler
	gate     chan struct{}
	openOnce sync.Once
	calls    atomic.Int32
	scaled   atomic.Int32
}

func newHeldWakeScaler() *heldWakeScaler {
	return &heldWakeScaler{Scaler: &scaling.Scaler{Client: k8s}, gate: make(chan struct{})}
}

// open lets every scale from zero through, now and later.
func (s *heldWakeScaler) open() { s.openOnce.Do(func() { close(s.gate) }) }

func (s *heldWakeScaler) ScaleFromZero(ctx context.Context, ns string, ref elastiv1alpha1.ScaleTargetRef, n int32) (bool, error) {
	s.calls.Add(1)
	select {
	case <-s.gate:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	ok, err := s.Scaler.ScaleFromZero(ctx, ns, ref, n)
	if ok {
		s.scaled.Add(1)
	}
	return ok, err
}

// raisingScaler is the real /scale client, except that just before its
// first scale from zero another writer raises the target to raiseTo: the
// race a wake must lose gracefully.
type raisingScaler struct {
	*scaling.Scaler
	raiseTo int32
	once    sync.Once
}

func (s *raisingScaler) ScaleFromZero(ctx context.Context, ns string, ref elastiv1alpha1.ScaleTargetRef, n int32) (bool, error) {
	var err error
	s.once.Do(func() { err = s.Scale(ctx, ns, ref, s.raiseTo) })
	if err != nil {
		return false, err
	}
	return s.Scaler.ScaleFromZero(ctx, ns, ref, n)
}

// TestWakeNeverLowersARaisedTarget: a wake assumes a target it put to sleep
// is still at zero and skips reading it; when someone else raised it in the
// meantime, the conditional write leaves their replica count alone and the
// activation answers with it.
func TestWakeNeverLowersARaisedTarget(t *testing.T) {
	rs := &raisingScaler{Scaler: &scaling.Scaler{Client: k8s}, raiseTo: 3}
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		deps:     func(d *Deps) { d.Scaler = rs },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createES(t, op.ns, "web", "web", "web")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "web", 0))

	url := startActivationServer(t, op.resolverNS, op.waker)
	code, resp, err := activate(url, serviceAccountToken(t, op.resolverNS, "elasti-resolver"), op.ns, "web")
	if err != nil || code != http.StatusOK || resp.Replicas != 3 {
		t.Fatalf("activation: %d %+v %v; want 200 with the 3 replicas the other writer set", code, resp, err)
	}
	if got := deploymentReplicas(t, op.ns, "web"); got != 3 {
		t.Fatalf("the wake overwrote the other writer: %d replicas, want 3", got)
	}
}
