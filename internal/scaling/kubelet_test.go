package scaling

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// fakeKubelet serves summary-t0.json after failing the first fail
// requests with a 500, as a kubelet on containerd 1.6 does while a pod
// sandbox is torn down.
func fakeKubelet(t *testing.T, fail int32) (*KubeletSummaries, *atomic.Int32) {
	t.Helper()
	body := readFixture(t, "network/summary-t0.json")
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= fail {
			http.Error(w, "failed to list pod stats", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-a"}, {Type: corev1.NodeInternalIP, Address: host}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(p)}},
	}}
	return &KubeletSummaries{Nodes: fake.NewClientBuilder().WithObjects(node).Build(), Transport: srv.Client().Transport}, &n
}

func TestKubeletSummaryRetriesServerErrors(t *testing.T) {
	k, n := fakeKubelet(t, summaryAttempts-1)
	s, err := k.Summary(context.Background(), "node-a")
	if err != nil || len(s.Pods) == 0 {
		t.Fatalf("summary after %d failures = %v, %v; want the fixture", summaryAttempts-1, s, err)
	}
	if got := n.Load(); got != summaryAttempts {
		t.Errorf("%d requests, want %d", got, summaryAttempts)
	}

	k, n = fakeKubelet(t, summaryAttempts)
	if _, err := k.Summary(context.Background(), "node-a"); err == nil || !strings.Contains(err.Error(), "answered 500") {
		t.Errorf("summary after %d failures: error %v, want the kubelet's 500", summaryAttempts, err)
	}
	if got := n.Load(); got != summaryAttempts {
		t.Errorf("%d requests, want %d: no more than summaryAttempts", got, summaryAttempts)
	}
}

func TestKubeletSummaryShared(t *testing.T) {
	k, n := fakeKubelet(t, 0)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	k.Clock = clk
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := k.Summary(context.Background(), "node-a"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.Load(); got != 1 {
		t.Errorf("8 triggers at once cost the kubelet %d requests, want 1", got)
	}
	clk.SetTime(clk.Now().Add(summaryMaxAge - time.Millisecond))
	if _, err := k.Summary(context.Background(), "node-a"); err != nil || n.Load() != 1 {
		t.Errorf("within %s: %d requests (err %v), want the answer reused", summaryMaxAge, n.Load(), err)
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	if _, err := k.Summary(context.Background(), "node-a"); err != nil || n.Load() != 2 {
		t.Errorf("after %s: %d requests (err %v), want a new one", summaryMaxAge, n.Load(), err)
	}
}
